package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
)

//go:embed openapi.json
var openapiDoc []byte

func (s *Server) openapi(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/json", openapiDoc)
}

// openapiPath turns echo's /a/:name into OpenAPI's /a/{name}.
func openapiPath(echoPath string) string {
	segs := strings.Split(echoPath, "/")
	for i, s := range segs {
		if name, ok := strings.CutPrefix(s, ":"); ok {
			segs[i] = "{" + name + "}"
		}
	}
	return strings.Join(segs, "/")
}

// documentedQuery returns, for each operation of openapi.json ("GET
// /v1/parked"), the query parameters it documents. The document is the
// one list of them: the OpenAPI test keeps it equal to what each handler
// reads, and checkQuery refuses every other parameter.
func documentedQuery(doc []byte) (map[string][]string, error) {
	type param struct {
		Ref  string `json:"$ref"`
		Name string `json:"name"`
		In   string `json:"in"`
	}
	var d struct {
		Paths      map[string]map[string]struct{ Parameters []param } `json:"paths"`
		Components struct {
			Parameters map[string]param `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	out := map[string][]string{}
	for path, item := range d.Paths {
		for method, op := range item {
			key := strings.ToUpper(method) + " " + path
			out[key] = []string{}
			for _, p := range op.Parameters {
				if name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
					var found bool
					if p, found = d.Components.Parameters[name]; !found {
						return nil, fmt.Errorf("openapi.json: %s: unresolved parameter %s", key, name)
					}
				}
				if p.In == "query" {
					out[key] = append(out[key], p.Name)
				}
			}
		}
	}
	return out, nil
}
