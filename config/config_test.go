package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/sandbox"
)

func noEnv(string) (string, bool) { return "", false }

// parseErrs parses text as berth.toml and returns its errors rendered, one a line.
func parseErrs(t *testing.T, text string) []string {
	t.Helper()
	_, err := parse([]byte(text), "berth.toml", noEnv)
	if err == nil {
		return nil
	}
	var out []string
	for _, e := range Errors(err) {
		out = append(out, e.Error())
	}
	if len(out) == 0 {
		t.Fatalf("error without *Error: %v", err)
	}
	return out
}

func TestParseErrorsNameKeyAndLine(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string // each a prefix of one error, in order
	}{
		{"unknown key", "[subscription.retry]\nmax-attempts = 3\nmax-atempts = 4\n",
			[]string{"berth.toml:3: unknown key subscription.retry.max-atempts (did you mean max-attempts?)"}},
		{"unknown table", "\n[sever]\nlisten = \"x\"\n",
			[]string{"berth.toml:2: unknown key sever (did you mean server?)"}},
		{"bad duration", "[subscription]\n\n[subscription.retry]\n\n\n\ninitial-backoff = \"2 parsecs\"\n",
			[]string{`berth.toml:7: subscription.retry.initial-backoff: "2 parsecs": space between "2" and its unit`}},
		{"wrong type", "[server]\nlisten = 8080\n",
			[]string{"berth.toml:2: server.listen: 8080: want a string, got an integer"}},
		{"all errors at once", "[server]\nlisten = \"nope\"\ndata-dir = \"\"\n[log]\nlevel = \"loud\"\nformat = 3\n",
			[]string{
				`berth.toml:2: server.listen: "nope": want host:port`,
				`berth.toml:3: server.data-dir: "": must not be empty`,
				`berth.toml:5: log.level: "loud": want debug, info, warn or error`,
				`berth.toml:6: log.format: 3: want a string, got an integer`,
			}},
		{"syntax error", "[server]\nlisten = \"127.0.0.1:8080\n",
			[]string{"berth.toml:2: "}},
		{"unquoted subscription name", "[subscriptions.ShipmentNotifier.onOrderShipped.retry]\nmax-attempts = 8\n",
			[]string{`berth.toml:1: unknown key subscriptions.ShipmentNotifier.onOrderShipped (a subscription name with a dot must be quoted`}},
		{"override key", "[subscriptions.\"A.b\".retry]\n\nmax-attempts = -1\n",
			[]string{`berth.toml:3: subscriptions."A.b".retry.max-attempts: -1: must be at least 1 (0 inherits)`}},
		{"override list element", "[subscriptions.\"A.b\".retry]\nunrecoverable = [\n  \"X\",\n  \"X\",\n]\n",
			[]string{`berth.toml:4: subscriptions."A.b".retry.unrecoverable[1]: "X": listed twice`}},
		{"max below initial", "[subscription.retry]\ninitial-backoff = \"10s\"\nmax-backoff = \"1s\"\n",
			[]string{`berth.toml:3: subscription.retry.max-backoff: "1s": is less than initial-backoff`}},
		{"base zero", "[subscription.retry]\nmax-attempts = 0\n",
			[]string{`berth.toml:2: subscription.retry.max-attempts: 0: must be at least 1`}},
		{"parked", "[subscription.parked]\nmax-retries = -2\nfirst-delay = \"PT1Y\"\n",
			[]string{
				`berth.toml:2: subscription.parked.max-retries: -2: must be at least 1, or -1 for none`,
				`berth.toml:3: subscription.parked.first-delay: "PT1Y": ISO-8601`,
			}},
		{"jobs", "[jobs]\ndefault-rate = 500\nmax-rate = 100\n",
			[]string{`berth.toml:2: jobs.default-rate: 500: must be at most jobs.max-rate (100)`}},
		{"jobs rate not a number", "[jobs]\ndefault-rate = \"fast\"\n",
			[]string{`berth.toml:2: jobs.default-rate: "fast": want a number, got a string`}},
		{"module-versions", "[store]\nmodule-versions = 0\n",
			[]string{`berth.toml:2: store.module-versions: 0: must be from 1 (only the current version) to 1000`}},
		{"systemic", "[subscription.systemic]\naggregates = 1\n",
			[]string{`berth.toml:2: subscription.systemic.aggregates: 1: must be at least 2`}},
		{"partitions", "[subscription]\npartitions = 0\nconcurrency = 100000\n",
			[]string{
				`berth.toml:2: subscription.partitions: 0: must be at least 1`,
				`berth.toml:3: subscription.concurrency: 100000: must be at most 1024`,
			}},
		{"classifier", "[[classifier.rules]]\nclass = \"A\"\nas = \"fatal\"\n\n[[classifier.rules]]\nclass = \"A\"\nas = \"systemic\"\n",
			[]string{
				`berth.toml:3: classifier.rules[0].as: "fatal": want recoverable`,
				`berth.toml:6: classifier.rules[1].class: "A": already classified by classifier.rules[0]`,
			}},
		{"classifier names an unknown builtin", "[[classifier.rules]]\nclass = \"berth.Timeout\"\nas = \"unrecoverable\"\n\n[[classifier.rules]]\nclass = \"berth.Timout\"\nas = \"unrecoverable\"\n",
			[]string{`berth.toml:6: classifier.rules[1].class: "berth.Timout": no builtin class has that name`}},
		{"sizes", "[server]\nmax-module-size = \"32MB\"\nmax-body-size = -1\n",
			[]string{
				`berth.toml:2: server.max-module-size: "32MB": ambiguous unit "MB"`,
				`berth.toml:3: server.max-body-size: -1: must not be negative`,
			}},
		{"server memory-limit too low", "[server]\nmemory-limit = \"64MiB\"\n",
			[]string{`berth.toml:2: server.memory-limit: "64MiB": must be 0B (off) or at least 128MiB`}},
		{"sandbox", "[sandbox]\nmax-instances = 0\nidle-timeout = 5\n",
			[]string{
				`berth.toml:2: sandbox.max-instances: 0: must be at least 1`,
				`berth.toml:3: sandbox.idle-timeout: 5: want a string, got an integer`,
			}},
		{"sandbox recycle percentage", "[sandbox]\nrecycle-memory-percent = 0\n",
			[]string{`berth.toml:2: sandbox.recycle-memory-percent: 0: must be at least 1`}},
		{"sandbox recycle percentage above 100", "[sandbox]\nrecycle-memory-percent = 101\n",
			[]string{`berth.toml:2: sandbox.recycle-memory-percent: 101: must be at most 100`}},
		{"sandbox recycle percentage as a fraction", "[sandbox]\nrecycle-memory-percent = 0.5\n",
			[]string{`berth.toml:2: sandbox.recycle-memory-percent: 0.5: want an integer, got a float`}},
		{"sandbox recycle growth", "[sandbox]\nrecycle-growth = 1\n",
			[]string{`berth.toml:2: sandbox.recycle-growth: 1: must be more than 1 (a factor of the instance's fresh memory), or 0 to turn it off`}},
		{"sandbox recycle growth too large", "[sandbox]\nrecycle-growth = 1e6\n",
			[]string{`berth.toml:2: sandbox.recycle-growth: 1e+06: must be at most 1000`}},
		{"sandbox recycle growth not a number", "[sandbox]\nrecycle-growth = nan\n",
			[]string{`berth.toml:2: sandbox.recycle-growth: nan: want a finite number`}},
		{"sandbox recycle growth as a string", "[sandbox]\nrecycle-growth = \"1.5\"\n",
			[]string{`berth.toml:2: sandbox.recycle-growth: "1.5": want a number, got a string`}},
		{"dotted keys and inline tables", "server.listen = 1\nmodules = { m = { memory-limit = \"1000B\" } }\n",
			[]string{
				`berth.toml:1: server.listen: 1: want a string`,
				`berth.toml:2: modules.m.memory-limit: "1000B": must be a multiple of 64KiB`,
			}},
		{"server allowed-hosts", "[server]\nallowed-hosts = [\"https://berth.example.com\", \"berth.example.com:8080\", \"*.example.com\", \"\", \"127.0.0.1:8080\"]\n",
			[]string{
				`berth.toml:2: server.allowed-hosts[0]: "https://berth.example.com": want a host name, not a URL`,
				`berth.toml:2: server.allowed-hosts[1]: "berth.example.com:8080": want a name without a port`,
				`berth.toml:2: server.allowed-hosts[2]: "*.example.com": wildcards are not supported`,
				`berth.toml:2: server.allowed-hosts[3]: "": empty host`,
				`berth.toml:2: server.allowed-hosts[4]: "127.0.0.1:8080": want a name without a port`,
			}},
		{"missing key takes the table's line", "[auth]\n\n[[auth.tokens]]\nname = \"ci\"\nrole = \"admin\"\n",
			[]string{`berth.toml:3: auth.tokens[0].token: set token (the secret) or token-env`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseErrs(t, tt.text)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(got), len(tt.want), strings.Join(got, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("error %d = %s\nwant prefix   %s", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestErrorFields(t *testing.T) {
	_, err := parse([]byte("[subscription.retry]\ntimeout = \"soon\"\n"), "b.toml", noEnv)
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%v is not an *Error", err)
	}
	if e.File != "b.toml" || e.Line != 2 || e.Key != "subscription.retry.timeout" || e.Value != `"soon"` {
		t.Errorf("got %+v", e)
	}
}

func TestLoopbackRule(t *testing.T) {
	tests := []struct {
		listen string
		tokens bool
		ok     bool
	}{
		{"127.0.0.1:8080", false, true},
		{"127.0.0.2:0", false, true},
		{"[::1]:8080", false, true},
		{"localhost:9000", false, true},
		{"0.0.0.0:8080", false, false},
		{":8080", false, false},
		{"10.1.2.3:8080", false, false},
		{"example.com:80", false, false},
		{"0.0.0.0:8080", true, true},
		{":8080", true, true},
	}
	for _, tt := range tests {
		text := "[server]\nlisten = \"" + tt.listen + "\"\n"
		if tt.tokens {
			text += "[[auth.tokens]]\nname = \"a\"\nrole = \"admin\"\ntoken = \"s3cret-s3cret\"\n"
		}
		c, err := parse([]byte(text), "berth.toml", noEnv)
		if (err == nil) != tt.ok {
			t.Errorf("listen %s, tokens %v: err = %v, want ok %v", tt.listen, tt.tokens, err, tt.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "berth.toml:2: server.listen:") {
			t.Errorf("listen %s: error does not name the key and line: %v", tt.listen, err)
		}
		if c != nil && c.RequireLoopback() == tt.tokens {
			t.Errorf("listen %s: RequireLoopback = %v", tt.listen, c.RequireLoopback())
		}
	}
}

func TestTokens(t *testing.T) {
	t.Setenv("BERTH_TEST_TOKEN", "from-env")
	c, err := Parse([]byte(`
[server]
listen = "0.0.0.0:8080"
[[auth.tokens]]
name = "ci"
role = "deployer"
token-env = "BERTH_TEST_TOKEN"
[[auth.tokens]]
name = "ops"
role = "operator"
token = "literal"
`), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Role{"from-env": RoleDeployer, "literal": RoleOperator}
	if got := c.Tokens(); len(got) != 2 || got["from-env"] != want["from-env"] || got["literal"] != want["literal"] {
		t.Errorf("Tokens() = %v, want %v", got, want)
	}
	if tok, ok := c.Authenticate("from-env"); !ok || tok.Name != "ci" {
		t.Errorf("Authenticate(from-env) = %v, %v", tok, ok)
	}
	if _, ok := c.Authenticate("nope"); ok {
		t.Error("Authenticate(nope) succeeded")
	}
	if _, ok := c.Authenticate(""); ok {
		t.Error("Authenticate(\"\") succeeded")
	}

	errs := parseErrs(t, `
[[auth.tokens]]
name = "a"
role = "root"
token = "x"
token-env = "Y"
[[auth.tokens]]
name = "a"
role = "reader"
token-env = "BERTH_UNSET_VARIABLE"
[[auth.tokens]]
name = "c"
role = "reader"
token = "x y"
`)
	want2 := []string{
		`berth.toml:4: auth.tokens[0].role: "root": want reader, operator, deployer or admin`,
		`berth.toml:5: auth.tokens[0].token: set token or token-env, not both`,
		`berth.toml:8: auth.tokens[1].name: "a": also the name of auth.tokens[0]`,
		`berth.toml:10: auth.tokens[1].token-env: "BERTH_UNSET_VARIABLE": the environment variable is not set or empty`,
		`berth.toml:14: auth.tokens[2].token: the token must not contain spaces`,
	}
	if !slices.Equal(errs, want2) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(errs, "\n"), strings.Join(want2, "\n"))
	}
}

func TestRoleAllows(t *testing.T) {
	for _, tt := range []struct {
		r, need Role
		ok      bool
	}{
		{RoleAdmin, RoleDeployer, true}, {RoleReader, RoleReader, true}, {RoleReader, RoleOperator, false},
		{RoleOperator, RoleReader, true}, {RoleOperator, RoleDeployer, false}, {RoleDeployer, RoleDeployer, true},
		{RoleDeployer, RoleAdmin, false}, {Role("root"), RoleReader, false},
	} {
		if got := tt.r.Allows(tt.need); got != tt.ok {
			t.Errorf("%s.Allows(%s) = %v", tt.r, tt.need, got)
		}
	}
}

func TestOverrides(t *testing.T) {
	c, err := Parse([]byte(`
[subscription.retry]
max-attempts = 6
unrecoverable = ["A"]

[subscriptions."ShipmentNotifier.onOrderShipped".retry]
max-attempts = 8
timeout = "20s"
recoverable = []

[subscriptions."ShipmentNotifier.onOrderShipped".parked]
max-retries = -1
first-delay = "5m"
`), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	def, over := c.RetryLayers("ShipmentNotifier.onOrderShipped")
	if def.MaxAttempts != 6 || def.InitialBackoff != 100*time.Millisecond || !slices.Equal(def.Unrecoverable, []string{"A"}) {
		t.Errorf("defaults = %+v", def)
	}
	if over.MaxAttempts != 8 || over.Timeout != 20*time.Second || over.InitialBackoff != 0 ||
		over.Recoverable == nil || len(over.Recoverable) != 0 || over.Unrecoverable != nil {
		t.Errorf("override = %+v", over)
	}
	p := retry.Resolve(
		retry.Layer{Source: retry.SourceDefault, Settings: def},
		retry.Layer{Source: retry.SourceHandler, Settings: retry.Settings{MaxAttempts: 3, Timeout: 10 * time.Second}},
		retry.Layer{Source: retry.SourceOverride, Settings: over},
	)
	if p.MaxAttempts != 8 || p.Sources[retry.KeyMaxAttempts] != retry.SourceOverride || p.Timeout != 20*time.Second {
		t.Errorf("resolved = %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
	_, none := c.RetryLayers("Other.handler")
	if !reflectZero(none) {
		t.Errorf("override of a subscription without a table = %+v", none)
	}
	pk := c.Parked("ShipmentNotifier.onOrderShipped")
	if pk.MaxRetries != retry.NoParkedRetries || pk.FirstDelay != 5*time.Minute || pk.MaxDelay != time.Hour {
		t.Errorf("Parked = %+v", pk)
	}
	if got := c.Parked("Other.handler"); got != retry.DefaultParked() {
		t.Errorf("Parked(other) = %+v", got)
	}
	def.Unrecoverable[0] = "changed"
	if d2, _ := c.RetryLayers("x"); d2.Unrecoverable[0] != "A" {
		t.Error("RetryLayers shares its lists with the Config")
	}
	if w := c.Systemic(); w != retry.DefaultSystemicWindow() {
		t.Errorf("Systemic() = %+v", w)
	}
}

func reflectZero(s retry.Settings) bool {
	return s.MaxAttempts == 0 && s.InitialBackoff == 0 && s.MaxBackoff == 0 && s.Timeout == 0 &&
		s.Unrecoverable == nil && s.Recoverable == nil && s.BackpressureAttempts == 0
}

func TestClassifier(t *testing.T) {
	c, err := Parse([]byte("[[classifier.rules]]\nclass = \"berth.Timeout\"\nas = \"unrecoverable\"\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := c.Classifier()
	if err != nil {
		t.Fatal(err)
	}
	d := retry.Classify(&retry.Failure{Classes: []string{retry.ClassTimeout}}, nil, cl)
	if d.Class != retry.Unrecoverable || d.By != retry.OriginClassifier {
		t.Errorf("Classify = %+v", d)
	}
}

func TestModules(t *testing.T) {
	c, err := Parse([]byte(`
[modules.notifier]
memory-limit = "128MiB"
allowed-hosts = ["notifications.example.com:443", "api.example.com"]
config = { region = "eu-west-1", "dotted.key" = "v" }

[modules.small]
memory-limit = 65536
`), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	m := c.Module("notifier")
	if m.MemoryLimitPages != 2048 || m.InitTimeout != 10*time.Second ||
		!slices.Equal(m.AllowedHosts, []string{"notifications.example.com:443", "api.example.com"}) ||
		m.Config["region"] != "eu-west-1" || m.Config["dotted.key"] != "v" {
		t.Errorf("Module(notifier) = %+v", m)
	}
	if m := c.Module("small"); m.MemoryLimitPages != 1 || m.InitTimeout != 10*time.Second || m.AllowedHosts != nil {
		t.Errorf("Module(small) = %+v", m)
	}
	if m := c.Module("absent"); m.MemoryLimitPages != 1024 || m.InitTimeout != 10*time.Second {
		t.Errorf("Module(absent) = %+v", m)
	}

	errs := parseErrs(t, `
[modules.bad]
memory-limit = "8GiB"
allowed-hosts = ["https://x.example.com", "*.example.com", "x:99999", ""]
config = { n = 1 }
init-timeout = "0s"
`)
	want := []string{
		`berth.toml:3: modules.bad.memory-limit: "8GiB": must be at most 4GiB`,
		`berth.toml:4: modules.bad.allowed-hosts[0]: "https://x.example.com": want a host or host:port, not a URL`,
		`berth.toml:4: modules.bad.allowed-hosts[1]: "*.example.com": wildcards are not supported`,
		`berth.toml:4: modules.bad.allowed-hosts[2]: "x:99999": port "99999"`,
		`berth.toml:4: modules.bad.allowed-hosts[3]: "": empty host`,
		`berth.toml:5: modules.bad.config.n: 1: want a string, got an integer`,
		`berth.toml:6: modules.bad.init-timeout: "0s": must be more than 0`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got\n%s", strings.Join(errs, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(errs[i], want[i]) {
			t.Errorf("error %d = %s\nwant prefix %s", i, errs[i], want[i])
		}
	}
}

func TestSandbox(t *testing.T) {
	c, err := Parse([]byte("[server]\ndata-dir = \"/var/lib/berth\"\n[sandbox]\nmax-output = \"64KiB\"\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	s := c.Sandbox()
	if s.CacheDir != filepath.Join("/var/lib/berth", "wasm-cache") || s.CompiledModules != 32 || s.MaxInstances != 8 ||
		s.IdleTimeout != time.Minute || s.MaxOutputBytes != 64<<10 || s.MaxResponseBytes != 1<<20 ||
		s.RecycleMemoryFraction != 0.5 || s.RecycleGrowth != 1.25 || s.Tiering != sandbox.TierUp {
		t.Errorf("Sandbox() = %+v", s)
	}
	c, err = Parse([]byte("[sandbox]\nrecycle-memory-percent = 100\nidle-timeout = \"2s\"\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Sandbox(); s.RecycleMemoryFraction != 1 || s.IdleTimeout != 2*time.Second {
		t.Errorf("Sandbox() with recycle-memory-percent 100, idle-timeout 2s = %+v", s)
	}
	for _, g := range []struct {
		text string
		want float64 // sandbox.Config.RecycleGrowth
	}{
		{"1.5", 1.5},
		{"2", 2},  // an integer is a number too
		{"0", -1}, // never: the sandbox's "off", not its default
	} {
		c, err = Parse([]byte("[sandbox]\nrecycle-growth = "+g.text+"\n"), "berth.toml")
		if err != nil {
			t.Fatal(err)
		}
		if s := c.Sandbox(); s.RecycleGrowth != g.want {
			t.Errorf("Sandbox() with recycle-growth %s: RecycleGrowth %v, want %v", g.text, s.RecycleGrowth, g.want)
		}
	}
	c, err = Parse([]byte("[sandbox]\ntier-up = false\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Sandbox(); s.Tiering != sandbox.CompiledOnly {
		t.Errorf("Sandbox() with tier-up false: Tiering %v, want CompiledOnly", s.Tiering)
	}
}

func TestWebhooks(t *testing.T) {
	t.Setenv("BERTH_TEST_HOOK", "k3y")
	c, err := Parse([]byte(`
[[webhooks]]
name = "a"
url = "https://hooks.example.com/berth"
secret-env = "BERTH_TEST_HOOK"
events = ["parked"]
subscriptions = ["S.h"]

[[webhooks]]
name = "b"
url = "http://localhost:9000/"
`), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	a, b := c.Webhooks[0], c.Webhooks[1]
	if a.SigningKey() != "k3y" || b.SigningKey() != "" {
		t.Errorf("signing keys %q %q", a.SigningKey(), b.SigningKey())
	}
	if !a.Wants(ledger.NotifyParked, "S.h") || a.Wants(ledger.NotifySkipped, "S.h") || a.Wants(ledger.NotifyParked, "T.h") {
		t.Error("webhook a filters wrongly")
	}
	if !b.Wants(ledger.NotifyResumed, "anything") {
		t.Error("webhook b filters wrongly")
	}

	errs := parseErrs(t, `
[[webhooks]]
name = "a"
url = "ftp://x"
events = ["parked", "exploded", "parked"]

[[webhooks]]
name = "a"
url = "https://user:pw@x.example.com"
secret = "s"
secret-env = "E"
subscriptions = [""]
`)
	want := []string{
		`berth.toml:4: webhooks[0].url: "ftp://x": want an http:// or https:// URL`,
		`berth.toml:5: webhooks[0].events[1]: "exploded": want parked, retries-spent, resumed, skipped, partition-paused, partition-resumed, subscription-paused, subscription-unpaused, subscription-reset, job-finished, group-opened, group-grew`,
		`berth.toml:5: webhooks[0].events[2]: "parked": listed twice`,
		`berth.toml:8: webhooks[1].name: "a": also the name of webhooks[0]`,
		`berth.toml:9: webhooks[1].url: "https://user:pw@x.example.com": credentials in the URL`,
		`berth.toml:10: webhooks[1].secret: set secret or secret-env, not both`,
		`berth.toml:12: webhooks[1].subscriptions[0]: "": a subscription name must not be empty`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got\n%s", strings.Join(errs, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(errs[i], want[i]) {
			t.Errorf("error %d = %s\nwant prefix %s", i, errs[i], want[i])
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "berth.toml")
	if err := os.WriteFile(path, DefaultTOML(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("[log]\nlevel = \"loud\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+":2: log.level:") {
		t.Errorf("Load bad file: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.toml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load missing file: %v", err)
	}
}

func TestValidateInCode(t *testing.T) {
	c := Default()
	c.Server.Listen = "0.0.0.0:80"
	c.Subscription.Retry.MaxAttempts = -3
	errs := Errors(c.Validate())
	if len(errs) != 2 || errs[0].Key != "server.listen" || errs[1].Key != "subscription.retry.max-attempts" || errs[0].Line != 0 {
		t.Errorf("Validate() = %v", errs)
	}
	if got := errs[1].Error(); got != "subscription.retry.max-attempts: -3: must be at least 1 (0 inherits)" {
		t.Errorf("message %q", got)
	}
}

func TestKeyLines(t *testing.T) {
	text := `# comment
a = """multi
line ] [x] = 
"""
[t] # c
'lit.key' = 1
"q\"k" = [1, [2,
  3], {x = 1}]
[[arr]]
v = 1
[arr.sub]
w = 2
[[arr]]
v = { y = "}", z = '#' } # }
date = 1979-05-27 07:32:00Z
after = true
`
	got := keyLines(text)
	want := map[string]int{
		"a": 2, "t": 5, `t."lit.key"`: 6, `t."q\"k"`: 7, `t."q\"k"[1]`: 7, `t."q\"k"[2].x`: 8,
		"arr[0]": 9, "arr[0].v": 10, "arr[0].sub": 11, "arr[0].sub.w": 12, "arr[1]": 13, "arr[1].v.y": 14,
		"arr[1].v.z": 14, "arr[1].date": 15, "arr[1].after": 16,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("line of %s = %d, want %d", k, got[k], n)
		}
	}
	if lineOf(got, "arr[1].v.nothing") != 14 || lineOf(got, "zzz") != 0 {
		t.Error("lineOf does not fall back to the parent")
	}
}

func FuzzParse(f *testing.F) {
	f.Add(string(DefaultTOML()))
	f.Add(uncommentExamples(string(DefaultTOML())))
	f.Add("[server]\nlisten = 1\n[[webhooks]]\nurl = \"x\"\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := parse([]byte(text), "f.toml", noEnv)
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("Parse accepted a config Validate refuses: %v", verr)
			}
			return
		}
		for _, e := range Errors(err) {
			if e.File != "f.toml" {
				t.Fatalf("error without the file: %v", e)
			}
		}
		keyLines(text) // must not panic or loop
	})
}

func TestServerAllowedHostsValid(t *testing.T) {
	c, err := Parse([]byte("[server]\nallowed-hosts = [\"berth.example.com\", \"BERTH.internal\", \"10.0.0.5\", \"::1\", \"[fe80::1]\", \"*\"]\n"), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"berth.example.com", "BERTH.internal", "10.0.0.5", "::1", "[fe80::1]", "*"}; !slices.Equal(c.Server.AllowedHosts, want) {
		t.Errorf("allowed-hosts %q, want %q", c.Server.AllowedHosts, want)
	}
}
