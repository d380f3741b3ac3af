package webhook

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// whsec returns a Standard Webhooks secret of n bytes, each b.
func whsec(b byte, n int) string {
	return SecretPrefix + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, n))
}

// The official library's Sign is the reference: SignStandard must agree
// with it byte for byte.
func TestSignStandardMatchesTheLibrary(t *testing.T) {
	secret := whsec('k', 32)
	key, err := ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	lib, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"7","type":"parked"}`)
	want, err := lib.Sign("7", time.Unix(1700000000, 0), body)
	if err != nil {
		t.Fatal(err)
	}
	if got := SignStandard(key, "7", 1700000000, body); got != want {
		t.Errorf("SignStandard = %s, the library signs %s", got, want)
	}
}

func TestParseSecret(t *testing.T) {
	for _, c := range []struct {
		name, secret, wantErr string
	}{
		{"valid", whsec('a', 32), ""},
		{"shortest", whsec('a', MinKeyBytes), ""},
		{"longest", whsec('a', MaxKeyBytes), ""},
		{"no prefix", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{'a'}, 32)), `begins with "whsec_"`},
		{"not base64", SecretPrefix + "not base64!", "standard base64"},
		{"too short", whsec('a', MinKeyBytes-1), "this one is 23"},
		{"too long", whsec('a', MaxKeyBytes+1), "this one is 65"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSecret(c.secret)
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseSecret: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("err = %v, want one saying %q", err, c.wantErr)
			}
			if strings.Contains(err.Error(), strings.TrimPrefix(c.secret, SecretPrefix)) {
				t.Errorf("the error shows the secret: %v", err)
			}
		})
	}
	h := Hook{Name: "ops", URL: "http://x/", Secrets: []string{whsec('a', 32), "whsec_short"}}
	if err := h.Validate(); err == nil || !strings.Contains(err.Error(), "secrets[1]") {
		t.Errorf("Validate = %v, want secrets[1] named", err)
	}
}

// A hook in the middle of a rotation (two whsec_ secrets) with the
// deprecated secret as well: a receiver holding any one of the three keys
// verifies the delivery with the official Standard Webhooks library; one
// holding another key does not; Berth-Signature is still sent.
func TestDeliverStandardWebhooks(t *testing.T) {
	clock := newClock()
	s := openStore(t, t.TempDir())
	rc := newReceiver(t, ok)
	plain := newReceiver(t, ok)
	newKey, oldKey := whsec('n', 32), whsec('o', 24)
	h := rc.hook("ops")
	h.Secret, h.Secrets = "legacy-key", []string{newKey, oldKey}
	d, _ := start(t, s, testOptions(t, clock, h, plain.hook("plain")))
	notify(t, s, note(EventParked, "S.h", "o-1"))
	d.Wake()
	checkfor.Eventually(t, func() error {
		if a, b := rc.count(), plain.count(); a != 1 || b != 1 {
			return fmt.Errorf("deliveries %d and %d, want one each", a, b)
		}
		return nil
	})

	got := rc.requests()[0]
	ts := strconv.FormatInt(clock.Now().Unix(), 10)
	for k, v := range map[string]string{HeaderWebhookID: "1", HeaderWebhookTimestamp: ts, HeaderDelivery: "1", HeaderTimestamp: ts} {
		if g := got.header.Get(k); g != v {
			t.Errorf("header %s = %q, want %q", k, g, v)
		}
	}
	if sigs := strings.Split(got.header.Get(HeaderWebhookSignature), " "); len(sigs) != 3 {
		t.Errorf("webhook-signature = %q, want 3 signatures", sigs)
	}
	legacy := SecretPrefix + base64.StdEncoding.EncodeToString([]byte("legacy-key"))
	for _, secret := range []string{newKey, oldKey, legacy} {
		lib, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		// The fake clock is years ahead: the library checks the age
		// against the real one, so the timestamp is checked above.
		if err := lib.VerifyIgnoringTimestamp(got.body, got.header); err != nil {
			t.Errorf("the library refuses the delivery with %s: %v", secret[:10], err)
		}
	}
	other, err := standardwebhooks.NewWebhook(whsec('x', 32))
	if err != nil {
		t.Fatal(err)
	}
	if err := other.VerifyIgnoringTimestamp(got.body, got.header); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
		t.Errorf("another key: err = %v, want no matching signature", err)
	}
	if !Verify("legacy-key", clock.Now().Unix(), got.body, got.header.Get(HeaderSignature)) {
		t.Error("the deprecated Berth-Signature does not verify")
	}

	// Without keys: the id and timestamp, no signature of either kind.
	p := plain.requests()[0].header
	if p.Get(HeaderWebhookID) != "1" || p.Get(HeaderWebhookTimestamp) != ts {
		t.Errorf("unsigned delivery: webhook-id %q, webhook-timestamp %q", p.Get(HeaderWebhookID), p.Get(HeaderWebhookTimestamp))
	}
	for _, k := range []string{HeaderWebhookSignature, HeaderSignature, HeaderTimestamp} {
		if p.Get(k) != "" {
			t.Errorf("unsigned delivery has %s", k)
		}
	}
}
