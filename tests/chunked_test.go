package tests

import (
	"bufio"
	"context"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestResumeEmptyChunkedBody resumes with an empty body sent chunked (no
// Content-Length), as a streaming client does: the body of resume is
// optional, so an empty one must be taken as no body at all.
func TestResumeEmptyChunkedBody(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	svc.set("ghost", behaviour{Unknown: true})
	h.appendShipped(t, "o-e", "ghost")
	h.waitParked(t, "o-e", 20*time.Second)
	svc.set("ghost", behaviour{})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := io.NopCloser(strings.NewReader("")) // unknown length: sent chunked
	req, err := http.NewRequestWithContext(ctx, "POST", h.URL+"/v1/subscriptions/"+subName+"/parked/Order/o-e/resume", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength, req.TransferEncoding = -1, []string{"chunked"}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 202 {
		t.Fatalf("resume with an empty chunked body: %d %s, want 202 (the body is optional)", resp.StatusCode, b)
	}
	svc.waitNotified(t, key("o-e", 1), 20*time.Second)
}

// rawRequest sends head and body to the host over one TCP connection as
// they are, closes the sending side (so a body shorter than its
// Content-Length ends there) and returns the answer.
func rawRequest(t *testing.T, h *hostProc, head, body string) response {
	t.Helper()
	return rawExchange(t, h, head, body, true, 20*time.Second)
}

// rawExchange sends head and body to the host over one TCP connection,
// closing the sending side after them when closeWrite, and returns the
// answer, failing the test when none comes within the time given.
func rawExchange(t *testing.T, h *hostProc, head, body string, closeWrite bool, within time.Duration) response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(h.URL, "http://"), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(within))
	if _, err := io.WriteString(conn, head+"\r\n"+body); err != nil {
		t.Fatal(err)
	}
	if closeWrite {
		conn.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to %q within %s: %v", strings.SplitN(head, "\r\n", 2)[0], within, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

// TestBrokenBodies: a body that breaks off — a malformed chunk, or fewer
// bytes than its Content-Length, even after a whole JSON object — is the
// client's fault: a 400 problem that says so, never a 500, and nothing is
// done (no module stored, no event appended, the parked record intact).
func TestBrokenBodies(t *testing.T) {
	svc := newNotifier(t)
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	svc.set("ghost", behaviour{Unknown: true})
	host := strings.TrimPrefix(h.URL, "http://")
	header := func(method, path, ct string, extra ...string) string {
		return method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Type: " + ct + "\r\n" + strings.Join(extra, "")
	}
	half := string(notifierWasm[:len(notifierWasm)/2])
	modulePath := "/v1/modules/" + moduleName
	for name, r := range map[string]response{
		"short": rawRequest(t, h, header("PUT", modulePath, "application/wasm", "Content-Length: "+strconv.Itoa(len(notifierWasm))+"\r\n"), half),
		"bad chunk": rawRequest(t, h, header("PUT", modulePath, "application/wasm", "Transfer-Encoding: chunked\r\n"),
			strconv.FormatInt(int64(len(half)), 16)+"\r\n"+half+"\r\nzz\r\n"),
	} {
		if p := brokenProblem(t, r); p.Status != 400 {
			t.Errorf("module upload, %s body: %s", name, r)
		}
	}
	h.must(404, "GET", modulePath, nil)

	h.uploadNotifier(t, 201)
	h.appendShipped(t, "o-b", "ghost")
	h.waitParked(t, "o-b", 20*time.Second)
	parked := "/v1/subscriptions/" + subName + "/parked/Order/o-b"
	record := string(h.must(200, "GET", parked, nil).Body)
	event := `{"aggregateType":"Order","aggregateId":"o-new","events":[{"type":"OrderShipped","data":{}}]}`
	for _, w := range []struct{ path, body string }{
		{"/v1/events", event}, {parked + "/resume", `{"reason":"x"}`}, {parked + "/skip", `{"reason":"x"}`},
	} {
		for name, raw := range map[string][2]string{
			"short after the object": {"Content-Length: " + strconv.Itoa(len(w.body)+100) + "\r\n", w.body + "  "},
			"bad chunk after the object": {"Transfer-Encoding: chunked\r\n",
				strconv.FormatInt(int64(len(w.body)), 16) + "\r\n" + w.body + "\r\nnot-hex\r\n"},
			"chunked, cut after the object": {"Transfer-Encoding: chunked\r\n", strconv.FormatInt(int64(len(w.body)), 16) + "\r\n" + w.body + "\r\n"},
		} {
			r := rawRequest(t, h, header("POST", w.path, "application/json", raw[0]), raw[1])
			if p := brokenProblem(t, r); p.Status != 400 {
				t.Errorf("POST %s, %s: %s", w.path, name, r)
			}
		}
	}
	h.must(404, "GET", "/v1/aggregates/Order/o-new/events", nil)
	if got := string(h.must(200, "GET", parked, nil).Body); got != record {
		t.Errorf("the parked record changed:\nbefore %s\nafter  %s", record, got)
	}
}

// brokenProblem checks that r is a problem document and returns it.
func brokenProblem(t *testing.T, r response) problemDoc {
	t.Helper()
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/problem+json" {
		t.Errorf("answer %s: Content-Type %q, want application/problem+json", r, r.Header.Get("Content-Type"))
	}
	var p problemDoc
	r.JSON(t, &p)
	return p
}
