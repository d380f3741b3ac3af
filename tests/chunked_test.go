package tests

import (
	"context"
	"io"
	"net/http"
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
