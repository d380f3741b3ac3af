// Package config is the host's TOML configuration (berth.toml): its keys and their defaults, parsing
// with errors that name the key and the line, validation, the commented default file, and what a reload
// may change.
//
// The host reads it with [Load] at start (writing [DefaultTOML] first when there is no file), and again
// on SIGHUP or POST /v1/config/reload: when the new file parses and validates, the host swaps its
// *Config atomically (e.g. an atomic.Pointer[config.Config]) and logs what [Diff] says needs a restart;
// when it does not, the host keeps the running *Config and reports the error. A *Config is never
// modified after Parse returns it, so it is safe to share between goroutines.
//
// docs/config.md is the reference of every key; a test keeps it, [DefaultTOML] and the Config struct in
// step.
//
// It owns the file's format — every key's name, type and bounds, the [Size] parser, the decoder that
// reports every unknown or mistyped key with its line — what a reload may change ([Diff], [Changes]),
// and the layout of the data directory (where each part keeps its files).
//
// Each part of the host takes its options from one method here ([Config.EngineOptions], [Config.Sandbox],
// [Config.DiskOptions], [Config.Hooks], [Config.Module], the data directory's layout), so that the host
// (assembly) and the tests that open one cannot derive them differently.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"

	"github.com/BurntSushi/toml"
	"github.com/berthhq/berth/retry"
)

// Config is the host's configuration, as read from berth.toml. Every key has a default ([Default]); a
// Config from [Parse] or [Load] is validated. Do not modify a Config another goroutine may read: load a
// new one and swap it.
type Config struct {
	// Server is [server]: the listen address, the data directory, request limits and timeouts.
	Server ServerConfig `toml:"server"`
	// Store is [store]: the free space the data directory keeps (writes are refused below it).
	Store StoreConfig `toml:"store"`
	// Cluster is [cluster]: this host's id, lease and address among the hosts sharing one NATS
	// JetStream deployment (used when store.backend is "jetstream").
	Cluster ClusterConfig `toml:"cluster"`
	// Auth is [auth]: the bearer tokens and their roles (default: none, and the server listens on
	// loopback only).
	Auth AuthConfig `toml:"auth"`
	// Subscription is [subscription]: partitions, concurrency, checkpoints, and the host-wide retry,
	// parked and systemic settings.
	Subscription SubscriptionConfig `toml:"subscription"`
	// Subscriptions is [subscriptions."<Processor.handler>"]: per-subscription overrides of the retry and
	// parked settings (default: none).
	Subscriptions map[string]SubscriptionOverride `toml:"subscriptions"`
	// ClassifierConfig is [classifier]: the application-wide failure classifier rules (default: none).
	ClassifierConfig ClassifierConfig `toml:"classifier"`
	// Modules is [modules.<name>]: per-module memory limit, outbound hosts, guest config and init timeout
	// (a module without a table gets [DefaultModule]).
	Modules map[string]ModuleConfig `toml:"modules"`
	// Commands is [commands.<AggregateType>]: the command gateway sagas' commands to aggregates of that
	// type are sent to (default: none; a saga's command without a gateway fails its attempt).
	Commands map[string]CommandGatewayConfig `toml:"commands"`
	// SandboxConfig is [sandbox]: the WebAssembly sandbox's caches, instance pool and output limits.
	SandboxConfig SandboxConfig `toml:"sandbox"`
	// Capsule is [capsule]: the size cap and redacted headers of failed attempts' capsules.
	Capsule CapsuleConfig `toml:"capsule"`
	// Webhooks is [[webhooks]]: endpoints told about parked aggregates, outages, operators' changes to
	// subscriptions and finished jobs (default: none).
	Webhooks []Webhook `toml:"webhooks"`
	// Jobs is [jobs]: the pace of operators' bulk resume and skip jobs.
	Jobs JobsConfig `toml:"jobs"`
	// Log is [log]: level and format of the host's logs.
	Log LogConfig `toml:"log"`
	// Tracing is [tracing]: OpenTelemetry spans sent to an OTLP endpoint (default: off).
	Tracing TracingConfig `toml:"tracing"`
}

// ClassifierConfig is [classifier].
type ClassifierConfig struct {
	// Rules is [[classifier.rules]]: each takes an error class for recoverable, unrecoverable, systemic
	// or backpressure in every handler (default: none).
	Rules []retry.Rule `toml:"rules"`
}

// LogConfig is [log].
type LogConfig struct {
	// Level is the lowest level logged: debug, info, warn or error (default "info").
	Level string `toml:"level"`
	// Format is text (logfmt-like, for people) or json (for log collectors) (default "text").
	Format string `toml:"format"`
}

