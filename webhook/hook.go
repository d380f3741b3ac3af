// Package webhook delivers the ledger's notifications (an aggregate parked,
// spent its long-horizon retries, was resumed or was skipped; a partition
// paused by an outage and its end; a subscription paused, unpaused or reset
// by an operator; a job finished) to HTTP endpoints. It owns the hooks and their filters, each hook's deliveries
// (in order, retried, signed) and its durable cursor, and the outbox's
// acknowledgement; the notifications themselves are the ledger's. It sits
// beside the ledger rather than inside it: the ledger only stores, and this
// is the part that calls out over the network.
//
// # Queue
//
// The queue is the ledger's outbox: the engine writes a notification with
// [ledger.Outbox.Notify] in the same transaction as the park, so a notification
// exists if and only if the change it tells of was committed. A [Dispatcher]
// only reads the outbox; it never runs in the engine's path, so a slow or
// dead endpoint cannot hold up event handling.
//
// # Fan-out and progress
//
// Every notification goes to every [Hook] whose filters match. Each hook
// has its own goroutine and its own durable cursor, the Seq of the last
// notification it is done with (delivered, filtered out or dropped). The
// cursors are kept in the ledger's per-subscription meta under the reserved
// pseudo-subscription [CursorSubscription] ("~webhooks"), key "cursor/" +
// hook name, as a decimal number. A cursor is written after each delivery,
// so a restart sends again at most the one delivery that was in flight: the
// delivery is at least once, and receivers should deduplicate on the "id"
// field (or the Berth-Delivery header). Outbox entries are acknowledged
// (removed) up to the smallest cursor of the configured hooks; with no hook
// configured, every queued notification is acknowledged, as nobody is
// listening.
//
// A hook that has no stored cursor (a new name) starts with the oldest
// notification still queued. A hook that is removed and later added again
// under the same name resumes from its cursor. A hook that stays down holds
// back the acknowledgement of the outbox, which keeps its notifications until
// they are delivered or dropped; [Dispatcher.Stats] shows how many are
// pending.
//
// In a cluster one host at a time dispatches (the webhooks duty), under the
// duty's claim in the ledger ([Dispatcher.RunFenced]): every cursor write
// and acknowledgement checks it, and so does a read of the ledger right
// before each delivery is sent, so a host whose duty moved on sends nothing
// more.
// A request already on the wire when the duty moved may still arrive: the
// new holder sends that notification again (at least once, as above).
//
// # Retries
//
// A delivery that fails (a network error, a timeout, or an answer other than
// 2xx) is tried again after a backoff that starts at
// [Options.InitialBackoff] (1s) and doubles up to [Options.MaxBackoff] (5m),
// without jitter. A 429 or 503 answer with a Retry-After header (seconds or
// an HTTP date) is retried after that delay instead, at most
// [MaxRetryAfter]. After [Options.MaxAttempts] (20) failed attempts the
// delivery is dropped, logged as an error and counted, and the hook goes on
// with the next notification. With the defaults a delivery is given up
// about an hour after its first attempt. Each hook delivers in order: its
// next notification waits for the one in flight.
//
// # Requests
//
// Each delivery is a POST of a JSON [Payload] (the notification, plus "id"
// and "hook") with the headers Content-Type: application/json, User-Agent:
// berth-webhooks, Berth-Event (the notification type), Berth-Delivery (the
// notification's Seq, the same as "id"), and Standard Webhooks' headers
// (https://www.standardwebhooks.com): webhook-id (the same Seq),
// webhook-timestamp and, when the hook has keys, webhook-signature with one
// "v1," signature for each key ([SignStandard]), so any Standard Webhooks
// library verifies a delivery. A hook's keys are its Secrets ("whsec_"
// secrets, several while one is rotated) and its deprecated Secret, whose
// raw bytes are the key (its Standard Webhooks form is "whsec_" and the
// base64 of those bytes). A hook with the deprecated Secret also sends
// Berth-Timestamp and Berth-Signature, for one more release; see [Sign] and
// [VerifyRequest].
package webhook

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/berthhq/berth/ledger"
)

// The notification types a hook can be told about (the Type of a
// [ledger.Notification], the Berth-Event header).
const (
	// EventParked: an aggregate spent its retry budget and was parked.
	EventParked = ledger.NotifyParked
	// EventRetriesSpent: a parked aggregate spent its long-horizon retries
	// and waits for an operator.
	EventRetriesSpent = ledger.NotifyRetriesSpent
	// EventResumed: a parked aggregate was resumed.
	EventResumed = ledger.NotifyResumed
	// EventSkipped: a parked aggregate was skipped.
	EventSkipped = ledger.NotifySkipped
	// EventPartitionPaused: a partition paused because its failures are
	// systemic (an outage); the payload's "partition" names it.
	EventPartitionPaused = ledger.NotifyPartitionPaused
	// EventPartitionResumed: a partition paused by an outage goes on.
	EventPartitionResumed = ledger.NotifyPartitionResumed
	// EventSubscriptionPaused: an operator paused a subscription.
	EventSubscriptionPaused = ledger.NotifySubscriptionPaused
	// EventSubscriptionUnpaused: a paused subscription goes on.
	EventSubscriptionUnpaused = ledger.NotifySubscriptionUnpaused
	// EventSubscriptionReset: an operator reset a subscription's
	// checkpoint.
	EventSubscriptionReset = ledger.NotifySubscriptionReset
	// EventJobFinished: a bulk resume or skip job ended.
	EventJobFinished = ledger.NotifyJobFinished
)

