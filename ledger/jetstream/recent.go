package jetstream

import (
	"bytes"
	"slices"
	"sort"
	"sync"
)

// recentWrites holds in memory what the transactions applied last wrote:
// for every key written after its floor, the newest write (value and
// stream sequence), and for every such sequence the keys it wrote, oldest
// first. Two reads then leave the cache's Badger alone, whose point reads
// and seeks go through more levels of its LSM tree the more the ledger
// holds:
//
//   - the conflict check of a transaction whose snapshot is at or after
//     the floor (conflicts): a key it read changed after its snapshot when
//     its newest write is after it; a range it walked, when a sequence
//     after its snapshot wrote a key in it;
//   - a closure's point read of a key written after the floor (get), such
//     as the counters every park reads and writes.
//
// Both answer exactly what Badger would, so every host decides alike
// whatever its memory holds. It is bounded by recentBytes: the oldest
// sequences leave it (and raise the floor) first.
type recentWrites struct {
	mu    sync.Mutex
	floor uint64                 // every write after floor is here
	last  map[string]recentWrite // key -> its newest write
	seqs  []recentSeq            // sequences after floor that wrote, oldest first
	bytes int
	limit int
}

// recentBytes bounds what recentWrites holds, keys and values.
const recentBytes = 16 << 20

// recentOverhead is what a write costs beside its key and value.
const recentOverhead = 64

type recentWrite struct {
	seq   uint64
	value []byte
	del   bool
}

// recentSeq is the keys one sequence wrote, sorted, and what they took.
type recentSeq struct {
	seq   uint64
	keys  []string
	bytes int
}

func newRecentWrites(floor uint64) *recentWrites {
	return &recentWrites{floor: floor, last: map[string]recentWrite{}, limit: recentBytes}
}

// reset forgets everything: the cache holds writes at or before floor it
// does not know (a restored snapshot).
func (r *recentWrites) reset(floor uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.floor, r.last, r.seqs, r.bytes = floor, map[string]recentWrite{}, nil, 0
}

// add records the writes of the transaction committed at seq, which is
// after every sequence added before. It must be called before seq counts
// as applied: a closure at that snapshot must find it here.
func (r *recentWrites) add(seq uint64, keys [][]byte, writes []write) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := recentSeq{seq: seq, keys: make([]string, len(keys))}
	for i, k := range keys {
		w := writes[i]
		e.keys[i] = string(k)
		r.last[e.keys[i]] = recentWrite{seq: seq, value: bytes.Clone(w.value), del: w.del}
		e.bytes += len(k) + len(w.value) + recentOverhead
	}
	if !sort.StringsAreSorted(e.keys) {
		sort.Strings(e.keys)
	}
	r.seqs = append(r.seqs, e)
	r.bytes += e.bytes
	for r.bytes > r.limit || len(r.seqs) > historyWindow {
		r.dropOldest()
	}
}

// dropOldest forgets the oldest sequence: it becomes the floor.
func (r *recentWrites) dropOldest() {
	e := r.seqs[0]
	r.seqs[0] = recentSeq{}
	r.seqs = r.seqs[1:]
	for _, k := range e.keys {
		if w, ok := r.last[k]; ok && w.seq == e.seq {
			delete(r.last, k)
		}
	}
	r.bytes -= e.bytes
	r.floor = e.seq
	if len(r.seqs) == 0 {
		r.seqs = nil // let the backing array go
	}
}

// get returns the value of key as of snapshot (a copy; del: none), when
// its newest write is here and at or before snapshot; ok is false when the
// cache's Badger must be asked.
func (r *recentWrites) get(key []byte, snapshot uint64) (value []byte, del, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.last[string(key)]
	if !ok || w.seq > snapshot || snapshot < r.floor {
		return nil, false, false
	}
	if w.del {
		return nil, true, true
	}
	v := make([]byte, len(w.value))
	copy(v, w.value)
	return v, false, true
}

// conflicts reports whether anything m read was written after its
// snapshot, when m's snapshot is at or after the floor (decided; else the
// cache's Badger must be asked).
func (r *recentWrites) conflicts(m *txMessage) (conflict, decided bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.snapshot < r.floor {
		return false, false
	}
	for _, k := range m.reads {
		if w, ok := r.last[string(k)]; ok && w.seq > m.snapshot {
			return true, true
		}
	}
	if len(m.ranges) == 0 {
		return false, true
	}
	// The sequences after the snapshot, newest first.
	for i := len(r.seqs) - 1; i >= 0 && r.seqs[i].seq > m.snapshot; i-- {
		keys := r.seqs[i].keys
		for _, rg := range m.ranges {
			j, _ := slices.BinarySearch(keys, string(rg.start))
			if j < len(keys) && (rg.end == nil || keys[j] < string(rg.end)) {
				return true, true
			}
		}
	}
	return false, true
}
