package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// cause is one reason records park for in the group tests.
type cause struct {
	classes []string
	module  string
	msg     func(i int) string
}

var groupCauses = []cause{
	{[]string{"UnknownBuyer", "Downstream"}, "shipment-notifier v3",
		func(i int) string { return fmt.Sprintf("the notification service does not know buyer b-%d", i) }},
	{[]string{"berth.Timeout"}, "shipment-notifier v3",
		func(i int) string { return fmt.Sprintf("the call ran past its %dms deadline", 300+i%3) }},
	{[]string{"berth.Panic"}, "shipment-notifier v4",
		func(i int) string { return fmt.Sprintf("assignment to entry in nil map at 0x%x", 0x1000+i) }},
}

// groupRec is record i of cause c in sub.
func groupRec(sub string, c, i int) *ledger.Record {
	states := []ledger.State{ledger.StateRetrying, ledger.StateWaiting, ledger.StateResuming}
	r := rec(sub, []string{"order", "cart"}[i%2], fmt.Sprintf("%d-%04d", c, i), states[i%3], 0)
	r.Error = ledger.ErrorInfo{Classes: groupCauses[c].classes, Message: groupCauses[c].msg(i),
		Module: groupCauses[c].module, Kind: "recoverable"}
	r.FirstFailure = base().Add(-time.Duration(200-i) * time.Minute)
	r.LastFailure = r.FirstFailure.Add(time.Minute)
	if c == 1 && i%5 == 0 {
		r.Error.Module = "shipment-notifier v5"
	}
	return r
}

