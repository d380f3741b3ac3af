package ledgertest

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// capsuleTests are the contract tests of the attempt capsules kept beside
// parked and resolved records.
var capsuleTests = []struct {
	name string
	fn   func(t *testing.T, open Opener)
}{
	{"Capsule", testCapsule},
	{"CapsuleReopen", testCapsuleReopen},
	{"CapsuleResolved", testCapsuleResolved},
}

// bigCapsule is a capsule of 256 KiB, as large as the engine's default cap
// lets one grow, with bytes that differ along it.
func bigCapsule() []byte {
	b := make([]byte, 256<<10)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}

// capsuleOf reads the aggregate's capsule; ok is false on ErrNotFound.
func capsuleOf(t *testing.T, s ledger.Store, sub, typ, id string) (v []byte, ok bool) {
	t.Helper()
	view(t, s, func(tx ledger.Tx) error {
		var err error
		v, err = tx.Capsule(sub, typ, id)
		if errors.Is(err, ledger.ErrNotFound) {
			return nil
		}
		if err != nil {
			t.Fatalf("Capsule(%s, %s, %s): %v", sub, typ, id, err)
		}
		ok = true
		return nil
	})
	return v, ok
}

func putCapsule(t *testing.T, s ledger.Store, sub, typ, id string, c []byte) {
	t.Helper()
	update(t, s, func(tx ledger.Tx) error { return tx.PutCapsule(sub, typ, id, c) })
}

// testCapsule: a parked record's capsule is stored as given (256 KiB and
// MaxCapsuleSize included), replaced by the next, removed by an empty one,
// apart from the record's JSON and from other aggregates; none without a
// record, and a refused or rolled back write leaves nothing.
func testCapsule(t *testing.T, open Opener) {
	s := openNew(t, open)
	if _, ok := capsuleOf(t, s, "sub-a", "order", "o-1"); ok {
		t.Fatal("a capsule of an unknown aggregate")
	}
	err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutCapsule("sub-a", "order", "o-1", []byte("{}")) })
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("PutCapsule without a record: %v, want ErrNotFound", err)
	}
	r := rec("sub-a", "order", "o-1", ledger.StateWaiting, 0)
	put(t, s, r, rec("sub-a", "order", "o-2", ledger.StateWaiting, 0))
	if _, ok := capsuleOf(t, s, "sub-a", "order", "o-1"); ok {
		t.Fatal("a record parked without a capsule has one")
	}
	first := bigCapsule()
	putCapsule(t, s, "sub-a", "order", "o-1", first)
	if got, ok := capsuleOf(t, s, "sub-a", "order", "o-1"); !ok || !bytes.Equal(got, first) {
		t.Fatalf("Capsule after PutCapsule: %d bytes (found %v), want the %d put", len(got), ok, len(first))
	}
	for _, k := range [][3]string{{"sub-a", "order", "o-2"}, {"sub-b", "order", "o-1"}, {"sub-a", "invoice", "o-1"}} {
		if _, ok := capsuleOf(t, s, k[0], k[1], k[2]); ok {
			t.Errorf("%v has o-1's capsule", k)
		}
	}
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.Parked("sub-a", "order", "o-1")
		if err != nil || sameRecord(got, r) != "" {
			t.Errorf("the record changed with its capsule: %v %s", err, sameRecord(got, r))
		}
		return nil
	})
	putCapsule(t, s, "sub-a", "order", "o-1", []byte(`{"format":"berth-capsule/1"}`))
	if got, _ := capsuleOf(t, s, "sub-a", "order", "o-1"); string(got) != `{"format":"berth-capsule/1"}` {
		t.Fatalf("Capsule after a second PutCapsule: %.40q, want the second", got)
	}
	// The record's replacement keeps its capsule.
	r.State = ledger.StateResuming
	put(t, s, r)
	if got, _ := capsuleOf(t, s, "sub-a", "order", "o-1"); string(got) != `{"format":"berth-capsule/1"}` {
		t.Fatalf("Capsule after PutParked replaced the record: %.40q", got)
	}
	errRollback := errors.New("roll back")
	err = s.Update(t.Context(), func(tx ledger.Tx) error {
		if err := tx.PutCapsule("sub-a", "order", "o-2", []byte("rolled back")); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("the rolled back update: %v", err)
	}
	if _, ok := capsuleOf(t, s, "sub-a", "order", "o-2"); ok {
		t.Error("a rolled back PutCapsule stored its capsule")
	}
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.PutCapsule("sub-a", "order", "o-2", make([]byte, ledger.MaxCapsuleSize+1)); !errors.Is(err, ledger.ErrTooBig) {
			t.Errorf("PutCapsule past MaxCapsuleSize: %v, want ErrTooBig", err)
		}
		return nil
	})
	if _, ok := capsuleOf(t, s, "sub-a", "order", "o-2"); ok {
		t.Error("a refused PutCapsule stored its capsule")
	}
	// As large as the ledger takes.
	putCapsule(t, s, "sub-a", "order", "o-2", bytes.Repeat([]byte{'c'}, ledger.MaxCapsuleSize))
	if got, _ := capsuleOf(t, s, "sub-a", "order", "o-2"); len(got) != ledger.MaxCapsuleSize {
		t.Errorf("a capsule of MaxCapsuleSize reads back %d bytes", len(got))
	}
	// An empty capsule removes the record's; none to remove is no error.
	for range 2 {
		putCapsule(t, s, "sub-a", "order", "o-2", nil)
		if got, ok := capsuleOf(t, s, "sub-a", "order", "o-2"); ok {
			t.Fatalf("Capsule after an empty PutCapsule: %d bytes", len(got))
		}
	}
	err = s.View(t.Context(), func(tx ledger.Tx) error { return tx.PutCapsule("sub-a", "order", "o-2", []byte("x")) })
	if !errors.Is(err, ledger.ErrReadOnly) {
		t.Errorf("PutCapsule in a View: %v, want ErrReadOnly", err)
	}
}

