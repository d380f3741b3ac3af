package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/config"
)

// TestPathParamsNotUTF8: on every route, a path parameter that is not
// valid UTF-8 once decoded is a 400 invalid-path problem naming it, before
// the handler runs — but a projection's key, which is whatever bytes its
// guest chose, reaches the handler.
func TestPathParamsNotUTF8(t *testing.T) {
	t.Parallel()
	s := New(Deps{Config: config.Default})
	for _, rt := range s.routeTable() {
		for _, name := range []string{":name", ":type", ":id", ":subscription", ":key"} {
			if !strings.Contains(rt.path, name) {
				continue
			}
			for _, bad := range []string{"%FF", "a%C3", "%ED%A0%80"} { // a lone byte, a cut sequence, an encoded surrogate
				path := strings.Replace(rt.path, name, bad, 1)
				path = samplePath(path)
				r := serveRecovered(s, req{method: rt.method, path: path})
				if name == ":key" {
					if r.status == http.StatusBadRequest {
						t.Errorf("%s %s: a projection key that is not UTF-8 is refused: %s", rt.method, path, r)
					}
					continue
				}
				if r.status == 0 {
					t.Errorf("%s %s reached its handler", rt.method, path)
					continue
				}
				if p := problemOf(t, r, http.StatusBadRequest); p.Type != "https://berth.dev/problems/invalid-path" || p.Field != name[1:] {
					t.Errorf("%s %s: %+v, want invalid-path naming %s", rt.method, path, p, name[1:])
				}
			}
		}
	}
}
