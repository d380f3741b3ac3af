package api

import "net/http"

// problemBase is the URI every problem type of the API is named under.
const problemBase = "https://berth.dev/problems/"

// problemTypes is the catalogue of the API's RFC 9457 problem types: each
// one's name under problemBase and the status it is sent with (its title
// is the status's text). TestEveryProblemTypeIsCatalogued keeps the
// server's problems in it.
var problemTypes = map[string]int{
	"absolute-form":          http.StatusBadRequest,
	"abi":                    http.StatusBadRequest,
	"broken-body":            http.StatusBadRequest,
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
