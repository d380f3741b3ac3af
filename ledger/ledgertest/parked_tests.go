package ledgertest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

func testParked(t *testing.T, open Opener) {
	s := openNew(t, open)
	r := rec("sub-a", "order", "o-1", ledger.StateRetrying, time.Minute)
	view(t, s, func(tx ledger.Tx) error {
		if _, err := tx.Parked("sub-a", "order", "o-1"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("Parked of an unknown record: %v, want ErrNotFound", err)
		}
		return nil
	})
	put(t, s, r)
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.Parked("sub-a", "order", "o-1")
		if err != nil {
			t.Fatalf("Parked: %v", err)
		}
		if d := sameRecord(got, r); d != "" {
			t.Fatalf("Parked returned another record: %s", d)
		}
		for _, k := range [][3]string{{"sub-b", "order", "o-1"}, {"sub-a", "invoice", "o-1"}, {"sub-a", "order", "o-2"}} {
			if _, err := tx.Parked(k[0], k[1], k[2]); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("Parked%v: %v, want ErrNotFound", k, err)
			}
		}
		return nil
	})
	// Replace.
	r2 := *r
	r2.State, r2.NextRetry, r2.ParkedRetries = ledger.StateWaiting, time.Time{}, 10
	put(t, s, &r2)
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.Parked("sub-a", "order", "o-1")
		if err != nil || sameRecord(got, &r2) != "" {
			t.Fatalf("Parked after replace: %v %s", err, sameRecord(got, &r2))
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error { return tx.DeleteParked("sub-a", "order", "o-1") })
	view(t, s, func(tx ledger.Tx) error {
		if _, err := tx.Parked("sub-a", "order", "o-1"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("Parked after delete: %v, want ErrNotFound", err)
		}
		return nil
	})
	err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.DeleteParked("sub-a", "order", "o-1") })
	if !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("DeleteParked of an unknown record: %v, want ErrNotFound", err)
	}
}

// testParkedNames: names that would collide if joined naively are kept
// apart.
func testParkedNames(t *testing.T, open Opener) {
	s := openNew(t, open)
	keys := [][3]string{
		{"a", "b", "c"}, {"ab", "", "c"}, {"a", "bc", "x"}, {"a\x00b", "c", "d"}, {"a", "b\x00c", "d"},
		{"a/b", "c", "d"}, {"a", "b/c", "d"}, {"\xff", "\xff\xff", "\xff"}, {"\xff\xff", "\xff", "\xff"},
	}
	var rs []*ledger.Record
	for i, k := range keys {
		r := rec(k[0], k[1], k[2], ledger.StateRetrying, time.Duration(i)*time.Second)
		if k[1] == "" {
			r.AggregateType = "t"
		}
		r.Version = uint64(i + 1)
		rs = append(rs, r)
	}
	put(t, s, rs...)
	view(t, s, func(tx ledger.Tx) error {
		for _, r := range rs {
			got, err := tx.Parked(r.Subscription, r.AggregateType, r.AggregateID)
			if err != nil || got.Version != r.Version {
				t.Errorf("Parked(%q, %q, %q) = %v, %v; want version %d", r.Subscription, r.AggregateType, r.AggregateID, got, err, r.Version)
			}
			page, _, err := tx.ListParked(ledger.Filter{Subscription: r.Subscription, AggregateType: r.AggregateType})
			if err != nil || len(page) != 1 || page[0].Version != r.Version {
				t.Errorf("ListParked(%q, %q) = %v, %v; want just version %d", r.Subscription, r.AggregateType, ids(page), err, r.Version)
			}
		}
		return nil
	})
}

func testPutParkedInvalid(t *testing.T, open Opener) {
	s := openNew(t, open)
	tests := map[string]*ledger.Record{
		"nil":               nil,
		"no subscription":   rec("", "order", "o-1", ledger.StateWaiting, 0),
		"no aggregate type": rec("sub-a", "", "o-1", ledger.StateWaiting, 0),
		"no aggregate id":   rec("sub-a", "order", "", ledger.StateWaiting, 0),
		"no state":          rec("sub-a", "order", "o-1", "", 0),
		"unknown state":     rec("sub-a", "order", "o-1", "sleeping", 0),
	}
	for name, r := range tests {
		err := s.Update(t.Context(), func(tx ledger.Tx) error { return tx.PutParked(r) })
		if !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	view(t, s, func(tx ledger.Tx) error {
		if page, _, err := tx.ListParked(ledger.Filter{}); err != nil || len(page) != 0 {
			t.Errorf("records after invalid puts: %v, %v", ids(page), err)
		}
		for _, f := range []ledger.Filter{{After: "%%%"}, {After: "aGVsbG8"}, {State: "sleeping"}} {
			if _, _, err := tx.ListParked(f); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("ListParked(%+v): %v, want ErrInvalid", f, err)
			}
		}
		return nil
	})
}

