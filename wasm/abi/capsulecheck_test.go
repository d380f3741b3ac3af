package abi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// validCapsule is a capsule as a host records one: an http call answered
// 404, a log line, a failure.
func validCapsule() *Capsule {
	ev := Event{Handler: "notifyBuyer", InvocationKey: "P.h:Order/1@1:0", Attempt: 1, Type: "Shipped", Payload: []byte(`{}`)}
	return &Capsule{
		Format: CapsuleFormat,
		Module: CapsuleModule{Name: "notifier", Version: 1, SHA256: strings.Repeat("ab", 32)},
		Limits: CapsuleLimits{TimeoutMillis: 300, MemoryLimitPages: 1024, AllowedHosts: []string{"svc"}, MaxResponseBytes: 1 << 20},
		Event:  CapsuleEventOf(&ev),
		Calls: []CapsuleCall{
			{Fn: CallHTTP, HTTP: &CapsuleHTTP{Method: "GET", URL: "http://svc/b", Response: &CapsuleHTTPRes{Status: 404, Body: Blob("no")}}, Reply: &CapsuleReply{Code: "ok"}},
			{Fn: CallLog, Log: &CapsuleLog{Level: "info", Text: Blob("line")}},
		},
		Outcome: CapsuleOutcome{Kind: "failure", Message: "unknown buyer"},
	}
}

func encode(t *testing.T, c *Capsule) []byte {
	t.Helper()
	b, err := EncodeCapsule(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeCapsuleValidatesEveryField: each field a replay uses is
// checked, and the error names it (and, for a call, the call).
func TestDecodeCapsuleValidatesEveryField(t *testing.T) {
	if _, err := DecodeCapsule(encode(t, validCapsule())); err != nil {
		t.Fatalf("a host's capsule: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(c *Capsule)
		want string
	}{
		{"memory 65537", func(c *Capsule) { c.Limits.MemoryLimitPages = 65537 }, "limits.memory_limit_pages: 65537"},
		{"memory 100000", func(c *Capsule) { c.Limits.MemoryLimitPages = 100000 }, "limits.memory_limit_pages: 100000"},
		{"memory max uint32", func(c *Capsule) { c.Limits.MemoryLimitPages = 4294967295 }, "limits.memory_limit_pages: 4294967295"},
		{"negative timeout", func(c *Capsule) { c.Limits.TimeoutMillis = -1 }, "limits.timeout_ms: -1"},
		{"timeout past a Duration", func(c *Capsule) { c.Limits.TimeoutMillis = 1 << 62 }, "limits.timeout_ms"},
		{"negative response cap", func(c *Capsule) { c.Limits.MaxResponseBytes = -5 }, "limits.max_response_bytes"},
		{"empty allowed host", func(c *Capsule) { c.Limits.AllowedHosts = []string{""} }, "limits.allowed_hosts[0]"},
		{"no module name", func(c *Capsule) { c.Module.Name = "" }, "module.name"},
		{"negative version", func(c *Capsule) { c.Module.Version = -1 }, "module.version"},
		{"bad sha256", func(c *Capsule) { c.Module.SHA256 = "xyz" }, "module.sha256"},
		{"no handler", func(c *Capsule) { c.Event.Handler = "" }, "event.handler"},
		{"unknown fn", func(c *Capsule) { c.Calls[0].Fn = "teleport" }, `calls[0] (teleport GET http://svc/b): fn "teleport"`},
		{"response without reply", func(c *Capsule) { c.Calls[0].Reply = nil }, "calls[0] (http GET http://svc/b): http.response: only an http call answered ok"},
		{"unknown code", func(c *Capsule) { c.Calls[0].Reply.Code = "maybe" }, `reply.code "maybe"`},
		{"response on an error", func(c *Capsule) { c.Calls[0].Reply.Code = "error" }, "http.response: only an http call answered ok"},
		{"bad status", func(c *Capsule) { c.Calls[0].HTTP.Response.Status = 7 }, "http.response.status 7"},
		{"log without line", func(c *Capsule) { c.Calls[1].Log = nil }, "calls[1] (log): log: absent"},
		{"log level", func(c *Capsule) { c.Calls[1].Log.Level = "loud" }, `log.level "loud"`},
		{"outcome kind", func(c *Capsule) { c.Outcome.Kind = "exploded" }, `outcome.kind: "exploded"`},
		{"impossible body", func(c *Capsule) {
			c.Limits.MaxResponseBytes = 1024
			c.Calls[0].HTTP.Response.Body = bytes.Repeat([]byte("x"), 4096)
		}, "calls[0] (http GET http://svc/b): http.response.body: 4096 bytes, more than the host delivered (limits.max_response_bytes) (1024): no host could have answered it"},
	} {
		c := validCapsule()
		tc.edit(c)
		_, err := DecodeCapsule(encode(t, c))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", tc.name, err, tc.want)
		}
	}
	// What the JSON cannot hold at all is an error too, never a panic.
	for _, raw := range []string{`{"format":"berth-capsule/1","limits":{"memory_limit_pages":4294967296}}`, `{"format":"berth-capsule/1","calls":{}}`, `[]`, ``} {
		if _, err := DecodeCapsule([]byte(raw)); err == nil {
			t.Errorf("%s decoded", raw)
		}
	}
}

// TestDecodeCapsuleRefusesWhatNoHostRecords: a file past MaxCapsuleBytes
// (500,000 recorded calls) is not a Berth capsule; an indented copy of
// one just under the bound still reads.
func TestDecodeCapsuleRefusesWhatNoHostRecords(t *testing.T) {
	call := `{"fn":"log","log":{"level":"info","text":"line"}},`
	raw := `{"format":"berth-capsule/1","calls":[` + strings.Repeat(call, 499_999) + call[:len(call)-1] + `]}`
	_, err := DecodeCapsule([]byte(raw))
	if err == nil || !strings.Contains(err.Error(), "not a Berth capsule") || !strings.Contains(err.Error(), fmt.Sprint(MaxCapsuleBytes)) {
		t.Fatalf("500,000 calls: %v", err)
	}
	c := validCapsule()
	c.Event.Payload = Blob(strings.Repeat("p", MaxCapsuleBytes-32<<10))
	for range 200 {
		c.Calls = append(c.Calls, c.Calls[1])
	}
	b := encode(t, c)
	var wide bytes.Buffer
	if err := json.Indent(&wide, b, strings.Repeat(" ", 100), "\t"); err != nil {
		t.Fatal(err)
	}
	if wide.Len() <= MaxCapsuleBytes {
		t.Fatalf("the indented copy is %d bytes, meant to be over %d", wide.Len(), MaxCapsuleBytes)
	}
	if _, err := DecodeCapsule(wide.Bytes()); err != nil {
		t.Fatalf("an indented capsule of %d bytes (compact under the bound): %v", wide.Len(), err)
	}
}

// FuzzDecodeCapsule: any bytes decode to a capsule that validates, or to
// an error; never a panic.
func FuzzDecodeCapsule(f *testing.F) {
	b, err := EncodeCapsule(validCapsule())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"format":"berth-capsule/1","limits":{"memory_limit_pages":100000}}`))
	f.Add([]byte(`{"format":"berth-capsule/1","calls":[{"fn":"http","reply":{"code":"code_200"},"http":{"response":{"status":200}}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCapsule(b)
		if err == nil {
			if err := c.Validate(); err != nil {
				t.Fatalf("decoded a capsule that does not validate: %v", err)
			}
		}
	})
}
