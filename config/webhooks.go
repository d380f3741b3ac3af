package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/webhook"
)

// WebhookEvents returns every event a webhook can be told about ([[webhooks]] events), in the order
// they happen: the ledger's notification types.
func WebhookEvents() []string { return ledger.NotificationTypes() }

// Webhook is one [[webhooks]] entry: an endpoint told about parked aggregates.
type Webhook struct {
	// Name identifies the webhook in logs and its delivery outbox (required, unique).
	Name string `toml:"name"`
	// URL is the http or https endpoint the events are POSTed to (required).
	URL string `toml:"url"`
	// Secret is the raw HMAC key of the deprecated Berth-Signature header, also a Standard Webhooks key
	// (default none; set it or SecretEnv). Deprecated: use Secrets; Berth-Signature goes next release.
	Secret string `toml:"secret"`
	// SecretEnv names the environment variable holding Secret's key, read at load (default none).
	SecretEnv string `toml:"secret-env"`
	// Secrets are the Standard Webhooks secrets ("whsec_" and a base64 key of 24 to 64 bytes) that
	// sign webhook-signature, one signature each, so a key is rotated by listing the new beside the old
	// (default none).
	Secrets []string `toml:"secrets"`
	// SecretsEnv names environment variables each holding one of Secrets, read at load (default none).
	SecretsEnv []string `toml:"secrets-env"`
	// Events is the events the webhook is told about, from WebhookEvents (default empty: all).
	Events []string `toml:"events"`
	// Subscriptions limits the webhook to these subscriptions, "Processor.handler" (default empty: all).
	Subscriptions []string `toml:"subscriptions"`

	secret  string   // the value of SecretEnv at load
	secrets []string // the values of SecretsEnv at load
}

// StandardSecrets returns the Standard Webhooks secrets: Secrets, then the values SecretsEnv had when the
// file was loaded.
func (w Webhook) StandardSecrets() []string {
	return append(slices.Clone(w.Secrets), w.secrets...)
}

// SigningKey returns the HMAC key: Secret, or the value SecretEnv had when the file was loaded; empty
// when deliveries are not signed.
func (w Webhook) SigningKey() string {
	if w.Secret != "" {
		return w.Secret
	}
	return w.secret
}

// Wants reports whether the webhook is told about event in subscription: both filters pass (an empty
// filter passes everything).
func (w Webhook) Wants(event, subscription string) bool {
	return (len(w.Events) == 0 || slices.Contains(w.Events, event)) &&
		(len(w.Subscriptions) == 0 || slices.Contains(w.Subscriptions, subscription))
}

func validateWebhooks(p *problems, hooks []Webhook, at keyPath) {
	names := map[string]int{}
	for i, w := range hooks {
		k := at.at(i)
		if w.Name == "" {
			p.add(k.key("name"), `""`, "each webhook needs a name")
		} else if j, dup := names[w.Name]; dup {
			p.add(k.key("name"), fmt.Sprintf("%q", w.Name), "also the name of webhooks[%d]", j)
		} else {
			names[w.Name] = i
		}
		if w.URL == "" {
			p.add(k.key("url"), `""`, "each webhook needs a url")
		} else if err := checkHTTPURL(w.URL, "use secret or secret-env"); err != nil {
			p.add(k.key("url"), fmt.Sprintf("%q", w.URL), "%v", err)
		}
		switch {
		case w.Secret != "" && w.SecretEnv != "":
			p.add(k.key("secret"), "", "set secret or secret-env, not both")
		case w.SecretEnv != "" && w.secret == "":
			p.add(k.key("secret-env"), fmt.Sprintf("%q", w.SecretEnv), "the environment variable is not set or empty")
		}
		validateStandardSecrets(p, w, k)
		for j, e := range w.Events {
			switch {
			case !slices.Contains(WebhookEvents(), e):
				p.add(k.key("events").at(j), fmt.Sprintf("%q", e), "want %s", strings.Join(WebhookEvents(), ", "))
			case slices.Index(w.Events, e) < j:
				p.add(k.key("events").at(j), fmt.Sprintf("%q", e), "listed twice")
			}
		}
		for j, s := range w.Subscriptions {
			if strings.TrimSpace(s) == "" || strings.TrimSpace(s) != s {
				p.add(k.key("subscriptions").at(j), fmt.Sprintf("%q", s), "a subscription name must not be empty or start or end with a space")
			}
		}
	}
}

// validateStandardSecrets checks secrets and secrets-env: each a Standard Webhooks secret, none twice;
// an error never shows a secret.
func validateStandardSecrets(p *problems, w Webhook, k keyPath) {
	seen := map[string]bool{}
	check := func(at keyPath, shown, secret string) {
		if _, err := webhook.ParseSecret(secret); err != nil {
			p.add(at, shown, "%v", err)
		} else if seen[secret] {
			p.add(at, shown, "the same secret is listed twice")
		}
		seen[secret] = true
	}
	for j, s := range w.Secrets {
		check(k.key("secrets").at(j), "", s)
	}
	for j, env := range w.SecretsEnv {
		at := k.key("secrets-env").at(j)
		if j >= len(w.secrets) || w.secrets[j] == "" {
			p.add(at, fmt.Sprintf("%q", env), "the environment variable is not set or empty")
			continue
		}
		check(at, fmt.Sprintf("%q", env), w.secrets[j])
	}
}

// Hooks returns [[webhooks]] as the webhook dispatcher's hooks, each with its signing key.
func (c *Config) Hooks() []webhook.Hook {
	hooks := make([]webhook.Hook, len(c.Webhooks))
	for i, w := range c.Webhooks {
		//lint:ignore SA1019 the deprecated secret key is read until it is removed.
		hooks[i] = webhook.Hook{Name: w.Name, URL: w.URL, Secret: w.SigningKey(), Secrets: w.StandardSecrets(),
			Events: w.Events, Subscriptions: w.Subscriptions}
	}
	return hooks
}
