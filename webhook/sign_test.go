package webhook

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"testing"
	"time"
)

func TestSignKnownVector(t *testing.T) {
	// printf '1700000000.{"id":"1"}' | openssl dgst -sha256 -hmac s3cret
	const want = "sha256=2b9dee6c893e4bf012ad34ee7b89d492b9567b4f47740ccbf0f161ba3717dc08"
	if got := Sign("s3cret", 1700000000, []byte(`{"id":"1"}`)); got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestVerifyRequest(t *testing.T) {
	now := time.Unix(1700000000, 0)
	body := []byte(`{"id":"1","type":"parked"}`)
	for _, c := range []struct {
		name    string
		ts      string
		sig     string
		body    []byte
		secret  string
		wantErr error
	}{
		{"valid", "1700000000", Sign("k", 1700000000, body), body, "k", nil},
		{"valid within tolerance", "1699999800", Sign("k", 1699999800, body), body, "k", nil},
		{"tampered body", "1700000000", Sign("k", 1700000000, body), []byte(`{"id":"2","type":"parked"}`), "k", ErrBadSignature},
		{"other secret", "1700000000", Sign("k", 1700000000, body), body, "other", ErrBadSignature},
		{"timestamp swapped", "1700000001", Sign("k", 1700000000, body), body, "k", ErrBadSignature},
		{"stale", "1699999000", Sign("k", 1699999000, body), body, "k", ErrStale},
		{"future", "1700001000", Sign("k", 1700001000, body), body, "k", ErrStale},
		{"unsigned", "", "", body, "k", ErrNoSignature},
		{"bad timestamp", "soon", Sign("k", 1700000000, body), body, "k", ErrBadSignature},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/hook", bytes.NewReader(c.body))
			if c.ts != "" {
				r.Header.Set(HeaderTimestamp, c.ts)
			}
			if c.sig != "" {
				r.Header.Set(HeaderSignature, c.sig)
			}
			got, err := VerifyRequest(r, c.secret, now, 0)
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if err == nil && !bytes.Equal(got, c.body) {
				t.Errorf("body = %s", got)
			}
		})
	}
}

func TestVerifyRequestTooBig(t *testing.T) {
	body := bytes.Repeat([]byte("x"), MaxBody+1)
	r := httptest.NewRequest("POST", "/hook", bytes.NewReader(body))
	r.Header.Set(HeaderTimestamp, "1700000000")
	r.Header.Set(HeaderSignature, Sign("k", 1700000000, body))
	if _, err := VerifyRequest(r, "k", time.Unix(1700000000, 0), time.Minute); err == nil {
		t.Error("a body above MaxBody was accepted")
	}
}

func TestBackoff(t *testing.T) {
	o := Options{}.withDefaults()
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300}
	for i, w := range want {
		if got := o.backoff(i + 1); got != w*time.Second {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w*time.Second)
		}
	}
	if got := o.backoff(1000); got != DefaultMaxBackoff {
		t.Errorf("backoff(1000) = %v", got)
	}
}

func TestValidateHooks(t *testing.T) {
	good := Hook{Name: "ops", URL: "https://example.com/hook", Events: []string{EventParked}, Subscriptions: []string{"A.b"}}
	if err := ValidateHooks([]Hook{good, {Name: "two", URL: "http://127.0.0.1:9/x"}}); err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]Hook{
		"no name":       {URL: "https://example.com/"},
		"no url":        {Name: "x"},
		"scheme":        {Name: "x", URL: "ftp://example.com/"},
		"relative":      {Name: "x", URL: "/hook"},
		"credentials":   {Name: "x", URL: "https://u:p@example.com/"},
		"unknown event": {Name: "x", URL: "https://example.com/", Events: []string{"parkd"}},
		"empty sub":     {Name: "x", URL: "https://example.com/", Subscriptions: []string{""}},
	} {
		if err := h.Validate(); err == nil {
			t.Errorf("%s: %+v is valid", name, h)
		}
	}
	if err := ValidateHooks([]Hook{good, good}); err == nil {
		t.Error("two hooks of one name are valid")
	}
}

func TestWants(t *testing.T) {
	h := Hook{Events: []string{EventParked, EventResumed}, Subscriptions: []string{"A.b"}}
	for _, c := range []struct {
		event, sub string
		want       bool
	}{
		{EventParked, "A.b", true}, {EventResumed, "A.b", true}, {EventSkipped, "A.b", false}, {EventParked, "A.c", false},
	} {
		if got := h.Wants(c.event, c.sub); got != c.want {
			t.Errorf("Wants(%s, %s) = %v", c.event, c.sub, got)
		}
	}
	if !(Hook{}).Wants("anything", "any") {
		t.Error("a hook without filters refuses")
	}
}
