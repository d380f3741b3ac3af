package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/berthhq/berth/ledger"
)

// projectionTests are the contract tests of a projection's read model and
// applied markers.
var projectionTests = []struct {
	name string
	fn   func(t *testing.T, open Opener)
}{
	{"ProjectionGetPutDelete", testProjectionGetPutDelete},
	{"ProjectionNamespacesDoNotCollide", testProjectionNamespaces},
	{"ProjectionList", testProjectionList},
	{"ProjectionClear", testProjectionClear},
	{"ProjectionSweep", testProjectionSweep},
	{"ProjectionApplied", testProjectionApplied},
	{"ProjectionRollback", testProjectionRollback},
	{"ProjectionInvalidAndReadOnly", testProjectionInvalid},
}

func getValue(t *testing.T, tx ledger.Tx, sub, k string) (string, bool) {
	t.Helper()
	v, err := tx.ProjectionGet(sub, k)
	if errors.Is(err, ledger.ErrNotFound) {
		return "", false
	}
	if err != nil {
		t.Fatalf("ProjectionGet(%s, %s): %v", sub, k, err)
	}
	return string(v), true
}

func testProjectionGetPutDelete(t *testing.T, open Opener) {
	s := openNew(t, open)
	update(t, s, func(tx ledger.Tx) error {
		if _, ok := getValue(t, tx, "P.h", "k"); ok {
			t.Error("a new read model has a value")
		}
		if err := errors.Join(tx.ProjectionPut("P.h", "k", []byte("1")), tx.ProjectionPut("P.h", "empty", nil)); err != nil {
			return err
		}
		// A write is visible later in the same transaction.
		if v, ok := getValue(t, tx, "P.h", "k"); !ok || v != "1" {
			t.Errorf("in the writing transaction: %q, %v", v, ok)
		}
		return nil
	})
	tests := []struct {
		name  string
		write func(tx ledger.Tx) error
		want  map[string]string // "" value with "-" prefix: absent
	}{
		{"replace", func(tx ledger.Tx) error { return tx.ProjectionPut("P.h", "k", []byte(`{"n":2}`)) },
			map[string]string{"k": `{"n":2}`, "empty": ""}},
		{"delete", func(tx ledger.Tx) error { return tx.ProjectionDelete("P.h", "k") },
			map[string]string{"-k": "", "empty": ""}},
		{"delete missing", func(tx ledger.Tx) error { return tx.ProjectionDelete("P.h", "never") },
			map[string]string{"-never": "", "empty": ""}},
	}
	for _, tc := range tests {
		update(t, s, tc.write)
		view(t, s, func(tx ledger.Tx) error {
			for k, want := range tc.want {
				absent := strings.HasPrefix(k, "-")
				v, ok := getValue(t, tx, "P.h", strings.TrimPrefix(k, "-"))
				if absent && ok || !absent && (!ok || v != want) {
					t.Errorf("%s: %s = %q, %v", tc.name, k, v, ok)
				}
			}
			return nil
		})
	}
}

func testProjectionNamespaces(t *testing.T, open Opener) {
	s := openNew(t, open)
	// Subscriptions that prefix one another, and keys that look like other
	// namespaces, stay apart.
	writes := []struct{ sub, key, value string }{
		{"a", "bc", "1"}, {"ab", "c", "2"}, {"a", "\x02ab", "3"}, {"b", "bc", "4"},
	}
	update(t, s, func(tx ledger.Tx) error {
		for _, w := range writes {
			if err := tx.ProjectionPut(w.sub, w.key, []byte(w.value)); err != nil {
				return err
			}
		}
		return tx.SetMeta("a", "bc", []byte("meta"))
	})
	view(t, s, func(tx ledger.Tx) error {
		for _, w := range writes {
			if v, ok := getValue(t, tx, w.sub, w.key); !ok || v != w.value {
				t.Errorf("%s/%q = %q, %v; want %q", w.sub, w.key, v, ok, w.value)
			}
		}
		es, _, err := tx.ProjectionList("a", "", "", 0)
		if err != nil || len(es) != 2 {
			t.Errorf("list of a: %v, %v; want its two keys", es, err)
		}
		return nil
	})
}