// testCapsuleReopen: a capsule survives Close.
func testCapsuleReopen(t *testing.T, open Opener) {
	name := t.TempDir()
	s := openAt(t, open, name)
	put(t, s, rec("sub-a", "order", "o-1", ledger.StateWaiting, 0))
	c := bigCapsule()
	putCapsule(t, s, "sub-a", "order", "o-1", c)
	if err := s.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, open, name)
	if got, ok := capsuleOf(t, s, "sub-a", "order", "o-1"); !ok || !bytes.Equal(got, c) {
		t.Fatalf("Capsule after reopen: %d bytes (found %v), want %d", len(got), ok, len(c))
	}
}

// testCapsuleResolved: a capsule moves with its record when it is
// resolved and stays readable; a record parked again has none of its own
// until one is put; Capsule then answers with the live record's, and with
// the latest resolved record's once none is live; the retention sweep
// deletes a resolved record's capsule with it.
func testCapsuleResolved(t *testing.T, open Opener) {
	s := openNew(t, open)
	park := func(c []byte) {
		put(t, s, rec("sub-a", "order", "o-1", ledger.StateWaiting, 0))
		if c != nil {
			putCapsule(t, s, "sub-a", "order", "o-1", c)
		}
	}
	resolve := func(at time.Time) {
		r := rec("sub-a", "order", "o-1", ledger.StateResuming, 0)
		r.History = append(r.History, ledger.Entry{Time: at, Action: "resume", Actor: "ops"})
		put(t, s, r)
		update(t, s, func(tx ledger.Tx) error { return tx.DeleteParked("sub-a", "order", "o-1") })
	}
	first := bigCapsule()
	park(first)
	resolve(base())
	if got, ok := capsuleOf(t, s, "sub-a", "order", "o-1"); !ok || !bytes.Equal(got, first) {
		t.Fatalf("Capsule after the record was resolved: %d bytes (found %v), want %d", len(got), ok, len(first))
	}
	// Parked again: the new record has no capsule; the resolved one's is not its.
	park(nil)
	if got, ok := capsuleOf(t, s, "sub-a", "order", "o-1"); ok {
		t.Fatalf("a record parked again has the resolved record's capsule (%d bytes)", len(got))
	}
	putCapsule(t, s, "sub-a", "order", "o-1", []byte("second"))
	if got, _ := capsuleOf(t, s, "sub-a", "order", "o-1"); string(got) != "second" {
		t.Fatalf("Capsule of the second record: %.40q", got)
	}
	resolve(base().Add(time.Hour))
	if got, _ := capsuleOf(t, s, "sub-a", "order", "o-1"); string(got) != "second" {
		t.Fatalf("Capsule after the second record was resolved: %.40q, want the latest resolved record's", got)
	}
	// Parked and resolved a third time without a capsule: the latest
	// resolved record has none.
	park(nil)
	resolve(base().Add(2 * time.Hour))
	if got, ok := capsuleOf(t, s, "sub-a", "order", "o-1"); ok {
		t.Fatalf("Capsule of a resolved record without one: %.40q", got)
	}
	sweep := func(before time.Time) {
		for more := true; more; {
			update(t, s, func(tx ledger.Tx) error {
				var err error
				more, err = tx.SweepResolved(before, 1)
				return err
			})
		}
	}
	park(nil)
	putCapsule(t, s, "sub-a", "order", "o-1", []byte("fourth"))
	resolve(base().Add(3 * time.Hour))
	sweep(base().Add(150 * time.Minute)) // the first three go
	if got, _ := capsuleOf(t, s, "sub-a", "order", "o-1"); string(got) != "fourth" {
		t.Fatalf("Capsule after the sweep of older records: %.40q, want the fourth", got)
	}
	sweep(base().Add(4 * time.Hour))
	if got, ok := capsuleOf(t, s, "sub-a", "order", "o-1"); ok {
		t.Fatalf("Capsule after every record was swept: %.40q", got)
	}
	view(t, s, func(tx ledger.Tx) error {
		if left, _, _ := tx.ListResolved(ledger.ResolvedFilter{}); len(left) != 0 {
			t.Errorf("%d resolved records left after the sweep", len(left))
		}
		return nil
	})
}