// testGroups: records of three causes with varied ids read as exactly
// three groups of their subscription, counted exactly by state, type,
// class and message, biggest first and paged; a group's records list and
// count by its fingerprint; group-opened comes once per group and
// group-grew once at 100, however often the records change; a record
// that changes cause moves between groups; an emptied group goes and
// opens anew; all of it after a reopen.
func testGroups(t *testing.T, open Opener) {
	dir := t.TempDir()
	s := openAt(t, open, dir)
	sizes := []int{120, 30, 5}
	all := map[string]*ledger.Record{}
	var batch []*ledger.Record
	flush := func() {
		put(t, s, batch...)
		batch = nil
	}
	for c, n := range sizes {
		for i := range n {
			r := groupRec("notify", c, i)
			all[r.AggregateType+"/"+r.AggregateID] = r
			if batch = append(batch, r); len(batch) == 40 {
				flush()
			}
		}
	}
	batch = append(batch, groupRec("other", 0, 1))
	flush()
	fps := make([]string, 3)
	for c := range fps {
		fps[c] = ledger.Fingerprint(groupRec("notify", c, 0))
	}

	check := func(when string) {
		t.Helper()
		view(t, s, func(tx ledger.Tx) error {
			checkGroups(t, tx, when, all, fps)
			return nil
		})
	}
	check("after the parks")
	checkSpans(t, s, "after the parks", all, fps)
	if got := groupNotes(t, s); !slices.Equal(got, []string{
		"group-opened notify " + fps[0] + " 1", "group-grew notify " + fps[0] + " 100",
		"group-opened notify " + fps[1] + " 1", "group-opened notify " + fps[2] + " 1",
		"group-opened other " + ledger.Fingerprint(groupRec("other", 0, 1)) + " 1"}) {
		t.Errorf("group notifications after the parks:\n%s", strings.Join(got, "\n"))
	}
	notes := len(groupNotes(t, s))

	// Every record of the first group changes state; one changes cause.
	update(t, s, func(tx ledger.Tx) error {
		for _, r := range all {
			if ledger.Fingerprint(r) != fps[0] {
				continue
			}
			r.State, r.NextRetry = ledger.StateWaiting, time.Time{}
			if r.AggregateID == "0-0007" {
				r.Error = groupRec("notify", 1, 7).Error
			}
			if err := tx.PutParked(r); err != nil {
				return err
			}
		}
		return nil
	})
	check("after the changes")
	checkSpans(t, s, "after the changes", all, fps)
	// A record of the first group fails again, later, in the group: its
	// last failure is the group's, exactly, though it joins no group.
	again0 := all["cart/0-0011"]
	again0.LastFailure = base().Add(time.Hour)
	put(t, s, again0)
	checkSpans(t, s, "after a later failure", all, fps)
	// The third group empties, and opens anew.
	update(t, s, func(tx ledger.Tx) error {
		for k, r := range all {
			if ledger.Fingerprint(r) == fps[2] {
				if err := tx.DeleteParked(r.Subscription, r.AggregateType, r.AggregateID); err != nil {
					return err
				}
				delete(all, k)
			}
		}
		return nil
	})
	check("after the third group emptied")
	if got := groupNotes(t, s); len(got) != notes {
		t.Errorf("changes and deletes notified: %v", got[notes:])
	}
	again := groupRec("notify", 2, 99)
	all[again.AggregateType+"/"+again.AggregateID] = again
	put(t, s, again)
	if got := groupNotes(t, s); len(got) != notes+1 || got[notes] != "group-opened notify "+fps[2]+" 1" {
		t.Errorf("an emptied group parked again: %v, want it opened anew", got[notes:])
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, open, dir)
	check("after a reopen")

	// A proof on the first group: its handled aggregates, and one of
	// another group that a proof on the first cannot select.
	var handled []ledger.ProofKey
	want := map[string]bool{}
	for _, r := range all {
		if ledger.Fingerprint(r) == fps[0] && r.AggregateType == "order" {
			handled = append(handled, ledger.ProofKey{AggregateType: r.AggregateType, AggregateID: r.AggregateID})
			want[r.AggregateType+"/"+r.AggregateID] = true
		}
	}
	handled = append(handled, ledger.ProofKey{AggregateType: "cart", AggregateID: "1-0001"}, ledger.ProofKey{AggregateType: "order", AggregateID: "gone"})
	p := ledger.Proof{Subscription: "notify", Group: fps[0], Module: "shipment-notifier", SHA256: "ab12", Handled: len(want)}
	update(t, s, func(tx ledger.Tx) error { return tx.PutProof(p, handled[:10]) })
	update(t, s, func(tx ledger.Tx) error { return tx.PutProof(p, handled[10:]) })
	view(t, s, func(tx ledger.Tx) error {
		got, err := tx.Proof("notify", fps[0], "ab12")
		if err != nil || got.Handled != len(want) || got.Module != "shipment-notifier" {
			t.Errorf("Proof = %+v, %v", got, err)
		}
		f := ledger.Filter{Subscription: "notify", Group: fps[0], ProvenBy: "ab12", Limit: 9}
		listed := map[string]bool{}
		for {
			page, next, err := tx.ListParked(f)
			if err != nil {
				t.Fatalf("ListParked(proven): %v", err)
			}
			for _, r := range page {
				listed[r.AggregateType+"/"+r.AggregateID] = true
			}
			if next == "" {
				break
			}
			f.After = next
		}
		c, err := tx.CountMatching(ledger.Filter{Group: fps[0], ProvenBy: "ab12"})
		if fmt.Sprint(listed) != fmt.Sprint(want) || c != len(want) || err != nil {
			t.Errorf("proven by ab12: listed %d, counted %d (%v), want %d", len(listed), c, err, len(want))
		}
		if c, err := tx.CountMatching(ledger.Filter{Group: fps[0], ProvenBy: "other"}); c != 0 || err != nil {
			t.Errorf("proven by another candidate: %d, %v", c, err)
		}
		if _, err := tx.Proof("notify", fps[0], "other"); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("Proof(other) = %v, want ErrNotFound", err)
		}
		return nil
	})
	update(t, s, func(tx ledger.Tx) error {
		if err := tx.PutProof(ledger.Proof{Subscription: "notify"}, nil); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("a proof without group: %v, want ErrInvalid", err)
		}
		return nil
	})
}