func testProjectionList(t *testing.T, open Opener) {
	s := openNew(t, open)
	update(t, s, func(tx ledger.Tx) error {
		for _, k := range []string{"buyer/b1", "buyer/b2", "buyer/b3", "buyer/b4", "buyer/b5", "order/o1", "buyers"} {
			if err := tx.ProjectionPut("P.h", k, []byte("v-"+k)); err != nil {
				return err
			}
		}
		return tx.ProjectionPut("Other.h", "buyer/x", []byte("x"))
	})
	tests := []struct {
		prefix, after string
		limit         int
		want          []string
		next          string
	}{
		{"", "", 0, []string{"buyer/b1", "buyer/b2", "buyer/b3", "buyer/b4", "buyer/b5", "buyers", "order/o1"}, ""},
		{"buyer/", "", 2, []string{"buyer/b1", "buyer/b2"}, "buyer/b2"},
		{"buyer/", "buyer/b2", 2, []string{"buyer/b3", "buyer/b4"}, "buyer/b4"},
		{"buyer/", "buyer/b4", 2, []string{"buyer/b5"}, ""},
		{"buyer/", "buyer/b5", 2, nil, ""},
		{"buyer/", "a", 1, []string{"buyer/b1"}, "buyer/b1"},                         // after below the prefix
		{"buyer/", "buyer/b2x", 0, []string{"buyer/b3", "buyer/b4", "buyer/b5"}, ""}, // after need not exist
		{"order/", "", 1, []string{"order/o1"}, ""},
		{"none/", "", 0, nil, ""},
	}
	for _, tc := range tests {
		view(t, s, func(tx ledger.Tx) error {
			es, next, err := tx.ProjectionList("P.h", tc.prefix, tc.after, tc.limit)
			if err != nil {
				t.Fatalf("list %+v: %v", tc, err)
			}
			var keys []string
			for _, e := range es {
				keys = append(keys, e.Key)
				if string(e.Value) != "v-"+e.Key {
					t.Errorf("value of %s = %q", e.Key, e.Value)
				}
			}
			if !equalStrings(keys, tc.want) || next != tc.next {
				t.Errorf("list(%q, %q, %d) = %v, next %q; want %v, next %q", tc.prefix, tc.after, tc.limit, keys, next, tc.want, tc.next)
			}
			return nil
		})
	}
}

func testProjectionClear(t *testing.T, open Opener) {
	s := openNew(t, open)
	update(t, s, func(tx ledger.Tx) error {
		return errors.Join(
			tx.ProjectionPut("P.h", "k", []byte("old")),
			tx.SetApplied("P.h", "Order", "o-1", 3, 1),
			tx.ProjectionPut("Q.h", "k", []byte("kept")),
			tx.SetApplied("Q.h", "Order", "o-1", 5, 0),
			tx.SetCheckpoint("P.h", 9),
		)
	})
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.ClearProjection("P.h"); err != nil {
			return err
		}
		// Cleared at once, within the clearing transaction too.
		if _, ok := getValue(t, tx, "P.h", "k"); ok {
			t.Error("a cleared key is still read in the clearing transaction")
		}
		return tx.ProjectionPut("P.h", "new", []byte("1"))
	})
	view(t, s, func(tx ledger.Tx) error {
		if _, ok := getValue(t, tx, "P.h", "k"); ok {
			t.Error("a cleared key is still read")
		}
		if v, ok := getValue(t, tx, "P.h", "new"); !ok || v != "1" {
			t.Errorf("a key written after the clear: %q, %v", v, ok)
		}
		if es, _, _ := tx.ProjectionList("P.h", "", "", 0); len(es) != 1 {
			t.Errorf("list after clear: %v", es)
		}
		if _, _, ok, _ := tx.Applied("P.h", "Order", "o-1"); ok {
			t.Error("the applied marker survived the clear")
		}
		if v, ok := getValue(t, tx, "Q.h", "k"); !ok || v != "kept" {
			t.Errorf("another read model changed: %q, %v", v, ok)
		}
		if v, i, ok, _ := tx.Applied("Q.h", "Order", "o-1"); !ok || v != 5 || i != 0 {
			t.Errorf("another read model's marker changed: %d:%d %v", v, i, ok)
		}
		if p, _, _ := tx.Checkpoint("P.h"); p != 9 {
			t.Errorf("the checkpoint changed: %d", p)
		}
		return nil
	})
}

func testProjectionSweep(t *testing.T, open Opener) {
	s := openNew(t, open)
	const n = 25
	update(t, s, func(tx ledger.Tx) error {
		for i := range n {
			if err := errors.Join(
				tx.ProjectionPut("P.h", fmt.Sprintf("k%02d", i), []byte("v")),
				tx.SetApplied("P.h", "Order", fmt.Sprint(i), 1, 0),
			); err != nil {
				return err
			}
		}
		return tx.ProjectionPut("Q.h", "k", []byte("kept"))
	})
	update(t, s, func(tx ledger.Tx) error { return tx.ClearProjection("P.h") })
	update(t, s, func(tx ledger.Tx) error { return tx.ProjectionPut("P.h", "fresh", []byte("1")) })
	update(t, s, func(tx ledger.Tx) error { return tx.ClearProjection("P.h") }) // twice: two retired generations
	update(t, s, func(tx ledger.Tx) error { return tx.ProjectionPut("P.h", "live", []byte("1")) })
	sweeps := 0
	for more := true; more; sweeps++ {
		if sweeps > 2*n {
			t.Fatal("SweepProjections never finishes")
		}
		update(t, s, func(tx ledger.Tx) error {
			var err error
			more, err = tx.SweepProjections(7)
			return err
		})
	}
	if sweeps < 2*n/7 {
		t.Errorf("%d sweeps of 7 removed %d keys", sweeps, 2*n+1)
	}
	update(t, s, func(tx ledger.Tx) error {
		if more, err := tx.SweepProjections(0); more || err != nil {
			t.Errorf("a sweep after the last: %v, %v", more, err)
		}
		if v, ok := getValue(t, tx, "P.h", "live"); !ok || v != "1" {
			t.Errorf("the live generation was swept: %q, %v", v, ok)
		}
		if v, ok := getValue(t, tx, "Q.h", "k"); !ok || v != "kept" {
			t.Errorf("another read model was swept: %q, %v", v, ok)
		}
		return nil
	})
}

