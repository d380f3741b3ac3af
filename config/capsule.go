package config

import (
	"fmt"
	"path"
	"strings"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/sandbox"
)

// Defaults of [capsule] (those sandbox.New takes for zero values).
const DefaultCapsuleMaxBytes = Size(sandbox.DefaultCapsuleMaxBytes)

// DefaultCapsuleRedactHeaders returns capsule.redact-headers' default: the headers that carry
// credentials (sandbox.DefaultCapsuleRedactHeaders). Each call returns a new slice.
func DefaultCapsuleRedactHeaders() []string { return sandbox.DefaultCapsuleRedactHeaders() }

// DefaultCapsuleRedactConfig returns capsule.redact-config's default: patterns of config keys that
// name credentials (sandbox.DefaultCapsuleRedactConfig). Each call returns a new slice.
func DefaultCapsuleRedactConfig() []string { return sandbox.DefaultCapsuleRedactConfig() }

// CapsuleConfig is [capsule]: the attempt capsules the sandbox records of failed attempts (ABI.md,
// Attempt capsules). Changing it needs a restart.
type CapsuleConfig struct {
	// MaxBytes caps one capsule's encoded size (default 256KiB); past it the capsule's bodies are cut,
	// then its later calls, clock readings and random bytes left out, and the capsule says so.
	MaxBytes Size `toml:"max-bytes"`
	// RedactHeaders names the HTTP headers, request and response, whose values a capsule stores as
	// "[redacted]", case-insensitive (default Authorization, Cookie, Proxy-Authorization, Set-Cookie;
	// [] redacts none).
	RedactHeaders []string `toml:"redact-headers"`
	// RedactConfig are patterns (path.Match syntax, any case) of the modules' config keys whose values
	// a capsule stores as "[redacted]" (default "*token*", "*secret*", "*password*", "*passwd*",
	// "*credential*", "*api-key*", "*apikey*", "*private-key*"; [] redacts none).
	RedactConfig []string `toml:"redact-config"`
}

func (c CapsuleConfig) validate(p *problems, at keyPath) {
	positiveSize(p, at.key("max-bytes"), c.MaxBytes)
	if c.MaxBytes > Size(ledger.MaxCapsuleSize) {
		p.add(at.key("max-bytes"), fmt.Sprintf("%q", c.MaxBytes.String()), "must be at most 1MiB: the failure ledger keeps no larger capsule")
	}
	for _, h := range c.RedactHeaders {
		if strings.TrimSpace(h) == "" || strings.ContainsAny(h, " :\t\r\n") {
			p.add(at.key("redact-headers"), fmt.Sprintf("%q", h), "want HTTP header names")
		}
	}
	for _, pat := range c.RedactConfig {
		if _, err := path.Match(pat, ""); err != nil || strings.TrimSpace(pat) == "" {
			p.add(at.key("redact-config"), fmt.Sprintf("%q", pat), "want a pattern of config keys, such as \"*token*\"")
		}
	}
}

// capsule returns the sandbox's capsule settings: an empty redact-headers list is the sandbox's
// non-nil empty one (redact none), not its default.
func (c CapsuleConfig) capsule(s *sandbox.Config) {
	s.CapsuleMaxBytes = int(c.MaxBytes)
	s.CapsuleRedactHeaders = append([]string{}, c.RedactHeaders...)
	s.CapsuleRedactConfig = append([]string{}, c.RedactConfig...)
}
