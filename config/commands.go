package config

import (
	"fmt"
	"maps"
	"net/http"
	"strings"

	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/retry"
)

// DefaultCommandTimeout bounds one request to a command gateway ([commands.<AggregateType>] timeout):
// 10s.
const DefaultCommandTimeout = retry.Duration(10e9)

// CommandGatewayConfig is [commands.<AggregateType>]: the endpoint of the user's command service that
// receives the commands sagas derive for aggregates of that type. A key left out of a table keeps its
// default.
type CommandGatewayConfig struct {
	// URL is the http or https endpoint each command is POSTed to (required, without credentials: put
	// them in Headers).
	URL string `toml:"url"`
	// Timeout bounds one request, within the attempt's own deadline (default 10s).
	Timeout retry.Duration `toml:"timeout"`
	// Headers are sent with every request, e.g. { Authorization = "Bearer …" } (default: none). The host
	// sets Content-Type and Idempotency-Key itself.
	Headers map[string]string `toml:"headers"`
}

func (g *CommandGatewayConfig) setDefaults() {
	*g = CommandGatewayConfig{Timeout: DefaultCommandTimeout}
}

// Gateway is the command gateway of one aggregate type, as a saga's invoker uses it.
type Gateway = registry.Gateway

// CommandGateway returns the gateway configured for commands to aggregates of aggregateType, its
// [commands.<AggregateType>] table; ok is false when there is none.
func (c *Config) CommandGateway(aggregateType string) (gw Gateway, ok bool) {
	g, ok := c.Commands[aggregateType]
	if !ok {
		return Gateway{}, false
	}
	timeout := g.Timeout.Std()
	if timeout <= 0 {
		timeout = DefaultCommandTimeout.Std()
	}
	return Gateway{AggregateType: aggregateType, URL: g.URL, Timeout: timeout, Headers: maps.Clone(g.Headers)}, true
}

// reservedHeaders returns the headers the host sets on a command request itself.
func reservedHeaders() []string {
	return []string{"Content-Type", "Content-Length", "Idempotency-Key", "Host", "Transfer-Encoding"}
}

func (g CommandGatewayConfig) validate(p *problems, at keyPath) {
	if name := at[len(at)-1].name; name == "" || strings.TrimSpace(name) != name {
		p.add(at, "", "an aggregate type must not be empty or start or end with a space")
	}
	if g.URL == "" {
		p.add(at.key("url"), `""`, "each command gateway needs a url")
	} else if err := checkHTTPURL(g.URL, "send them in headers"); err != nil {
		p.add(at.key("url"), fmt.Sprintf("%q", g.URL), "%v", err)
	}
	positiveDuration(p, at.key("timeout"), g.Timeout)
	for _, name := range sortedKeys(g.Headers) {
		k := at.key("headers").key(name)
		switch {
		case !validHeaderName(name):
			p.add(k, "", "not a valid HTTP header name")
		case containsFold(reservedHeaders(), name):
			p.add(k, "", "the host sets %s itself", http.CanonicalHeaderKey(name))
		case strings.ContainsAny(g.Headers[name], "\r\n\x00"):
			p.add(k, "", "a header value must not contain a line break or NUL")
		}
	}
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func containsFold(list []string, s string) bool {
	for _, v := range list {
		if strings.EqualFold(v, s) {
			return true
		}
	}
	return false
}
