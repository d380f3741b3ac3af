package config

import (
	"strings"
	"testing"
	"time"
)

func TestCommandGateways(t *testing.T) {
	c, err := Parse([]byte(`
[commands.Stock]
url = "https://stock.example.com/commands"
timeout = "2s"
headers = { Authorization = "Bearer t", "X-Tenant" = "eu" }

[commands.Order]
url = "http://localhost:9000/orders"
`), "berth.toml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		aggregateType string
		ok            bool
		url           string
		timeout       time.Duration
		headers       int
	}{
		{"Stock", true, "https://stock.example.com/commands", 2 * time.Second, 2},
		{"Order", true, "http://localhost:9000/orders", 10 * time.Second, 0},
		{"Invoice", false, "", 0, 0},
		{"stock", false, "", 0, 0}, // aggregate types are case-sensitive
	}
	for _, tt := range tests {
		t.Run(tt.aggregateType, func(t *testing.T) {
			gw, ok := c.CommandGateway(tt.aggregateType)
			if ok != tt.ok || gw.URL != tt.url || gw.Timeout != tt.timeout || len(gw.Headers) != tt.headers {
				t.Errorf("CommandGateway(%s) = %+v, %v", tt.aggregateType, gw, ok)
			}
			if ok && gw.AggregateType != tt.aggregateType {
				t.Errorf("AggregateType = %q", gw.AggregateType)
			}
		})
	}
	gw, _ := c.CommandGateway("Stock")
	gw.Headers["Authorization"] = "changed"
	if again, _ := c.CommandGateway("Stock"); again.Headers["Authorization"] != "Bearer t" {
		t.Error("CommandGateway's headers are not a copy")
	}
	if _, ok := Default().CommandGateway("Stock"); ok {
		t.Error("the default configuration has a command gateway")
	}
}

func TestCommandGatewayErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string // each a prefix of one error, in order
	}{
		{"no url", "[commands.Stock]\ntimeout = \"1s\"\n",
			[]string{`berth.toml:1: commands.Stock.url: "": each command gateway needs a url`}},
		{"not http", "[commands.Stock]\nurl = \"ftp://x/\"\n",
			[]string{`berth.toml:2: commands.Stock.url: "ftp://x/": want an http:// or https:// URL`}},
		{"no host", "[commands.Stock]\nurl = \"http:///commands\"\n",
			[]string{`berth.toml:2: commands.Stock.url: "http:///commands": the URL has no host`}},
		{"credentials", "[commands.Stock]\nurl = \"https://u:p@x.example.com/\"\n",
			[]string{`berth.toml:2: commands.Stock.url: "https://u:p@x.example.com/": credentials in the URL would be logged`}},
		{"zero timeout", "[commands.Stock]\nurl = \"http://x/\"\ntimeout = \"0s\"\n",
			[]string{`berth.toml:3: commands.Stock.timeout: "0s": must be more than 0`}},
		{"bad duration", "[commands.Stock]\nurl = \"http://x/\"\ntimeout = \"soon\"\n",
			[]string{`berth.toml:3: commands.Stock.timeout: "soon"`}},
		{"reserved header", "[commands.Stock]\nurl = \"http://x/\"\nheaders = { idempotency-key = \"k\" }\n",
			[]string{`berth.toml:3: commands.Stock.headers.idempotency-key: the host sets Idempotency-Key itself`}},
		{"bad header name", "[commands.Stock]\nurl = \"http://x/\"\nheaders = { \"Bad Name\" = \"v\" }\n",
			[]string{`berth.toml:3: commands.Stock.headers."Bad Name": not a valid HTTP header name`}},
		{"header value", "[commands.Stock]\nurl = \"http://x/\"\nheaders = { X = \"a\\nb\" }\n",
			[]string{`berth.toml:3: commands.Stock.headers.X: a header value must not contain a line break`}},
		{"header not a string", "[commands.Stock]\nurl = \"http://x/\"\nheaders = { X = 1 }\n",
			[]string{`berth.toml:3: commands.Stock.headers.X: 1: want a string, got an integer`}},
		{"unknown key", "[commands.Stock]\nurl = \"http://x/\"\nurls = \"http://y/\"\n",
			[]string{`berth.toml:3: unknown key commands.Stock.urls (did you mean url?)`}},
		{"padded type", "[commands.\" Stock\"]\nurl = \"http://x/\"\n",
			[]string{`berth.toml:1: commands." Stock": an aggregate type must not be empty or start or end with a space`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := parseErrs(t, tt.text)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%s", len(errs), len(tt.want), strings.Join(errs, "\n"))
			}
			for i := range tt.want {
				if !strings.HasPrefix(errs[i], tt.want[i]) {
					t.Errorf("error %d = %s\nwant prefix %s", i, errs[i], tt.want[i])
				}
			}
		})
	}
}

// TestCommandGatewayDocsDefault checks the documented timeout default against the code: the default
// is not in DefaultTOML's keys, only in its commented example.
func TestCommandGatewayDocsDefault(t *testing.T) {
	rows := docRows(t)
	if got, want := strings.Trim(rows["commands.<name>.timeout"][2], "`"), `"`+DefaultCommandTimeout.String()+`"`; got != want {
		t.Errorf("docs/config.md: commands.<name>.timeout defaults to %s, DefaultCommandTimeout is %s", got, want)
	}
}

func TestCommandGatewayChangesApplyOnReload(t *testing.T) {
	old, err := Parse([]byte("[commands.Stock]\nurl = \"http://a/\"\n"), "old.toml")
	if err != nil {
		t.Fatal(err)
	}
	next, err := Parse([]byte("[commands.Stock]\nurl = \"http://b/\"\nheaders = { X = \"secret\" }\n"), "new.toml")
	if err != nil {
		t.Fatal(err)
	}
	ch := Changes(old, next)
	if len(ch) != 2 || ch[0] != "commands.Stock.headers" || ch[1] != "commands.Stock.url" {
		t.Errorf("Changes = %v", ch)
	}
	if d := Diff(old, next); len(d) != 0 {
		t.Errorf("Diff = %v, want nothing that needs a restart", d)
	}
	for _, k := range ch {
		if strings.Contains(k, "secret") {
			t.Errorf("a change names a value: %s", k)
		}
	}
}
