package ledger_test

import (
	"strings"
	"testing"

	"github.com/berthhq/berth/ledger"
)

// TestMaskMessage: the masking rules on messages the samples and the host
// send (samples/, wasm/abi/ABI.md, the spec): what varies by aggregate is
// masked, what names the cause is kept.
func TestMaskMessage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// samples/shipment-notifier/notifications.go
		{"the notification service does not know buyer b-4821", "the notification service does not know buyer {}"},
		{"the notification service does not know buyer 99", "the notification service does not know buyer {}"},
		{"the notification service answered 503: upstream unavailable", "the notification service answered {}: upstream unavailable"},
		{"the notification service is busy", "the notification service is busy"},
		// samples/order-saga
		{"order o-17: an item and a positive quantity are required", "order {}: an item and a positive quantity are required"},
		{"the stock service could not process 3f2b6c1e-9a0d-4c5e-8f7a-1b2c3d4e5f60: out of stock",
			"the stock service could not process {}: out of stock"},
		// the host's own
		{"the call ran past its 300ms deadline", "the call ran past its {} deadline"},
		{"dial tcp 10.0.0.3:443: connect: connection refused", "dial tcp {}: connect: connection refused"},
		{"panic: runtime error: index out of range [5] with length 3 [main.go:42]",
			"panic: runtime error: index out of range [{}] with length {} [main.go:{}]"},
		{"the host refused to grow its memory to 1280 pages", "the host refused to grow its memory to {} pages"},
		// quoted values, timestamps, hex, the module's own braces
		{`no customer "Ann O'Neil" in region 'eu-west'`, "no customer {} in region {}"},
		{"token expired at 2026-12-06T04:18:16.123Z", "token expired at {}"},
		{"bad checksum 0xDEADBEEF, want 9f86d081884c7d65", "bad checksum {}, want {}"},
		{"buyer {Ann} is blocked", "buyer {} is blocked"},
		{"ids 1, 2, 3 unknown", "ids {} unknown"},
		{"  white\n\tspace  ", "white space"},
	} {
		if got := ledger.MaskMessage(tc.in); got != tc.want {
			t.Errorf("MaskMessage(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
	long := ledger.MaskMessage(strings.Repeat("é", 300))
	if len(long) > ledger.MaxMaskedMessage || !strings.HasPrefix(strings.Repeat("é", 300), long) {
		t.Errorf("a long message is cut to %d bytes, not on a rune: %d bytes", ledger.MaxMaskedMessage, len(long))
	}
}

// TestFingerprint: one cause is one fingerprint whatever the ids and the
// module's version; another subscription, module, class chain or message
// is another.
func TestFingerprint(t *testing.T) {
	mk := func(sub, module string, classes []string, msg string) *ledger.Record {
		return &ledger.Record{Subscription: sub, AggregateType: "order", AggregateID: "x",
			Error: ledger.ErrorInfo{Classes: classes, Message: msg, Module: module}}
	}
	base := mk("notify", "shipment-notifier v3", []string{"UnknownBuyer"}, "does not know buyer b-1")
	fp := ledger.Fingerprint(base)
	if len(fp) != 16 {
		t.Fatalf("fingerprint %q: want 16 hex digits", fp)
	}
	if got := ledger.Fingerprint(mk("notify", "shipment-notifier v4", []string{"UnknownBuyer"}, "does not know buyer c-22")); got != fp {
		t.Errorf("another id and version: %s, want %s", got, fp)
	}
	for name, r := range map[string]*ledger.Record{
		"subscription": mk("notify2", "shipment-notifier v3", []string{"UnknownBuyer"}, "does not know buyer b-1"),
		"module":       mk("notify", "order-saga v3", []string{"UnknownBuyer"}, "does not know buyer b-1"),
		"classes":      mk("notify", "shipment-notifier v3", []string{"UnknownBuyer", "Downstream"}, "does not know buyer b-1"),
		"message":      mk("notify", "shipment-notifier v3", []string{"UnknownBuyer"}, "does not know seller b-1"),
	} {
		if ledger.Fingerprint(r) == fp {
			t.Errorf("another %s, the same fingerprint", name)
		}
	}
	if got := ledger.ModuleName("shipment-notifier v12"); got != "shipment-notifier" {
		t.Errorf("ModuleName = %q", got)
	}
	if got := ledger.ModuleName("my vault"); got != "my vault" {
		t.Errorf("ModuleName(no version) = %q", got)
	}
}
