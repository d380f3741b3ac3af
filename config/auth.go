package config

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"
)

// Role is what a bearer token may do.
type Role string

// The roles of [[auth.tokens]].
const (
	// RoleReader may read: modules, events, subscriptions, parked aggregates, metrics.
	RoleReader Role = "reader"
	// RoleOperator may read, and resume and skip parked aggregates and pause, unpause and reset subscriptions
	// (not deploy: operating and deploying are separate duties).
	RoleOperator Role = "operator"
	// RoleDeployer may read, and upload and delete modules and append events (not resume or skip).
	RoleDeployer Role = "deployer"
	// RoleAdmin may do everything, including reloading the configuration.
	RoleAdmin Role = "admin"
)

// Valid reports whether r is one of reader, operator, deployer, admin.
func (r Role) Valid() bool {
	switch r {
	case RoleReader, RoleOperator, RoleDeployer, RoleAdmin:
		return true
	}
	return false
}

// Allows reports whether a token of role r may do what needs role need: admin may do everything, every
// valid role may do what a reader may, and operator and deployer may each do their own.
func (r Role) Allows(need Role) bool {
	if !r.Valid() {
		return false
	}
	return r == RoleAdmin || need == RoleReader || r == need
}

// AuthConfig is [auth].
type AuthConfig struct {
	// Tokens is [[auth.tokens]] (default: none). With none, every request is allowed and the server
	// must listen on loopback only.
	Tokens []Token `toml:"tokens"`
}

// Token is one [[auth.tokens]] entry: a bearer token and its role. Give the secret either literally
// (token) or by the name of an environment variable holding it (token-env), which is read at load.
type Token struct {
	// Name identifies the token in logs and audit records (required, unique).
	Name string `toml:"name"`
	// Role is reader, operator, deployer or admin (required).
	Role Role `toml:"role"`
	// Token is the secret itself (default none; set it or TokenEnv, not both).
	Token string `toml:"token"`
	// TokenEnv names the environment variable holding the secret, read at load (default none).
	TokenEnv string `toml:"token-env"`

	secret string // Token, or the value of TokenEnv at load
}

// Secret returns the token's secret: Token, or the value TokenEnv had when the file was loaded.
func (t Token) Secret() string {
	if t.Token != "" {
		return t.Token
	}
	return t.secret
}

// RequireLoopback reports whether the server must listen on loopback only: when no token is configured.
// Validate refuses a non-loopback server.listen then; the host says so at start.
func (c *Config) RequireLoopback() bool { return len(c.Auth.Tokens) == 0 }

// Tokens returns each token's secret with its role (empty with no token configured; then every request
// is allowed, from loopback only). Prefer [Config.Authenticate], which compares in constant time.
func (c *Config) Tokens() map[string]Role {
	m := make(map[string]Role, len(c.Auth.Tokens))
	for _, t := range c.Auth.Tokens {
		if s := t.Secret(); s != "" {
			m[s] = t.Role
		}
	}
	return m
}

// Authenticate finds the token whose secret is bearer, comparing every token in constant time, and
// returns it; ok is false when none matches.
func (c *Config) Authenticate(bearer string) (tok Token, ok bool) {
	b := sha256.Sum256([]byte(bearer))
	for _, t := range c.Auth.Tokens {
		s := t.Secret()
		h := sha256.Sum256([]byte(s))
		if subtle.ConstantTimeCompare(b[:], h[:]) == 1 && s != "" && !ok {
			tok, ok = t, true
		}
	}
	return tok, ok
}

func (a AuthConfig) validate(p *problems, at keyPath) {
	names := map[string]int{}
	secrets := map[string]int{}
	for i, t := range a.Tokens {
		k := at.key("tokens").at(i)
		if t.Name == "" {
			p.add(k.key("name"), `""`, "each token needs a name")
		} else if j, dup := names[t.Name]; dup {
			p.add(k.key("name"), fmt.Sprintf("%q", t.Name), "also the name of auth.tokens[%d]", j)
		} else {
			names[t.Name] = i
		}
		if !t.Role.Valid() {
			p.add(k.key("role"), fmt.Sprintf("%q", t.Role), "want reader, operator, deployer or admin")
		}
		switch {
		case t.Token != "" && t.TokenEnv != "":
			p.add(k.key("token"), "", "set token or token-env, not both")
			continue
		case t.Token == "" && t.TokenEnv == "":
			p.add(k.key("token"), "", "set token (the secret) or token-env (the environment variable holding it)")
			continue
		}
		s := t.Secret()
		switch {
		case t.TokenEnv != "" && s == "":
			p.add(k.key("token-env"), fmt.Sprintf("%q", t.TokenEnv), "the environment variable is not set or empty")
			continue
		case strings.TrimSpace(s) != s || strings.ContainsAny(s, " \t\r\n"):
			p.add(secretKey(k, t.TokenEnv, "token"), "", "the token must not contain spaces")
			continue
		}
		if j, dup := secrets[s]; dup {
			p.add(secretKey(k, t.TokenEnv, "token"), "", "the same secret as auth.tokens[%d]; each token needs its own", j)
		} else {
			secrets[s] = i
		}
	}
}

// secretKey is the key that holds a secret: the literal key, or the -env one.
func secretKey(at keyPath, env, literal string) keyPath {
	if env != "" {
		return at.key(literal + "-env")
	}
	return at.key(literal)
}

// resolveSecrets reads token-env, secret-env and secrets-env from the environment.
func (c *Config) resolveSecrets(lookupEnv func(string) (string, bool)) {
	for i := range c.Auth.Tokens {
		if t := &c.Auth.Tokens[i]; t.TokenEnv != "" {
			t.secret, _ = lookupEnv(t.TokenEnv)
		}
	}
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		if w.SecretEnv != "" {
			w.secret, _ = lookupEnv(w.SecretEnv)
		}
		w.secrets = make([]string, len(w.SecretsEnv))
		for j, env := range w.SecretsEnv {
			w.secrets[j], _ = lookupEnv(env)
		}
	}
}
