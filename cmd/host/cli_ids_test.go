package main

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestIDsArePathEscaped: the operator verbs send a subscription, type and id
// of any characters as one percent-encoded path segment each, so that the
// server, decoding each segment once, gets them exactly as given.
func TestIDsArePathEscaped(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains("/"+r.URL.EscapedPath()+"/", "/../") || strings.Contains("/"+r.URL.EscapedPath()+"/", "/./") {
			t.Errorf("%s: a bare dot segment, which proxies and browsers remove", r.URL.EscapedPath())
		}
		var segs []string
		for _, s := range strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/") {
			u, err := url.PathUnescape(s)
			if err != nil {
				t.Errorf("segment %q of %s: %v", s, r.URL.EscapedPath(), err)
			}
			segs = append(segs, u)
		}
		mu.Lock()
		got = segs
		mu.Unlock()
		switch r.Method {
		case http.MethodPost:
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte(`{"status":"ok"}`))
		default:
			w.Write([]byte(`{"subscription":"S","aggregateType":"T","aggregateId":"I","version":1,"state":"waiting","error":{"message":"m"},"history":[]}`))
		}
	}))
	defer srv.Close()
	ids := []string{"a/b", "a%2Fb", "a%252Fb", "%2E%2E", "..", ".", "...", "x:y@z", "q?x=1#frag", "sp ace", "plus+sign", "ünï/cødé", "semi;colon", "a\\b"}
	for _, id := range ids {
		for _, verb := range []string{"show", "resume", "skip"} {
			code, out, errOut := runCLI(srv.URL, "parked", verb, "Sub.h/x", "Ty/pe%", id)
			if code != exitOK {
				t.Errorf("parked %s %q: exit %d\n%s%s", verb, id, code, out, errOut)
				continue
			}
			want := []string{"v1", "subscriptions", "Sub.h/x", "parked", "Ty/pe%", id}
			if verb != "show" {
				want = append(want, verb)
			}
			mu.Lock()
			if !slices.Equal(got, want) {
				t.Errorf("parked %s %q reached %q, want %q", verb, id, got, want)
			}
			mu.Unlock()
		}
	}
}
