package config

import (
	"strings"
	"testing"
)

// subscription.parked.retry-unrecoverable is off by default, set host-wide, and overridden per
// subscription either way; a value that is not a boolean is refused with its key.
func TestParkedRetryUnrecoverable(t *testing.T) {
	tests := []struct {
		toml string
		want map[string]bool // subscription -> RetriesUnrecoverable
	}{
		{"", map[string]bool{"A.b": false}},
		{"[subscription.parked]\nretry-unrecoverable = true\n", map[string]bool{"A.b": true}},
		{"[subscription.parked]\nretry-unrecoverable = true\n[subscriptions.\"A.b\".parked]\nretry-unrecoverable = false\n",
			map[string]bool{"A.b": false, "C.d": true}},
		{"[subscriptions.\"A.b\".parked]\nretry-unrecoverable = true\n", map[string]bool{"A.b": true, "C.d": false}},
	}
	for _, tt := range tests {
		c, err := Parse([]byte(tt.toml), "berth.toml")
		if err != nil {
			t.Fatalf("%q: %v", tt.toml, err)
		}
		for sub, want := range tt.want {
			if got := c.Parked(sub).RetriesUnrecoverable(); got != want {
				t.Errorf("%q: Parked(%s).RetriesUnrecoverable() = %v, want %v", tt.toml, sub, got, want)
			}
		}
	}
	_, err := Parse([]byte("[subscription.parked]\nretry-unrecoverable = \"yes\"\n"), "berth.toml")
	if err == nil || !strings.Contains(err.Error(), "subscription.parked.retry-unrecoverable") || !strings.Contains(err.Error(), "want true or false") {
		t.Errorf("a string for retry-unrecoverable: %v", err)
	}
}
