package sandbox

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// seenRequest is what a test service saw of one request.
type seenRequest struct {
	method, path string
	header       http.Header
	body         []byte
}

// TestHTTPRequestContract pins what ABI.md says of http_request beyond its
// encoding: an empty method is GET; the headers the host adds
// (User-Agent, Accept-Encoding; a guest's own win); redirects followed,
// at most 5, to allowed hosts only; no answer timeout but the call's
// deadline; no body cap but the 16 MiB of an encoded field.
func TestHTTPRequestContract(t *testing.T) {
	var mu sync.Mutex
	var seen []seenRequest
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, seenRequest{r.Method, r.URL.Path, r.Header.Clone(), b})
		mu.Unlock()
		w.Write([]byte("ok"))
	})
	mux.HandleFunc("/loop/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Path+"x", http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	other := httptest.NewServer(mux) // same service, a host not allowed
	defer other.Close()
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/", http.StatusFound)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/landed", http.StatusTemporaryRedirect)
	})

	s := newSandbox(t, Config{})
	m := load(t, s, "samples/misbehaving", ModuleConfig{AllowedHosts: []string{strings.TrimPrefix(srv.URL, "http://")}})
	inst, err := m.newInstance(context.Background(), time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer inst.close()
	do := func(req abi.HTTPRequest, deadline time.Duration) abi.Reply {
		t.Helper()
		mu.Lock()
		seen = nil
		mu.Unlock()
		var own time.Time
		if deadline > 0 {
			own = time.Now().Add(deadline)
		}
		ctx := inst.begin(context.Background(), &abi.Event{Handler: "echo", InvocationKey: "k"}, Ports{}, own)
		defer inst.end()
		defer inst.finish()
		return s.hostHTTP(ctx, &inst.cs, abi.AppendHTTPRequest(nil, &req))
	}
	last := func() seenRequest {
		mu.Lock()
		defer mu.Unlock()
		if len(seen) == 0 {
			t.Fatal("the service saw no request")
		}
		return seen[len(seen)-1]
	}

	// An empty method is GET; the host adds User-Agent and Accept-Encoding.
	if r := do(abi.HTTPRequest{URL: srv.URL + "/a"}, 0); r.Code != abi.ReplyOK {
		t.Fatalf("GET: %+v", r)
	}
	if got := last(); got.method != "GET" || got.header.Get("User-Agent") != "Go-http-client/1.1" || got.header.Get("Accept-Encoding") != "gzip" {
		t.Errorf("empty method: %s, headers %v", got.method, got.header)
	}
	// The guest's own headers win.
	do(abi.HTTPRequest{Method: "POST", URL: srv.URL + "/b", Headers: []abi.Header{{Name: "User-Agent", Value: "mine/1"}, {Name: "Accept-Encoding", Value: "identity"}}, Body: []byte("x")}, 0)
	if got := last(); got.method != "POST" || got.header.Get("User-Agent") != "mine/1" || got.header.Get("Accept-Encoding") != "identity" || string(got.body) != "x" {
		t.Errorf("guest headers: %s %v %q", got.method, got.header, got.body)
	}
	// Redirects are followed (a 307 keeps method and body) ...
	if r := do(abi.HTTPRequest{Method: "PUT", URL: srv.URL + "/moved", Body: []byte("kept")}, 0); r.Code != abi.ReplyOK {
		t.Fatalf("redirect: %+v", r)
	}
	if got := last(); got.path != "/landed" || got.method != "PUT" || string(got.body) != "kept" {
		t.Errorf("after a 307: %s %s %q", got.method, got.path, got.body)
	}
	// ... at most 5 times, and only to allowed hosts: else an Error reply.
	if r := do(abi.HTTPRequest{URL: srv.URL + "/loop/"}, 0); r.Code != abi.ReplyError || !strings.Contains(r.Message, "too many redirects") {
		t.Errorf("a redirect loop: %+v", r)
	}
	if r := do(abi.HTTPRequest{URL: srv.URL + "/away"}, 0); r.Code != abi.ReplyError || !strings.Contains(r.Message, "not in the module's allowed hosts") {
		t.Errorf("a redirect to another host: %+v", r)
	}
	// No answer timeout of its own: the call's deadline ends the wait.
	start := time.Now()
	if r := do(abi.HTTPRequest{URL: srv.URL + "/slow"}, 300*time.Millisecond); r.Code != abi.ReplyTimeout || time.Since(start) > 5*time.Second {
		t.Errorf("a slow answer: %+v after %v", r, time.Since(start))
	}
	// The request body: any size an encoded field holds (16 MiB), no more.
	big := bytes.Repeat([]byte("b"), 2<<20)
	if r := do(abi.HTTPRequest{Method: "POST", URL: srv.URL + "/big", Body: big}, 0); r.Code != abi.ReplyOK || len(last().body) != len(big) {
		t.Errorf("a 2 MiB body: %+v", r)
	}
	over := abi.AppendHTTPRequest(nil, &abi.HTTPRequest{Method: "POST", URL: srv.URL + "/big", Body: make([]byte, abi.MaxFieldLen+1)})
	ctx := inst.begin(context.Background(), &abi.Event{Handler: "echo", InvocationKey: "k"}, Ports{}, time.Time{})
	r := s.hostHTTP(ctx, &inst.cs, over)
	inst.finish()
	inst.end()
	if r.Code != abi.ReplyError || !strings.HasPrefix(r.Message, "bad request") {
		t.Errorf("a body past 16 MiB: %+v", r)
	}
}
