package jetstream_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/jetstream"
)

// TestHostsConflictsWithoutRecentWrites runs the cases of two hosts whose
// outcome rests on the conflict check, with each host's memory of the last
// writes left as it is and with none kept (LimitRecent(1)): then the cache's
// Badger decides for every transaction whose snapshot is before the last
// sequence applied. Either way a transaction that read what the other host
// changed is run again, and nothing is lost.
func TestHostsConflictsWithoutRecentWrites(t *testing.T) {
	url := natstest.RunServer(t).URL()
	cases := []struct {
		name string
		fn   func(t *testing.T, a, b *jetstream.Store)
	}{
		{"ConcurrentUpdates", testHostsConcurrent},
		{"Fencing", testHostsFencing},
		{"ReadOnlyUpdateSeesTheOther", testHostsReadOnlyUpdate},
		{"RangeRead", testHostsRangeRead},
	}
	for _, limit := range []int{0, 1} {
		for _, tc := range cases {
			t.Run(tc.name+"/limit="+strconv.Itoa(limit), func(t *testing.T) {
				a, b := twoHosts(t, url, 1)
				if limit > 0 {
					a.LimitRecent(limit)
					b.LimitRecent(limit)
				}
				tc.fn(t, a, b)
			})
		}
	}
}

// testHostsRangeRead: host A's transaction walks the notifications and
// writes how many it saw; host B adds one while A's closure runs. A's
// transaction aborts and runs again: the count it writes is the one after
// B's.
func testHostsRangeRead(t *testing.T, a, b *jetstream.Store) {
	notify := func(tx ledger.Tx) error { return tx.Notify(ledger.Notification{Type: "parked"}) }
	mustUpdate(t, a, notify)
	runs := 0
	mustUpdate(t, a, func(tx ledger.Tx) error {
		runs++
		ns, err := tx.Notifications(0, 100)
		if err != nil {
			return err
		}
		if runs == 1 {
			mustUpdate(t, b, notify)
		}
		return tx.SetMeta("sub-n", "seen", []byte(strconv.Itoa(len(ns))))
	})
	if runs != 2 {
		t.Errorf("A's closure ran %d times, want 2 (aborted by B's notification)", runs)
	}
	for name, s := range map[string]*jetstream.Store{"a": a, "b": b} {
		mustView(t, s, func(tx ledger.Tx) error {
			v, err := tx.Meta("sub-n", "seen")
			if err != nil || string(v) != "2" {
				t.Errorf("host %s: A wrote that it saw %q notifications (%v), want 2", name, v, errors.Join(err))
			}
			return nil
		})
	}
}