// listFixture parks, for two subscriptions, orders and invoices in every
// state, and returns them.
func listFixture(t *testing.T, s ledger.Store) []*ledger.Record {
	var rs []*ledger.Record
	states := []ledger.State{ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming}
	for _, sub := range []string{"sub-a", "sub-b"} {
		for _, typ := range []string{"order", "invoice"} {
			for i := range 6 {
				rs = append(rs, rec(sub, typ, fmt.Sprintf("%s-%d", typ, i), states[i%3], time.Duration(i)*time.Minute))
			}
		}
	}
	put(t, s, rs...)
	return rs
}

func testListFilters(t *testing.T, open Opener) {
	s := openNew(t, open)
	all := listFixture(t, s)
	tests := []ledger.Filter{
		{},
		{Subscription: "sub-a"},
		{Subscription: "sub-c"},
		{State: ledger.StateWaiting},
		{AggregateType: "invoice"},
		{Subscription: "sub-b", State: ledger.StateRetrying},
		{Subscription: "sub-b", State: ledger.StateResuming, AggregateType: "order"},
		{AggregateType: "shipment"},
	}
	for _, f := range tests {
		want := map[string]bool{}
		for _, r := range all {
			if (f.Subscription == "" || r.Subscription == f.Subscription) && (f.State == "" || r.State == f.State) &&
				(f.AggregateType == "" || r.AggregateType == f.AggregateType) {
				want[ids([]*ledger.Record{r})[0]] = true
			}
		}
		view(t, s, func(tx ledger.Tx) error {
			page, next, err := tx.ListParked(f)
			if err != nil {
				t.Fatalf("ListParked(%+v): %v", f, err)
			}
			if next != "" {
				t.Errorf("ListParked(%+v): cursor %q for a page below the limit", f, next)
			}
			got := ids(page)
			seen := map[string]bool{}
			for _, id := range got {
				if !want[id] || seen[id] {
					t.Errorf("ListParked(%+v) returned %s, unwanted or twice", f, id)
				}
				seen[id] = true
			}
			if len(seen) != len(want) {
				t.Errorf("ListParked(%+v) returned %d records, want %d", f, len(seen), len(want))
			}
			return nil
		})
	}
}

func testListPaging(t *testing.T, open Opener) {
	s := openNew(t, open)
	listFixture(t, s) // 24 records; 8 waiting; 12 of sub-a
	for _, f := range []ledger.Filter{{}, {State: ledger.StateWaiting}, {Subscription: "sub-a"}, {AggregateType: "order", State: ledger.StateRetrying}} {
		var whole []string
		view(t, s, func(tx ledger.Tx) error {
			all := f
			all.Limit = 1000
			page, next, err := tx.ListParked(all)
			if err != nil || next != "" {
				t.Fatalf("ListParked(%+v) in one page: cursor %q, %v", all, next, err)
			}
			whole = ids(page)
			return nil
		})
		for _, limit := range []int{1, 2, 3, 5, len(whole), len(whole) + 1} {
			var paged []string
			f := f
			f.Limit = limit
			for pages := 0; ; pages++ {
				if pages > len(whole)+1 {
					t.Fatalf("ListParked(%+v) does not end", f)
				}
				var page []*ledger.Record
				var next string
				view(t, s, func(tx ledger.Tx) (err error) {
					page, next, err = tx.ListParked(f)
					return err
				})
				if len(page) > limit {
					t.Fatalf("ListParked(%+v) returned %d records", f, len(page))
				}
				if next != "" && len(page) != limit {
					t.Fatalf("ListParked(%+v): a short page (%d) with a cursor", f, len(page))
				}
				paged = append(paged, ids(page)...)
				if next == "" {
					break
				}
				f.After = next
			}
			if !equalStrings(paged, whole) {
				t.Errorf("pages of %d for %+v:\n got %v\nwant %v", limit, f, paged, whole)
			}
		}
	}
	// A page of exactly the remaining records ends with "".
	view(t, s, func(tx ledger.Tx) error {
		page, next, err := tx.ListParked(ledger.Filter{State: ledger.StateWaiting, Limit: 8})
		if err != nil || len(page) != 8 || next != "" {
			t.Fatalf("ListParked of exactly 8: %d records, cursor %q, %v", len(page), next, err)
		}
		return nil
	})
	// The default limit is 100.
	var many []*ledger.Record
	for i := range 110 {
		many = append(many, rec("sub-many", "order", fmt.Sprintf("o-%03d", i), ledger.StateWaiting, 0))
	}
	put(t, s, many...)
	view(t, s, func(tx ledger.Tx) error {
		page, next, err := tx.ListParked(ledger.Filter{Subscription: "sub-many"})
		if err != nil || len(page) != 100 || next == "" {
			t.Fatalf("ListParked with the default limit: %d records, cursor %q, %v", len(page), next, err)
		}
		page, next, err = tx.ListParked(ledger.Filter{Subscription: "sub-many", After: next})
		if err != nil || len(page) != 10 || next != "" {
			t.Fatalf("second default page: %d records, cursor %q, %v", len(page), next, err)
		}
		return nil
	})
}
