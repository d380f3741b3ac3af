package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// TestBuildIndexAddsGroups: a store indexed before failure groups (its
// summaries end at the classes, no group entries, counters or heads,
// marked 1) gets its groups at Open: exact counts, and no group-opened or
// group-grew for groups that are not news.
func TestBuildIndexAddsGroups(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const n = buildBatch + 150
	err = s.Update(ctx, func(tx Tx) error {
		for j := range n {
			r := &Record{Subscription: "sub", AggregateType: "order", AggregateID: fmt.Sprintf("o-%04d", j),
				State: StateWaiting, Error: ErrorInfo{Classes: []string{"UnknownBuyer"}, Message: fmt.Sprintf("unknown buyer b-%d", j)}}
			if j%4 == 0 {
				r.Error = ErrorInfo{Classes: []string{"berth.Timeout"}, Message: "deadline"}
			}
			if err := tx.PutParked(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Make it a store of the index before groups.
	err = rewriteStore(s, 1, func(k, v []byte) ([]byte, bool, error) {
		switch k[0] {
		case kindNotice:
			return nil, true, nil
		case kindTally:
			_, rest, _ := cutLP(k[1:])
			return nil, rest[0] != dimClass && rest[0] != dimType, nil
		case kindIndex:
			if _, dim, _, _, _, _ := indexKeyParts(k); dim == dimGroup {
				return nil, true, nil
			}
			sm, err := decodeSummary(v, true)
			if err != nil {
				return nil, false, err
			}
			sm.group = ""
			return sm.encode(), false, nil
		}
		return nil, false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(dir, Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	err = s.View(ctx, func(tx Tx) error {
		gs, _, err := tx.GroupsParked(GroupFilter{Subscription: "sub"})
		if err != nil {
			return err
		}
		if len(gs) != 2 || gs[0].Count != n-(n+3)/4 || gs[1].Count != (n+3)/4 || gs[0].Message != "unknown buyer {}" {
			t.Errorf("groups after Open: %+v", gs)
		}
		if c, err := tx.CountMatching(Filter{Group: gs[1].Fingerprint}); err != nil || c != (n+3)/4 {
			t.Errorf("CountMatching(group) = %d, %v", c, err)
		}
		if ns, err := tx.Notifications(0, 0); err != nil || len(ns) != 0 {
			t.Errorf("notifications after building the groups: %v, %v", ns, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestGroupOfAnEarlierHostGetsStats: a group whose head was written before
// the group stats (its span in the head, no stats key) reads its span
// from the head, and its next changes count it exactly from its
// counters: a record joining, one leaving, group-grew at 100 once.
func TestGroupOfAnEarlierHostGetsStats(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	t0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	rec := func(j int) *Record {
		return &Record{Subscription: "sub", AggregateType: "order", AggregateID: fmt.Sprintf("o-%03d", j), State: StateWaiting,
			Error:        ErrorInfo{Classes: []string{"UnknownBuyer"}, Message: fmt.Sprintf("unknown buyer b-%d", j)},
			FirstFailure: t0.Add(time.Duration(j) * time.Minute), LastFailure: t0.Add(time.Duration(j)*time.Minute + time.Second)}
	}
	update := func(fn func(tx *kvTx) error) {
		t.Helper()
		if err := s.Update(ctx, func(tx Tx) error { return fn(tx.(*kvTx)) }); err != nil {
			t.Fatal(err)
		}
	}
	update(func(tx *kvTx) error {
		for j := range 98 {
			if err := tx.PutParked(rec(j)); err != nil {
				return err
			}
		}
		return nil
	})
	group := Fingerprint(rec(0))
	// As an earlier host kept it: the span in the head, no stats.
	update(func(tx *kvTx) error {
		h, err := tx.groupHead("sub", group)
		if err != nil {
			return err
		}
		h.First, h.Last = rec(0).FirstFailure, rec(97).LastFailure
		v, _ := json.Marshal(h)
		if err := tx.set("test", groupHeadKey("sub", group), v); err != nil {
			return err
		}
		return tx.delete("test", groupStatsKey("sub", group))
	})
	groupIs := func(when string, n int, last time.Time) {
		t.Helper()
		err := s.View(ctx, func(tx Tx) error {
			gs, _, err := tx.GroupsParked(GroupFilter{Subscription: "sub"})
			if err != nil {
				return err
			}
			if len(gs) != 1 || gs[0].Count != n || !gs[0].FirstFailure.Equal(t0) || !gs[0].LastFailure.Equal(last) {
				t.Errorf("%s: groups %+v, want %d spanning %v – %v", when, gs, n, t0, last)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	groupIs("as an earlier host left it", 98, rec(97).LastFailure)
	update(func(tx *kvTx) error { return tx.DeleteParked("sub", "order", "o-050") })
	update(func(tx *kvTx) error { return tx.PutParked(rec(98)) })
	update(func(tx *kvTx) error { return tx.PutParked(rec(99)) })
	groupIs("after a leave and two joins", 99, rec(99).LastFailure)
	update(func(tx *kvTx) error { return tx.PutParked(rec(100)) })
	groupIs("at 100", 100, rec(100).LastFailure)
	err = s.View(ctx, func(tx Tx) error {
		ns, err := tx.Notifications(0, 0)
		var grew []int
		for _, n := range ns {
			if n.Type == NotifyGroupGrew {
				grew = append(grew, n.Count)
			}
		}
		if err != nil || len(grew) != 1 || grew[0] != 100 {
			t.Errorf("group-grew %v (%v), want once at 100", grew, err)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