func testProjectionApplied(t *testing.T, open Opener) {
	s := openNew(t, open)
	marks := []struct {
		sub, typ, id string
		version      uint64
		index        uint32
	}{
		{"P.h", "Order", "o-1", 1, 0}, {"P.h", "Order", "o-1", 4, 2}, {"P.h", "Order", "o-2", 1 << 40, 1<<32 - 1},
		{"P.h", "Cart", "o-1", 7, 0}, {"Q.h", "Order", "o-1", 2, 0},
	}
	for _, m := range marks {
		update(t, s, func(tx ledger.Tx) error { return tx.SetApplied(m.sub, m.typ, m.id, m.version, m.index) })
	}
	view(t, s, func(tx ledger.Tx) error {
		want := []struct {
			sub, typ, id string
			version      uint64
			index        uint32
			ok           bool
		}{
			{"P.h", "Order", "o-1", 4, 2, true}, {"P.h", "Order", "o-2", 1 << 40, 1<<32 - 1, true},
			{"P.h", "Cart", "o-1", 7, 0, true}, {"Q.h", "Order", "o-1", 2, 0, true}, {"P.h", "Order", "o-3", 0, 0, false},
		}
		for _, w := range want {
			v, i, ok, err := tx.Applied(w.sub, w.typ, w.id)
			if err != nil || ok != w.ok || v != w.version || i != w.index {
				t.Errorf("Applied(%s, %s, %s) = %d, %d, %v, %v; want %d, %d, %v", w.sub, w.typ, w.id, v, i, ok, err, w.version, w.index, w.ok)
			}
		}
		return nil
	})
}

func testProjectionRollback(t *testing.T, open Opener) {
	s := openNew(t, open)
	update(t, s, func(tx ledger.Tx) error { return tx.ProjectionPut("P.h", "k", []byte("1")) })
	boom := errors.New("boom")
	err := s.Update(context.Background(), func(tx ledger.Tx) error {
		if err := errors.Join(
			tx.ProjectionPut("P.h", "k", []byte("2")),
			tx.ProjectionPut("P.h", "j", []byte("2")),
			tx.SetApplied("P.h", "Order", "o-1", 2, 0),
			tx.ClearProjection("P.h"),
		); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update: %v", err)
	}
	view(t, s, func(tx ledger.Tx) error {
		if v, ok := getValue(t, tx, "P.h", "k"); !ok || v != "1" {
			t.Errorf("k after rollback: %q, %v", v, ok)
		}
		if _, ok := getValue(t, tx, "P.h", "j"); ok {
			t.Error("j after rollback")
		}
		if _, _, ok, _ := tx.Applied("P.h", "Order", "o-1"); ok {
			t.Error("marker after rollback")
		}
		return nil
	})
}

func testProjectionInvalid(t *testing.T, open Opener) {
	s := openNew(t, open)
	invalid := map[string]func(tx ledger.Tx) error{
		"ProjectionPut no sub":    func(tx ledger.Tx) error { return tx.ProjectionPut("", "k", nil) },
		"ProjectionPut no key":    func(tx ledger.Tx) error { return tx.ProjectionPut("P.h", "", nil) },
		"ProjectionDelete no key": func(tx ledger.Tx) error { return tx.ProjectionDelete("P.h", "") },
		"ClearProjection no sub":  func(tx ledger.Tx) error { return tx.ClearProjection("") },
		"SetApplied no id":        func(tx ledger.Tx) error { return tx.SetApplied("P.h", "Order", "", 1, 0) },
	}
	for name, w := range invalid {
		if err := s.Update(context.Background(), w); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	writes := map[string]func(tx ledger.Tx) error{
		"ProjectionPut":    func(tx ledger.Tx) error { return tx.ProjectionPut("P.h", "k", nil) },
		"ProjectionDelete": func(tx ledger.Tx) error { return tx.ProjectionDelete("P.h", "k") },
		"ClearProjection":  func(tx ledger.Tx) error { return tx.ClearProjection("P.h") },
		"SweepProjections": func(tx ledger.Tx) error { _, err := tx.SweepProjections(0); return err },
		"SetApplied":       func(tx ledger.Tx) error { return tx.SetApplied("P.h", "Order", "o-1", 1, 0) },
	}
	for name, w := range writes {
		if err := s.View(context.Background(), w); !errors.Is(err, ledger.ErrReadOnly) {
			t.Errorf("%s in a View: %v, want ErrReadOnly", name, err)
		}
	}
}
