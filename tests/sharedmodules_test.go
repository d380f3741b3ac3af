package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/internal/testing/testbuild"
)

// jetStreamConfig is the [store] and [cluster] of host id on the JetStream
// backend at url: the hosts of one test run on one machine, so each needs
// an id of its own (the default, the hostname, would be the same).
func jetStreamConfig(url, stream, id string) string {
	return fmt.Sprintf(`
[store]
backend = "jetstream"

[store.jetstream]
urls = [%q]
stream = %q
subject-prefix = "e2e.%s"

[cluster]
host-id = %q
`, url, stream, stream, id)
}

// TestModulesReachEveryHost: two hosts on one JetStream deployment share
// their modules: an upload, a rollback and a removal made on one reach the
// other within seconds, with the same versions, and a host started later
// finds what was uploaded before it.
func TestModulesReachEveryHost(t *testing.T) {
	srv := natstest.RunServer(t)
	a := newHost(t, hostConfig{Extra: jetStreamConfig(srv.URL(), "SHARED", "a")})
	b := newHost(t, hostConfig{Extra: jetStreamConfig(srv.URL(), "SHARED", "b")})
	summary, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	version := func(h *hostProc, name string) int {
		r := h.request("GET", "/v1/modules/"+name, nil)
		if r.Status != 200 {
			return 0
		}
		var m struct {
			Version int `json:"version"`
		}
		r.JSON(t, &m)
		return m.Version
	}
	a.must(201, "PUT", "/v1/modules/"+moduleName, notifierWasm, "Content-Type", "application/wasm")
	checkfor.Within(t, 10*time.Second, func() error { return versionIs("b", version(b, moduleName), 1) })
	b.must(200, "PUT", "/v1/modules/"+moduleName, summary, "Content-Type", "application/wasm")
	checkfor.Within(t, 10*time.Second, func() error { return versionIs("a", version(a, moduleName), 2) })
	a.must(200, "POST", "/v1/modules/"+moduleName+"/rollback", []byte(`{"version": 1}`), "Content-Type", "application/json")
	checkfor.Within(t, 10*time.Second, func() error { return versionIs("b", version(b, moduleName), 3) })
	var vs struct {
		Versions []moduleVersion `json:"versions"`
	}
	b.must(200, "GET", "/v1/modules/"+moduleName+"/versions", nil).JSON(t, &vs)
	if len(vs.Versions) != 3 || !vs.Versions[2].Current || vs.Versions[2].RolledBackFrom != 1 {
		t.Errorf("versions as b sees them: %+v", vs.Versions)
	}
	// A host that starts later finds the modules.
	c := newHost(t, hostConfig{Extra: jetStreamConfig(srv.URL(), "SHARED", "c")})
	if v := version(c, moduleName); v != 3 {
		t.Errorf("a host started later has version %d, want 3", v)
	}
	b.must(204, "DELETE", "/v1/modules/"+moduleName, nil)
	checkfor.Within(t, 10*time.Second, func() error {
		return errors.Join(versionIs("a", version(a, moduleName), 0), versionIs("c", version(c, moduleName), 0))
	})
}

// TestUploadsToTwoHostsAtOnce: two deployers push different code under one
// module name to two hosts of a deployment at the same moment, a new build
// each time (bytes already current would change nothing). Each upload
// gets a version number of its own (both hosts counted the same next one:
// only one may have it), every kept version holds the bytes its upload
// answered with, and both hosts end on the same current version.
// versionIs says which version of the module host runs until it runs want
// (0: none); nil then.
func versionIs(host string, got, want int) error {
	if got != want {
		return fmt.Errorf("%s runs version %d of the module, want %d", host, got, want)
	}
	return nil
}

func TestUploadsToTwoHostsAtOnce(t *testing.T) {
	srv := natstest.RunServer(t)
	a := newHost(t, hostConfig{Extra: jetStreamConfig(srv.URL(), "RACE", "a")})
	b := newHost(t, hostConfig{Extra: jetStreamConfig(srv.URL(), "RACE", "b")})
	summary, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	const each = 3
	type upload struct {
		Version int    `json:"version"`
		SHA256  string `json:"sha256"`
	}
	var mu sync.Mutex
	var ups []upload
	var wg sync.WaitGroup
	for _, side := range []struct {
		h    *hostProc
		wasm []byte
	}{{a, notifierWasm}, {b, summary}} {
		wg.Go(func() {
			for i := range each {
				wasm := testbuild.Rebuilt(side.wasm, fmt.Sprintf("%s-%d", side.h.URL, i))
				r, err := side.h.try("PUT", "/v1/modules/"+moduleName, wasm, "Content-Type", "application/wasm")
				if err != nil || (r.Status != 200 && r.Status != 201) {
					t.Errorf("PUT on %s: %v %v", side.h.URL, r, err)
					return
				}
				var u upload
				if err := json.Unmarshal(r.Body, &u); err != nil {
					t.Errorf("PUT answer %s: %v", r, err)
					return
				}
				mu.Lock()
				ups = append(ups, u)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	bySHA := map[int]string{}
	for _, u := range ups {
		if bySHA[u.Version] != "" {
			t.Fatalf("version %d given to two uploads: %+v", u.Version, ups)
		}
		bySHA[u.Version] = u.SHA256
	}
	if len(bySHA) != 2*each {
		t.Fatalf("%d versions for %d uploads: %+v", len(bySHA), 2*each, ups)
	}
	for _, h := range []*hostProc{a, b} {
		var vs struct {
			Versions []moduleVersion `json:"versions"`
		}
		h.must(200, "GET", "/v1/modules/"+moduleName+"/versions", nil).JSON(t, &vs)
		for _, v := range vs.Versions {
			if want := bySHA[v.Version]; v.SHA256 != want {
				t.Errorf("%s: version %d holds %s, its upload answered %s", h.URL, v.Version, v.SHA256, want)
			}
		}
	}
	current := func(h *hostProc) upload {
		var u upload
		if r := h.request("GET", "/v1/modules/"+moduleName, nil); r.Status == 200 {
			json.Unmarshal(r.Body, &u)
		}
		return u
	}
	checkfor.Within(t, 10*time.Second, func() error {
		ua, ub := current(a), current(b)
		if ua.Version == 0 || ua != ub || bySHA[ua.Version] != ua.SHA256 {
			return fmt.Errorf("a on %+v, b on %+v; uploads answered %v", ua, ub, bySHA)
		}
		return nil
	})
}