// SlogLevel returns Level as a slog.Level (info for a value Validate would reject).
func (l LogConfig) SlogLevel() slog.Level {
	switch l.Level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Parse reads a configuration from TOML text over the defaults: a key left out keeps its default. name
// is the file name used in errors (e.g. "berth.toml"). token-env and secret-env are resolved from the
// environment here. It returns every problem at once, joined, each an [*Error] naming the key and its
// line: a syntax error, unknown keys, values of the wrong type or out of range, and what
// [Config.Validate] finds.
func Parse(data []byte, name string) (*Config, error) {
	return parse(data, name, os.LookupEnv)
}

func parse(data []byte, name string, lookupEnv func(string) (string, bool)) (*Config, error) {
	text := string(bytes.TrimPrefix(data, []byte("\uFEFF")))
	if line := tooDeep(text); line > 0 { // before the parser, whose work grows with the square of the depth
		return nil, &Error{File: name, Line: line, Problem: fmt.Sprintf(
			"nested more than %d deep (arrays, inline tables or the steps of a dotted key): no setting needs that; the file is refused before it is parsed", maxNesting)}
	}
	var tree map[string]any
	if _, err := toml.Decode(text, &tree); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, &Error{File: name, Line: pe.Position.Line, Problem: pe.Message}
		}
		return nil, &Error{File: name, Problem: err.Error()}
	}
	c := Default()
	d := &decoder{}
	d.table(nil, tree, reflect.ValueOf(c).Elem())
	probs := d.probs
	c.resolveSecrets(lookupEnv)
	for _, e := range c.validate() {
		if !probs.hasKeyOrChild(e.Key) { // a bad value was already reported, not its consequence
			probs = append(probs, e)
		}
	}
	if len(probs) > 0 {
		lines := keyLines(text)
		for _, e := range probs {
			e.File = name
			e.Line = lineOf(lines, e.Key)
		}
		slices.SortStableFunc(probs, func(a, b *Error) int { return a.Line - b.Line })
		return nil, probs.join()
	}
	return c, nil
}

// Load reads and parses the file at path (see [Parse]); errors name the file as given.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(data, path)
}

// Validate reports every value the host cannot use, joined, each an [*Error] naming the key (without a
// line: Parse adds the lines). Parse and Load validate already; call it on a Config built in code.
// Secrets from token-env and secret-env are only known after Parse, so a Config built in code should use
// literal token and secret values.
func (c *Config) Validate() error {
	return problems(c.validate()).join()
}

func (c *Config) validate() problems {
	var p problems
	c.Server.validate(&p, keyPath{{name: "server"}})
	c.Store.validate(&p, keyPath{{name: "store"}})
	if c.Store.Backend == BackendJetStream { // the table is not used otherwise, as [store.jetstream]
		c.Cluster.validate(&p, keyPath{{name: "cluster"}})
	}
	c.Jobs.validate(&p, keyPath{{name: "jobs"}})
	c.Tracing.validate(&p, keyPath{{name: "tracing"}})
	c.Auth.validate(&p, keyPath{{name: "auth"}})
	if c.RequireLoopback() && c.Server.validListen() && !c.Server.loopback() {
		p.add(keyPath{{name: "server"}, {name: "listen"}}, fmt.Sprintf("%q", c.Server.Listen),
			"without a token in [[auth.tokens]] the server listens on loopback only: use 127.0.0.1, [::1] or localhost, or configure a token")
	}
	c.Subscription.validate(&p, keyPath{{name: "subscription"}})
	for _, name := range sortedKeys(c.Subscriptions) {
		o := c.Subscriptions[name]
		o.validate(&p, keyPath{{name: "subscriptions"}, {name: name}})
	}
	validateRules(&p, c.ClassifierConfig.Rules, keyPath{{name: "classifier"}, {name: "rules"}})
	for _, name := range sortedKeys(c.Modules) {
		m := c.Modules[name]
		m.validate(&p, keyPath{{name: "modules"}, {name: name}})
	}
	for _, name := range sortedKeys(c.Commands) {
		g := c.Commands[name]
		g.validate(&p, keyPath{{name: "commands"}, {name: name}})
	}
	c.SandboxConfig.validate(&p, keyPath{{name: "sandbox"}})
	c.Capsule.validate(&p, keyPath{{name: "capsule"}})
	validateWebhooks(&p, c.Webhooks, keyPath{{name: "webhooks"}})
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		p.add(keyPath{{name: "log"}, {name: "level"}}, fmt.Sprintf("%q", c.Log.Level), "want debug, info, warn or error")
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		p.add(keyPath{{name: "log"}, {name: "format"}}, fmt.Sprintf("%q", c.Log.Format), "want text or json")
	}
	return p
}
