package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of a delivery.
const (
	// HeaderEvent carries the notification type ("parked", …).
	HeaderEvent = "Berth-Event"
	// HeaderDelivery carries the notification's Seq, the same as the
	// payload's "id": the same for every attempt of one delivery, so a
	// receiver can deduplicate on it.
	HeaderDelivery = "Berth-Delivery"
	// HeaderTimestamp carries the signing time in Unix seconds (deliveries
	// signed with a hook's deprecated Secret only).
	//
	// Deprecated: read [HeaderWebhookTimestamp]; sent for one more release.
	HeaderTimestamp = "Berth-Timestamp"
	// HeaderSignature carries "sha256=" and the hex HMAC (deliveries signed
	// with a hook's deprecated Secret only); see [Sign].
	//
	// Deprecated: verify [HeaderWebhookSignature] as Standard Webhooks
	// do; sent for one more release.
	HeaderSignature = "Berth-Signature"
	// HeaderWebhookID is Standard Webhooks' message id: the notification's
	// Seq, as Berth-Delivery, the same for every attempt of one delivery.
	HeaderWebhookID = "webhook-id"
	// HeaderWebhookTimestamp is Standard Webhooks' signing time, in Unix
	// seconds.
	HeaderWebhookTimestamp = "webhook-timestamp"
	// HeaderWebhookSignature is Standard Webhooks' signatures, space
	// separated, one "v1,<base64>" for each of the hook's keys; see
	// [SignStandard].
	HeaderWebhookSignature = "webhook-signature"
	// UserAgent is the User-Agent of every delivery.
	UserAgent = "berth-webhooks"
)

// DefaultTolerance is how far a delivery's timestamp may be from the
// receiver's clock for [VerifyRequest] when it is given a tolerance of 0.
const DefaultTolerance = 5 * time.Minute

// MaxBody is the largest body [VerifyRequest] reads: 1 MiB.
const MaxBody = 1 << 20

// Errors of [VerifyRequest].
var (
	// ErrNoSignature means the request carries no signature or timestamp.
	ErrNoSignature = errors.New("webhook: request is not signed")
	// ErrBadSignature means the signature does not match the body and timestamp.
	ErrBadSignature = errors.New("webhook: signature does not match")
	// ErrStale means the timestamp is further from now than the tolerance.
	ErrStale = errors.New("webhook: timestamp outside the tolerance")
)

// SecretPrefix begins every Standard Webhooks secret: "whsec_" and then
// the key in standard base64.
const SecretPrefix = "whsec_"

// The bounds of a Standard Webhooks key, decoded, as the specification
// asks of a secret.
const (
	MinKeyBytes = 24
	MaxKeyBytes = 64
)

// ParseSecret returns the key of a Standard Webhooks secret ("whsec_" and
// the key in standard base64, [MinKeyBytes] to [MaxKeyBytes] long), or an
// error that says what is wrong with it and never holds the secret.
func ParseSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, fmt.Errorf("a secret begins with %q", SecretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("after %q a secret is standard base64", SecretPrefix)
	}
	if len(key) < MinKeyBytes || len(key) > MaxKeyBytes {
		return nil, fmt.Errorf("a secret's key is %d to %d bytes, this one is %d", MinKeyBytes, MaxKeyBytes, len(key))
	}
	return key, nil
}

// SignStandard returns the Standard Webhooks signature of a delivery: "v1,"
// followed by the standard base64 HMAC-SHA256, keyed with key (a secret's
// decoded key, [ParseSecret]), of the message id, a dot, the decimal Unix
// timestamp ts, a dot, and the exact request body:
//
//	webhook-signature: v1,base64(HMAC-SHA256(key, "<webhook-id>.<webhook-timestamp>." + body))
//
// A hook with several keys sends one signature for each, separated by
// spaces, so a receiver may verify with any of them while a key is
// rotated.
func SignStandard(key []byte, id string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// Sign returns the signature of a delivery: "sha256=" followed by the
// lower-case hex HMAC-SHA256, keyed with secret, of the decimal Unix
// timestamp ts, a dot, and the exact request body:
//
//	Berth-Signature: sha256=hex(HMAC-SHA256(secret, "<Berth-Timestamp>" + "." + body))
//
// Signing the timestamp lets a receiver refuse replays of old deliveries.
//
// Deprecated: Berth-Signature is sent for one more release beside the
// Standard Webhooks headers; see [SignStandard].
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(strconv.AppendInt(nil, ts, 10))
	m.Write([]byte{'.'})
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether signature (a Berth-Signature value) is the
// signature of body at ts with secret, comparing in constant time. It does
// not check the timestamp's age; [VerifyRequest] does.
func Verify(secret string, ts int64, body []byte, signature string) bool {
	return hmac.Equal([]byte(Sign(secret, ts, body)), []byte(signature))
}

// VerifyRequest reads the body of a delivery (at most [MaxBody] bytes) and
// checks its Berth-Signature against secret and its Berth-Timestamp against
// now, within tolerance ([DefaultTolerance] when 0). It returns the body for
// the receiver to decode into a [Payload], or an error: [ErrNoSignature],
// [ErrStale], [ErrBadSignature], or a read error.
func VerifyRequest(r *http.Request, secret string, now time.Time, tolerance time.Duration) ([]byte, error) {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sig, tsText := r.Header.Get(HeaderSignature), r.Header.Get(HeaderTimestamp)
	if sig == "" || tsText == "" {
		return nil, ErrNoSignature
	}
	ts, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a number", ErrBadSignature, HeaderTimestamp)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > tolerance || d < -tolerance {
		return nil, ErrStale
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("webhook: read body: %w", err)
	}
	if len(body) > MaxBody {
		return nil, fmt.Errorf("webhook: body larger than %d bytes", MaxBody)
	}
	if !Verify(secret, ts, body, sig) {
		return nil, ErrBadSignature
	}
	return body, nil
}
