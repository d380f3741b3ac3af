package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayCapsuleFileIsCheckedBeforeUse: `parked replay --capsule F`
// with a field no host records ends in an error naming it (never a Go
// stack trace), and --max-time must be positive.
func TestReplayCapsuleFileIsCheckedBeforeUse(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string { return writeFile(t, dir, name, body) }
	capsule := func(limits string) string {
		return `{"format":"berth-capsule/1","module":{"name":"notifier"},"limits":` + limits +
			`,"event":{"handler":"onOrderShipped","type":"OrderShipped"},"outcome":{"kind":"failure"}}`
	}
	big := write("big.json", `{"format":"berth-capsule/1","calls":[`+strings.Repeat(`{"fn":"log"},`, 200_000)+`{"fn":"log"}]}`)
	for _, c := range []struct {
		file string
		args []string
		code int
		want string
	}{
		{write("m100000.json", capsule(`{"memory_limit_pages":100000}`)), nil, exitFailed, "limits.memory_limit_pages: 100000"},
		{write("m65537.json", capsule(`{"memory_limit_pages":65537}`)), nil, exitFailed, "limits.memory_limit_pages: 65537"},
		{write("mbig.json", capsule(`{"memory_limit_pages":4294967295}`)), nil, exitFailed, "limits.memory_limit_pages: 4294967295"},
		{write("body.json", capsule(`{"max_response_bytes":2}`)[:len(capsule(`{"max_response_bytes":2}`))-1]+
			`,"calls":[{"fn":"http","http":{"method":"POST","url":"http://n/notify","response":{"status":200,"body":"long"}},"reply":{"code":"ok"}}]}`),
			nil, exitFailed, "calls[0] (http POST http://n/notify): http.response.body: 4 bytes"},
		{big, nil, exitFailed, "not a Berth capsule"},
		{write("ok.json", capsule(`{"timeout_ms":0}`)), []string{"--max-time", "0s"}, exitUsage, "--max-time 0s: want a positive duration"},
	} {
		args := append([]string{"parked", "replay", "--capsule", c.file, "--module", sampleWasm}, c.args...)
		code, _, stderr := runCLI("", args...)
		if code != c.code || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "goroutine") {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", filepath.Base(c.file), code, stderr, c.code, c.want)
		}
	}
	// A budget of 0 (none) replays, under --max-time's default.
	code, stdout, stderr := runCLI("", "parked", "replay", "--capsule", write("zero.json", capsule(`{"timeout_ms":0}`)), "--module", sampleWasm)
	if code != 0 || !strings.Contains(stdout, "replayed:    success") {
		t.Errorf("timeout_ms 0: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
