package wire

import (
	"net/http"
	"slices"
	"strings"
)

// ProblemBase is the URI every problem type of the API is named under.
const ProblemBase = "https://berth.dev/problems/"

// problemTypes is the catalogue of the API's RFC 9457 problem types: each
// one's name under ProblemBase and the status it is sent with (its title
// is the status's text). The server sends only these (api's
// TestEveryProblemTypeIsCatalogued), openapi.json lists them, and the CLI
// chooses its exit code by them.
var problemTypes = map[string]int{
	"absolute-form":          http.StatusBadRequest,
	"abi":                    http.StatusBadRequest,
	"bad-digest":             http.StatusBadRequest,
	"broken-body":            http.StatusBadRequest,
	"digest-mismatch":        http.StatusBadRequest,
	"invalid-config":         http.StatusBadRequest,
	"invalid-event":          http.StatusBadRequest,
	"invalid-json":           http.StatusBadRequest,
	"invalid-module":         http.StatusBadRequest,
	"invalid-name":           http.StatusBadRequest,
	"invalid-path":           http.StatusBadRequest,
	"invalid-query":          http.StatusBadRequest,
	"invalid-request":        http.StatusBadRequest,
	"not-wasm":               http.StatusBadRequest,
	"out-of-range":           http.StatusBadRequest,
	"unauthorized":           http.StatusUnauthorized,
	"cross-origin":           http.StatusForbidden,
	"forbidden":              http.StatusForbidden,
	"foreign-host":           http.StatusForbidden,
	"not-found":              http.StatusNotFound,
	"method-not-allowed":     http.StatusMethodNotAllowed,
	"busy":                   http.StatusConflict,
	"conflict":               http.StatusConflict,
	"finished":               http.StatusConflict,
	"not-deployed":           http.StatusConflict,
	"version-conflict":       http.StatusConflict,
	"too-large":              http.StatusRequestEntityTooLarge,
	"unsupported-media-type": http.StatusUnsupportedMediaType,
	"internal":               http.StatusInternalServerError,
	"cluster-unavailable":    http.StatusServiceUnavailable,
	"lease-lapsed":           http.StatusServiceUnavailable,
	"nats-unavailable":       http.StatusServiceUnavailable,
	"not-ready":              http.StatusServiceUnavailable,
	"store-cannot-write":     http.StatusServiceUnavailable,
	"store-unavailable":      http.StatusServiceUnavailable,
	"unavailable":            http.StatusServiceUnavailable,
	"insufficient-storage":   http.StatusInsufficientStorage,
}

// ProblemStatus is the HTTP status the API sends problem type name with
// (name is the part of the type's URI after ProblemBase); false when the
// catalogue does not name it.
func ProblemStatus(name string) (int, bool) {
	status, ok := problemTypes[name]
	return status, ok
}

// ProblemName is the name of a problem type URI under ProblemBase; "" when
// the URI is not under it.
func ProblemName(uri string) string {
	name, ok := strings.CutPrefix(uri, ProblemBase)
	if !ok {
		return ""
	}
	return name
}

// ProblemNames lists the catalogue's problem types by name, sorted.
func ProblemNames() []string {
	names := make([]string, 0, len(problemTypes))
	for name := range problemTypes {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
