package jetstream

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"testing"

	"github.com/berthhq/berth/ledger/internal/kvtx"
	"github.com/dgraph-io/badger/v4"
)

// TestRecentWritesDecideAsTheCache applies random transactions to a cache
// in memory, as apply does, and checks that what recentWrites answers — a
// conflict check of random reads and ranges at random snapshots, a point
// read at a random snapshot — is what the cache's Badger answers, with
// room for every write and with room for a few (where it must give the
// old ones back to Badger, and say so).
func TestRecentWritesDecideAsTheCache(t *testing.T) {
	for _, limit := range []int{recentBytes, 1, 3 * (8 + recentOverhead)} {
		t.Run(fmt.Sprintf("limit=%d", limit), func(t *testing.T) {
			db, err := openCache("", Options{Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = db.Close(t.Context()) })
			recent := newRecentWrites(0)
			recent.limit = limit
			rng := rand.New(rand.NewPCG(1, uint64(limit)))
			key := func() []byte { return fmt.Appendf(nil, "k%02d", rng.IntN(40)) }
			decided := 0
			for seq := uint64(1); seq <= 400; seq++ {
				m := &txMessage{snapshot: seq - 1 - uint64(rng.IntN(int(min(seq, 20))))}
				for range rng.IntN(4) {
					m.reads = append(m.reads, key())
				}
				for range rng.IntN(2) {
					from := rng.IntN(40)
					rg := keyRange{start: fmt.Appendf(nil, "k%02d", from), end: fmt.Appendf(nil, "k%02d", from+1+rng.IntN(5))}
					if rng.IntN(4) == 0 {
						rg.end = nil
					}
					m.ranges = append(m.ranges, rg)
				}
				want, err := cacheConflicts(db.DB, m, seq)
				if err != nil {
					t.Fatal(err)
				}
				if got, ok := recent.conflicts(m); ok {
					decided++
					if got != want {
						t.Fatalf("seq %d: recentWrites says conflict %v, the cache %v (%+v)", seq, got, want, m)
					}
				} else if m.snapshot >= recent.floor {
					t.Fatalf("seq %d: snapshot %d at or after the floor %d, undecided", seq, m.snapshot, recent.floor)
				}
				// A point read at a random snapshot already applied.
				k, at := key(), seq-1-uint64(rng.IntN(int(min(seq, 5))))
				if v, del, ok := recent.get(k, at); ok {
					want, err := readAt(db.DB, k, at)
					switch {
					case del && !errors.Is(err, kvtx.ErrNotFound):
						t.Fatalf("seq %d: %s at %d deleted in memory, the cache has %q, %v", seq, k, at, want, err)
					case !del && (err != nil || string(v) != string(want)):
						t.Fatalf("seq %d: %s at %d is %q in memory, the cache has %q, %v", seq, k, at, v, want, err)
					}
				}
				// Apply it: a random set of writes, as committed.
				txn := db.NewTransactionAt(seq-1, true)
				var keys [][]byte
				var writes []write
				for _, k := range sortedKeys(map[string]struct{}{string(key()): {}, string(key()): {}}) {
					w := write{value: fmt.Appendf(nil, "v%d", seq)}
					if rng.IntN(3) == 0 {
						w = write{del: true}
						err = txn.Delete([]byte(k))
					} else {
						err = txn.Set([]byte(k), w.value)
					}
					if err != nil {
						t.Fatal(err)
					}
					keys, writes = append(keys, []byte(k)), append(writes, w)
				}
				if err := txn.CommitAt(seq, nil); err != nil {
					t.Fatal(err)
				}
				txn.Discard()
				recent.add(seq, keys, writes)
			}
			if decided == 0 {
				t.Fatal("recentWrites decided nothing")
			}
		})
	}
}

func readAt(db *badger.DB, key []byte, at uint64) ([]byte, error) {
	txn := db.NewTransactionAt(at, false)
	defer txn.Discard()
	return kvtx.Badger(txn).Get(key)
}