// Events returns every notification type a hook can filter on, in the order
// they happen.
func Events() []string { return ledger.NotificationTypes() }

// Hook is one endpoint told about parked aggregates.
type Hook struct {
	// Name identifies the hook in logs and [Dispatcher.Stats], and names its
	// durable cursor (required, unique): renaming a hook starts it afresh
	// from the oldest notification still queued.
	Name string
	// URL is the http or https endpoint deliveries are POSTed to
	// (required). It is never logged, as it may hold a token.
	URL string
	// Secret is the raw HMAC-SHA256 key of the deprecated Berth-Signature
	// (default empty: none). It also signs webhook-signature, as the
	// Standard Webhooks secret "whsec_" + base64(Secret).
	//
	// Deprecated: use Secrets; Berth-Signature is sent for one more release.
	Secret string
	// Secrets are the Standard Webhooks secrets ("whsec_" and a base64 key,
	// [ParseSecret]) deliveries are signed with, each giving one signature
	// in webhook-signature: while a key is rotated the hook holds the old
	// and the new (default empty: unsigned, unless Secret is set).
	Secrets []string
	// Events limits the hook to these notification types, from [Events]
	// (default empty: all).
	Events []string
	// Subscriptions limits the hook to notifications of these subscriptions
	// (default empty: all).
	Subscriptions []string
}

// Wants reports whether the hook is told about a notification of type event
// in subscription: both filters pass (an empty filter passes everything).
func (h Hook) Wants(event, subscription string) bool {
	return (len(h.Events) == 0 || slices.Contains(h.Events, event)) &&
		(len(h.Subscriptions) == 0 || slices.Contains(h.Subscriptions, subscription))
}

// Validate checks one hook: a name, an absolute http or https URL without
// credentials, and known event types.
func (h Hook) Validate() error {
	if h.Name == "" {
		return errors.New("webhook: a hook needs a name")
	}
	if err := checkURL(h.URL); err != nil {
		return fmt.Errorf("webhook %q: url: %w", h.Name, err)
	}
	for _, e := range h.Events {
		if !slices.Contains(Events(), e) {
			return fmt.Errorf("webhook %q: unknown event %q (want %s)", h.Name, e, strings.Join(Events(), ", "))
		}
	}
	for i, s := range h.Secrets {
		if _, err := ParseSecret(s); err != nil {
			return fmt.Errorf("webhook %q: secrets[%d]: %w", h.Name, i, err)
		}
	}
	for _, s := range h.Subscriptions {
		if s == "" {
			return fmt.Errorf("webhook %q: empty subscription name in the filter", h.Name)
		}
	}
	return nil
}

// ValidateHooks checks every hook with [Hook.Validate] and that no two share
// a name.
func ValidateHooks(hooks []Hook) error {
	seen := make(map[string]bool, len(hooks))
	var errs []error
	for _, h := range hooks {
		if err := h.Validate(); err != nil {
			errs = append(errs, err)
			continue
		}
		if seen[h.Name] {
			errs = append(errs, fmt.Errorf("webhook %q: name used twice", h.Name))
		}
		seen[h.Name] = true
	}
	return errors.Join(errs...)
}

func checkURL(raw string) error {
	if raw == "" {
		return errors.New("missing")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("want an http:// or https:// URL")
	}
	if u.Host == "" {
		return errors.New("the URL has no host")
	}
	if u.User != nil {
		return errors.New("credentials in the URL are not allowed; use the secret")
	}
	return nil
}

// clone returns a deep copy of h, so the caller's slices can change.
func (h Hook) clone() Hook {
	h.Events = slices.Clone(h.Events)
	h.Subscriptions = slices.Clone(h.Subscriptions)
	h.Secrets = slices.Clone(h.Secrets)
	return h
}

// equal reports whether h and o configure the same hook.
func (h Hook) equal(o Hook) bool {
	return h.Name == o.Name && h.URL == o.URL && h.sameKeys(o) &&
		slices.Equal(h.Events, o.Events) && slices.Equal(h.Subscriptions, o.Subscriptions)
}

// sameKeys reports whether h and o sign with the same keys.
func (h Hook) sameKeys(o Hook) bool {
	return h.Secret == o.Secret && slices.Equal(h.Secrets, o.Secrets)
}

// keys returns the hook's Standard Webhooks keys: each of Secrets decoded
// (one that does not parse is left out: Validate refuses it), then Secret's
// bytes.
func (h Hook) keys() [][]byte {
	var keys [][]byte
	for _, s := range h.Secrets {
		if k, err := ParseSecret(s); err == nil {
			keys = append(keys, k)
		}
	}
	if h.Secret != "" {
		keys = append(keys, []byte(h.Secret))
	}
	return keys
}

// signatures returns the webhook-signature value of a delivery: a
// signature for each key, space separated; empty when the hook has none.
func (h Hook) signatures(id string, ts int64, body []byte) string {
	var sigs []string
	for _, k := range h.keys() {
		sigs = append(sigs, SignStandard(k, id, ts, body))
	}
	return strings.Join(sigs, " ")
}
