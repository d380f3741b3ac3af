package api

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/ledger"
)

// TestParkedCapsule: a parked record's capsule is answered to a reader as
// the ledger keeps it, as a file with a safe name, and the record's JSON
// links it; a record without one, an aggregate without a record and an
// unknown subscription are 404s that say which; once the aggregate is
// skipped its resolved record's capsule is still answered.
func TestParkedCapsule(t *testing.T) {
	t.Parallel()
	h := parkedWithAuth(t, "o-2")
	sub := "/v1/subscriptions/" + notifierSub
	// What the invoker kept (if anything) is replaced by a capsule of the test's.
	capsule := `{"format":"berth-capsule/1","event":{"aggregate_id":"o-2"},"calls":[]}`
	// Records the engine never parked: one without a capsule, and one whose
	// id holds what must not reach a file name.
	odd := "a/b\"c\r\n;x"
	h.ledgerUpdate(func(tx ledger.Tx) error {
		if err := tx.PutCapsule(notifierSub, "Order", "o-2", []byte(capsule)); err != nil {
			return err
		}
		for _, id := range []string{"o-8", odd} {
			if err := tx.PutParked(&ledger.Record{Subscription: notifierSub, AggregateType: "Order", AggregateID: id,
				Version: 1, State: ledger.StateWaiting, WaitReason: ledger.WaitUnrecoverable}); err != nil {
				return err
			}
		}
		return tx.PutCapsule(notifierSub, "Order", odd, []byte(capsule))
	})

	r := h.do(req{method: "GET", path: sub + "/parked/Order/o-2/capsule", token: readerToken})
	if r.status != http.StatusOK || string(r.body) != capsule {
		t.Fatalf("capsule: %s", r)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/vnd.berth.capsule+json" {
		t.Errorf("Content-Type %q", ct)
	}
	if cd := r.header.Get("Content-Disposition"); cd != `attachment; filename="capsule-ShipmentNotifier.onOrderShipped-Order-o-2.json"` {
		t.Errorf("Content-Disposition %q", cd)
	}
	var rec wire.ParkedRecordDetail
	h.do(req{method: "GET", path: sub + "/parked/Order/o-2", token: readerToken}).json(t, &rec)
	if rec.Capsule != sub+"/parked/Order/o-2/capsule" {
		t.Errorf("the record links %q, want its capsule's path", rec.Capsule)
	}

	oddPath := sub + "/parked/Order/a%2Fb%22c%0D%0A%3Bx"
	h.do(req{method: "GET", path: oddPath, token: readerToken}).json(t, &rec)
	if rec.Capsule != oddPath+"/capsule" {
		t.Errorf("the odd record links %q, want %q", rec.Capsule, oddPath+"/capsule")
	}
	r = h.do(req{method: "GET", path: rec.Capsule, token: readerToken})
	if cd := r.header.Get("Content-Disposition"); r.status != http.StatusOK ||
		cd != `attachment; filename="capsule-ShipmentNotifier.onOrderShipped-Order-a_b_c___x.json"` {
		t.Errorf("the odd record's capsule: %s, Content-Disposition %q", r, cd)
	}

	var none wire.ParkedRecordDetail
	h.do(req{method: "GET", path: sub + "/parked/Order/o-8", token: readerToken}).json(t, &none)
	if none.Capsule != "" {
		t.Errorf("a record without a capsule links %q", none.Capsule)
	}
	for _, tc := range []struct{ path, says string }{
		{sub + "/parked/Order/o-8/capsule", "has no capsule"},
		{sub + "/parked/Order/o-404/capsule", "not parked"},
		{"/v1/subscriptions/ShipmentNotifier.onOrderShiped/parked/Order/o-2/capsule", "unknown subscription"},
	} {
		if p := problemOf(t, h.do(req{method: "GET", path: tc.path, token: readerToken}), http.StatusNotFound); !strings.Contains(p.Detail, tc.says) {
			t.Errorf("GET %s: %q does not say %q", tc.path, p.Detail, tc.says)
		}
	}
	problemOf(t, h.do(req{method: "GET", path: sub + "/parked/Order/o-2/capsule"}), http.StatusUnauthorized)

	if r := h.do(req{method: "POST", path: sub + "/parked/Order/o-2/skip", token: operatorToken}); r.status != http.StatusAccepted {
		t.Fatalf("skip: %s", r)
	}
	h.waitGone("o-2")
	if r := h.do(req{method: "GET", path: sub + "/parked/Order/o-2/capsule", token: readerToken}); r.status != http.StatusOK || string(r.body) != capsule {
		t.Fatalf("the skipped record's capsule: %s", r)
	}
}

// ledgerUpdate runs fn in a transaction of the host's ledger.
func (h *testHost) ledgerUpdate(fn func(tx ledger.Tx) error) {
	h.t.Helper()
	if err := h.ledger.Update(context.Background(), fn); err != nil {
		h.t.Fatal(err)
	}
}
