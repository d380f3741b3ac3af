package tests

import (
	"context"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/url"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/wasm/abi"
)

// appendShippedTo appends an OrderShipped commit to aggregate (typ, id),
// owned by buyer.
func (h *hostProc) appendShippedTo(t testing.TB, typ, id, buyer string) {
	t.Helper()
	h.must(201, "POST", "/v1/events", map[string]any{
		"aggregateType": typ, "aggregateId": id, "ownerId": buyer,
		"events": []map[string]any{{"type": "OrderShipped", "data": map[string]string{"carrier": "DHL"}}},
	})
}

// TestInvocationKeysAcrossAggregateTypes: aggregates of two types with the
// same id, and ids and types holding the key's own separators, each reach
// the notification service with a key of their own that names them — so a
// service that drops a key it has seen (as samples/notification-service
// does) drops none of them.
func TestInvocationKeysAcrossAggregateTypes(t *testing.T) {
	svc := newNotifier(t)
	svc.dedupe = true
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	aggs := []struct{ typ, id string }{
		{"Thing", "dup-1"}, {"Other", "dup-1"}, // the same id, two types
		{"Order", "a:b@1"}, {"Order", "a"}, // the old form could be forged by ids
		{"Order/a", "b"}, {"Order", "a/b"}, // an unescaped '/' would make these one
		{"Order", "a%2Fb"}, {"Order", "x@1:0"}, {"Order:x", "y"},
		{"Order", "sp ace"}, {"Order", "größe"},
	}
	for i, a := range aggs {
		h.appendShippedTo(t, a.typ, a.id, fmt.Sprint("b", i))
	}
	keys := map[string]string{}
	for i, a := range aggs {
		want := abi.InvocationKey(subName, a.typ, a.id, 1, 0)
		svc.waitNotified(t, want, 20*time.Second)
		calls := svc.callsOf(fmt.Sprint("b", i))
		if len(calls) != 1 || calls[0].Key != want || calls[0].Dropped || calls[0].Order != a.id {
			t.Errorf("%s/%s: calls %+v, want one notification of order %q with key %q", a.typ, a.id, calls, a.id, want)
			continue
		}
		if other, dup := keys[want]; dup {
			t.Errorf("%s/%s and %s have key %q", a.typ, a.id, other, want)
		}
		keys[want] = a.typ + "/" + a.id
		p, err := abi.ParseInvocationKey(calls[0].Key)
		if err != nil || p != (abi.KeyParts{Subscription: subName, AggregateType: a.typ, AggregateID: a.id, Version: 1}) {
			t.Errorf("key %q parses to %+v, %v", calls[0].Key, p, err)
		}
	}
	if want := "ShipmentNotifier.onOrderShipped:Thing/dup-1@1:0"; keys[want] != "Thing/dup-1" {
		t.Errorf("Thing/dup-1 was not notified with %s: %v", want, keys)
	}
	if want := "ShipmentNotifier.onOrderShipped:Order/a%3Ab%401@1:0"; keys[want] != "Order/a:b@1" {
		t.Errorf("Order/a:b@1 was not notified with %s: %v", want, keys)
	}
}

// TestParkedBeforeTheUpgradeKeepsItsKey: an aggregate parked by a host that
// did not keep keys in its records (its record rewritten here in the shape
// that version wrote, with the host stopped) is resumed with the key its
// event was first delivered with — the old form — so the service recognises
// the event; its held-back event gets the new form. A record parked by this
// version shows the key it keeps.
func TestParkedBeforeTheUpgradeKeepsItsKey(t *testing.T) {
	svc := newNotifier(t)
	svc.dedupe = true
	h := newHost(t, hostConfig{NotifyURL: svc.URL(), Extra: fastRetry})
	h.uploadNotifier(t, 201)
	const typ, id = "Thing", "x:1@1"
	parkedPath := "/v1/subscriptions/" + subName + "/parked/" + typ + "/" + url.PathEscape(id)
	svc.set("ghost", behaviour{Unknown: true})
	h.appendShippedTo(t, typ, id, "ghost")
	var rec parkedRecord
	checkfor.Within(t, 20*time.Second, func() error { return h.fetched(t, parkedPath, &rec) })
	newKey := abi.InvocationKey(subName, typ, id, 1, 0)
	if rec.InvocationKey != newKey {
		t.Errorf("the record shows key %q, want %q", rec.InvocationKey, newKey)
	}
	h.appendShippedTo(t, typ, id, "ghost") // held back

	// The old version's record: no invocationKey.
	h.Stop()
	store, err := ledger.Open(filepath.Join(h.Data, "ledger"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = store.Update(context.Background(), func(tx ledger.Tx) error {
		r, err := tx.Parked(subName, typ, id)
		if err != nil {
			return err
		}
		r.InvocationKey = ""
		return tx.PutParked(r)
	})
	if cerr := store.Close(context.Background()); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	h = h.restart(t)
	oldKey := subName + ":" + id + "@1:0"
	svc.set("ghost", behaviour{})
	h.must(202, "POST", parkedPath+"/resume", map[string]string{"reason": "ghost registered"})
	v2 := abi.InvocationKey(subName, typ, id, 2, 0)
	svc.waitNotified(t, v2, 20*time.Second)
	var keys []string
	for _, c := range svc.callsOf("ghost") {
		keys = append(keys, c.Key)
	}
	if !slices.Equal(keys, []string{newKey, oldKey, v2}) {
		t.Errorf("keys %q, want the first delivery's %q, the resume of the old record with %q, then %q", keys, newKey, oldKey, v2)
	}
	if n := svc.notified(oldKey); n != 1 {
		t.Errorf("the parked event was notified %d times, want 1", n)
	}
}
