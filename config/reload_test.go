package config

import (
	"slices"
	"testing"
)

func TestDiffAndChanges(t *testing.T) {
	old := Default()
	next, err := Parse([]byte(`
[server]
listen = "127.0.0.1:9090"
max-body-size = "2MiB"
[subscription.retry]
max-attempts = 8
[subscriptions."A.b".retry]
timeout = "1s"
[sandbox]
max-instances = 4
[[auth.tokens]]
name = "x"
role = "admin"
token = "t0p-secret"
`), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	wantChanges := []string{
		"auth.tokens[0].name", "auth.tokens[0].role", "auth.tokens[0].token", "auth.tokens[0].token-env",
		"sandbox.max-instances", "server.listen", "server.max-body-size",
		"subscription.retry.max-attempts",
		`subscriptions."A.b".parked.first-delay`, `subscriptions."A.b".parked.max-delay`,
		`subscriptions."A.b".parked.max-retries`, `subscriptions."A.b".parked.retry-unrecoverable`, `subscriptions."A.b".parked.timeout`,
		`subscriptions."A.b".retry.backpressure-attempts`, `subscriptions."A.b".retry.initial-backoff`,
		`subscriptions."A.b".retry.max-attempts`, `subscriptions."A.b".retry.max-backoff`,
		`subscriptions."A.b".retry.recoverable`, `subscriptions."A.b".retry.timeout`,
		`subscriptions."A.b".retry.unrecoverable`,
	}
	if got := Changes(old, next); !slices.Equal(got, wantChanges) {
		t.Errorf("Changes = %q\nwant      %q", got, wantChanges)
	}
	if got, want := Diff(old, next), []string{"sandbox.max-instances", "server.listen"}; !slices.Equal(got, want) {
		t.Errorf("Diff = %q, want %q", got, want)
	}
	if got := Diff(next, next); len(got) != 0 {
		t.Errorf("Diff of the same config = %q", got)
	}
}

func TestNeedsRestart(t *testing.T) {
	for k, want := range map[string]bool{
		"server.listen": true, "server.data-dir": true, "sandbox.idle-timeout": true, "log.format": true,
		"server.max-body-size": false, "subscription.retry.timeout": false, "log.level": false,
		"sandboxes": false, "modules.x.memory-limit": false,
	} {
		if NeedsRestart(k) != want {
			t.Errorf("NeedsRestart(%s) = %v", k, !want)
		}
	}
}
