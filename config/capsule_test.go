package config

import (
	"slices"
	"strings"
	"testing"
)

// [capsule] reaches the sandbox: its defaults, a cap of the operator's, and [] (redact nothing), which
// the sandbox must not read as "the default".
func TestCapsuleKeys(t *testing.T) {
	c, err := Parse([]byte(""), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sandbox()
	if s.CapsuleMaxBytes != 262144 || !slices.Equal(s.CapsuleRedactHeaders, []string{"Authorization", "Cookie", "Proxy-Authorization", "Set-Cookie"}) {
		t.Errorf("default capsule settings %d %q", s.CapsuleMaxBytes, s.CapsuleRedactHeaders)
	}
	c, err = Parse([]byte("[capsule]\nmax-bytes = \"1MiB\"\nredact-headers = []\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Sandbox(); s.CapsuleMaxBytes != 1<<20 || s.CapsuleRedactHeaders == nil || len(s.CapsuleRedactHeaders) != 0 {
		t.Errorf("capsule settings %d %q", s.CapsuleMaxBytes, s.CapsuleRedactHeaders)
	}
	if !NeedsRestart("capsule.max-bytes") {
		t.Error("capsule.max-bytes applies on reload, which the sandbox cannot")
	}
	for _, bad := range []string{"max-bytes = 0", "max-bytes = \"2MiB\"", "redact-config = [\"[\"]", "redact-headers = [\"X Bad\"]"} {
		if _, err := Parse([]byte("[capsule]\n"+bad+"\n"), "berth.toml"); err == nil || !strings.Contains(err.Error(), "capsule.") {
			t.Errorf("%s: error %v, want one naming the key", bad, err)
		}
	}
}
