package config

import (
	"slices"
	"strings"
	"testing"
)

// Standard Webhooks secrets from the file and from the environment reach
// the dispatcher's hook, in that order, beside the deprecated secret.
func TestWebhookStandardSecrets(t *testing.T) {
	const inFile, inEnv = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2VjcmV0LWtleS1iZWluZy1yb3RhdGVkLW91dA=="
	t.Setenv("BERTH_TEST_WHSEC", inEnv)
	c, err := Parse([]byte(`
[[webhooks]]
name = "a"
url = "https://hooks.example.com/berth"
secrets = ["`+inFile+`"]
secrets-env = ["BERTH_TEST_WHSEC"]
secret = "legacy"
`), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	h := c.Hooks()[0]
	//lint:ignore SA1019 the deprecated secret key is still read.
	legacy := h.Secret
	if !slices.Equal(h.Secrets, []string{inFile, inEnv}) || legacy != "legacy" {
		t.Errorf("hook secrets %q, secret %q", h.Secrets, legacy)
	}

	errs := parseErrs(t, `
[[webhooks]]
name = "a"
url = "https://x.example.com"
secrets = ["MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_!!", "whsec_c2hvcnQ=", "`+inFile+`", "`+inFile+`"]
secrets-env = ["BERTH_TEST_UNSET"]
`)
	want := []string{
		`berth.toml:5: webhooks[0].secrets[0]: a secret begins with "whsec_"`,
		`berth.toml:5: webhooks[0].secrets[1]: after "whsec_" a secret is standard base64`,
		`berth.toml:5: webhooks[0].secrets[2]: a secret's key is 24 to 64 bytes, this one is 5`,
		`berth.toml:5: webhooks[0].secrets[4]: the same secret is listed twice`,
		`berth.toml:6: webhooks[0].secrets-env[0]: "BERTH_TEST_UNSET": the environment variable is not set or empty`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got\n%s", strings.Join(errs, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(errs[i], want[i]) {
			t.Errorf("error %d = %s\nwant prefix %s", i, errs[i], want[i])
		}
		if strings.Contains(errs[i], "MfKQ9r8") {
			t.Errorf("error %d shows a secret: %s", i, errs[i])
		}
	}
}