// checkGroups compares the groups of "notify" with those all computes.
func checkGroups(t *testing.T, tx ledger.Tx, when string, all map[string]*ledger.Record, fps []string) {
	t.Helper()
	filters := []ledger.GroupFilter{{Subscription: "notify"}, {Subscription: "notify", State: ledger.StateWaiting},
		{Subscription: "notify", AggregateType: "cart"}, {Subscription: "notify", Class: "Downstream"},
		{Subscription: "notify", Message: "DEADLINE"}, {Subscription: "notify", State: ledger.StateResuming, AggregateType: "order"}}
	for _, f := range filters {
		want := map[string]int{}
		for _, r := range all {
			if (f.State == "" || r.State == f.State) && (f.AggregateType == "" || r.AggregateType == f.AggregateType) &&
				(f.Class == "" || slices.Contains(r.Error.Classes, f.Class)) &&
				strings.Contains(strings.ToLower(ledger.MaskMessage(r.Error.Message)), strings.ToLower(f.Message)) {
				want[ledger.Fingerprint(r)]++
			}
		}
		var got []ledger.Group
		g := f
		g.Limit = 1
		for pages := 0; ; pages++ {
			page, next, err := tx.GroupsParked(g)
			if err != nil {
				t.Fatalf("%s: GroupsParked(%+v): %v", when, g, err)
			}
			got = append(got, page...)
			if next == "" || pages > 10 {
				break
			}
			g.After = next
		}
		counts := map[string]int{}
		for i, gr := range got {
			counts[gr.Fingerprint] = gr.Count
			if i > 0 && got[i-1].Count < gr.Count {
				t.Errorf("%s: %+v: group %d (%d records) after a smaller one", when, f, i, gr.Count)
			}
			r := all[gr.SampleType+"/"+gr.SampleID]
			if r == nil || ledger.Fingerprint(r) != gr.Fingerprint {
				t.Errorf("%s: group %s: sample %s/%s is not one of its records", when, gr.Fingerprint, gr.SampleType, gr.SampleID)
			} else if gr.Message != ledger.MaskMessage(r.Error.Message) || !slices.Equal(gr.Classes, r.Error.Classes) ||
				gr.Module != ledger.ModuleName(r.Error.Module) {
				t.Errorf("%s: group %s says %q %v %q; its sample %q %v %q", when, gr.Fingerprint, gr.Message, gr.Classes,
					gr.Module, r.Error.Message, r.Error.Classes, r.Error.Module)
			}
			if f == filters[0] {
				mods := map[string]int{}
				for _, r := range all {
					if ledger.Fingerprint(r) == gr.Fingerprint {
						mods[r.Error.Module]++
					}
				}
				if fmt.Sprint(mods) != fmt.Sprint(gr.Modules) {
					t.Errorf("%s: group %s modules %v, want %v", when, gr.Fingerprint, gr.Modules, mods)
				}
			}
		}
		if fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Errorf("%s: GroupsParked(%+v) counts %v, want %v", when, f, counts, want)
		}
	}
	for _, fp := range fps {
		for _, st := range []ledger.State{"", ledger.StateWaiting} {
			want := 0
			for _, r := range all {
				if ledger.Fingerprint(r) == fp && (st == "" || r.State == st) {
					want++
				}
			}
			f := ledger.Filter{Group: fp, State: st, Limit: 7}
			listed := 0
			for {
				page, next, err := tx.ListParked(f)
				if err != nil {
					t.Fatalf("%s: ListParked(%+v): %v", when, f, err)
				}
				for _, r := range page {
					if ledger.Fingerprint(r) != fp {
						t.Errorf("%s: ListParked(group %s) listed %s of group %s", when, fp, r.AggregateID, ledger.Fingerprint(r))
					}
				}
				listed += len(page)
				if next == "" {
					break
				}
				f.After = next
			}
			c, err := tx.CountMatching(ledger.Filter{Group: fp, State: st})
			if err != nil || c != want || listed != want {
				t.Errorf("%s: group %s state %q: CountMatching %d (%v), listed %d, want %d", when, fp, st, c, err, listed, want)
			}
		}
	}
}

// checkSpans checks that each group of "notify" spans exactly the
// failures of all's records in it (the one that left the first group
// is none of its extremes).
func checkSpans(t *testing.T, s ledger.Store, when string, all map[string]*ledger.Record, fps []string) {
	t.Helper()
	view(t, s, func(tx ledger.Tx) error {
		gs, _, err := tx.GroupsParked(ledger.GroupFilter{Subscription: "notify"})
		if err != nil {
			return err
		}
		for _, g := range gs {
			var first, last time.Time
			for _, r := range all {
				if ledger.Fingerprint(r) != g.Fingerprint || r.Subscription != "notify" {
					continue
				}
				if first.IsZero() || r.FirstFailure.Before(first) {
					first = r.FirstFailure
				}
				if r.LastFailure.After(last) {
					last = r.LastFailure
				}
			}
			if !g.FirstFailure.Equal(first) || !g.LastFailure.Equal(last) {
				t.Errorf("%s: group %s spans %v – %v, want %v – %v", when, g.Fingerprint, g.FirstFailure, g.LastFailure, first, last)
			}
		}
		return nil
	})
}

// groupNotes lists the queued group notifications as "type sub group count".
func groupNotes(t *testing.T, s ledger.Store) []string {
	t.Helper()
	var out []string
	view(t, s, func(tx ledger.Tx) error {
		ns, err := tx.Notifications(0, 10_000)
		if err != nil {
			return err
		}
		for _, n := range ns {
			if strings.HasPrefix(n.Type, "group-") {
				if n.AggregateType != "" || n.Error == nil || n.Error.Message == "" {
					t.Errorf("%s: names an aggregate or no message: %+v", n.Type, n)
				}
				out = append(out, fmt.Sprintf("%s %s %s %d", n.Type, n.Subscription, n.Group, n.Count))
			}
		}
		return nil
	})
	return out
}
