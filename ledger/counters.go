package ledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/berthhq/berth/ledger/internal/kvtx"
)

// Counters that answer the counts the per-class, per-type and per-group
// ones cannot, kept like them in the transaction that changes the record
// (index.go's tallies):
//
//	'l' lp(sub) 'y' lp(class NUL type) lp(state) -> count(8): per class of the chain and aggregate type
//	'l' lp(sub) 'b' level bucket(8) lp(state)   -> count(8): per time bucket of the first failure
//
// A time bucket is the first failure's stamp (index.go) divided by its
// level's width: a day, an hour, a minute or a second (so buckets are
// aligned on stamps, not on the clock; a sum does not care). A record is
// in one bucket of each level. A time window's count is the days wholly
// inside it, then the hours, minutes and seconds of its two ends, and
// the entries of the sub-second ends walked on the time path: a few
// dozen counter reads and walks of a second's records, however many the
// window holds.
//
// A resuming record is counted in neither: a resume is brief, and most
// resumed records go on to be resolved, so counting them here would cost
// every resumed aggregate the counters of two more changes (a bulk
// resume's writes). Their share of a count is read from the index
// instead: the class-and-state path narrowed to the type, or the
// resuming records' own time path (resumingIn) — as many reads as the
// count's resuming records. A host that counted resuming records
// here (before session 34) left some counters of state resuming: they
// are read by nobody, and go as those records change (a summary says
// which: summaryResuming, index.go).
//
// A summary says whether its record is counted here (index.go), so a
// store indexed before them is counted by BuildIndex (version 3) while
// its host changes records. A host of an earlier version sharing a
// JetStream ledger does not keep them: a record it changes keeps its old
// counts here, as with the group counters before.
const (
	dimClassType = 'y'
	dimBucket    = 'b'
)

// bucketLevels are the time buckets' levels, widest first.
var bucketLevels = []struct {
	level byte
	width uint64 // in stamp units, nanoseconds
}{
	{'d', uint64(24 * time.Hour)},
	{'h', uint64(time.Hour)},
	{'m', uint64(time.Minute)},
	{'s', uint64(time.Second)},
}

func classTypeValue(class, aggType string) string { return class + "\x00" + aggType }

// bucketHead is the start of every counter of one level of sub's buckets.
func bucketHead(sub string, level byte) []byte {
	return append(key(kindTally, sub), dimBucket, level)
}

func bucketKey(sub string, level byte, bucket uint64, state State) []byte {
	b := binary.BigEndian.AppendUint64(bucketHead(sub, level), bucket)
	return appendLP(b, string(state))
}

// countedTallies lists the counters of this file a record with summary s
// counts in.
func countedTallies(sub, aggType string, s summary) [][]byte {
	if s.state == StateResuming && !s.resumingCounted {
		return nil
	}
	var ks [][]byte
	for i, c := range s.classes {
		if !containsBefore(s.classes, i, c) {
			ks = append(ks, tallyKey(sub, dimClassType, classTypeValue(c, aggType), s.state))
		}
	}
	st := stamp(s.first)
	for _, l := range bucketLevels {
		ks = append(ks, bucketKey(sub, l.level, st/l.width, s.state))
	}
	return ks
}

// windowStamps is the window of f as a range of stamps [lo, hi): a first
// failure at or after FailedAfter, before FailedBefore. An open start is
// the zero time's stamp, 0; an open end is past every stamp.
func windowStamps(f *Filter) (lo, hi uint64) {
	lo, hi = stamp(f.FailedAfter), math.MaxUint64
	if !f.FailedBefore.IsZero() {
		hi = stamp(f.FailedBefore)
	}
	return lo, hi
}

// countWindow counts sub's records in states whose first failure is in
// [lo, hi): from the time buckets, and, for resuming records, from their
// own time path.
func (t *kvTx) countWindow(sub string, lo, hi uint64, states []State) (int, error) {
	kept, resuming := splitResuming(states)
	n := 0
	if len(kept) > 0 {
		w := windowCount{t: t, sub: sub, states: kept}
		m, err := w.count(lo, hi, 0)
		w.close()
		if err != nil {
			return 0, err
		}
		n += m
	}
	if resuming {
		n += t.resumingIn(sub, lo, hi)
	}
	return n, nil
}

// splitResuming splits states into those the counters of this file keep
// and whether it holds StateResuming.
func splitResuming(states []State) (kept []State, resuming bool) {
	for _, st := range states {
		if st == StateResuming {
			resuming = true
		} else {
			kept = append(kept, st)
		}
	}
	return kept, resuming
}

// resumingIn counts sub's resuming records whose first failure is in
// [lo, hi), from their entries on the 'r' path (index.go): as many reads
// as the window holds resuming records, however many are resuming.
func (t *kvTx) resumingIn(sub string, lo, hi uint64) int {
	head := indexHead(sub, dimResumed, nil)
	start := binary.BigEndian.AppendUint64(bytes.Clone(head), lo)
	end := binary.BigEndian.AppendUint64(bytes.Clone(head), hi)
	return countKeys(t.txn, head, start, end)
}

// classTypeCount counts sub's records of a class and aggregate type in
// states: from the counters, and, for resuming records, by counting their
// keys on the class-and-state path under the type.
func (t *kvTx) classTypeCount(sub, class, aggType string, states []State) (int, error) {
	kept, resuming := splitResuming(states)
	n, err := t.tally(sub, dimClassType, classTypeValue(class, aggType), kept)
	if err != nil || !resuming {
		return n, err
	}
	prefix := appendLP(indexHead(sub, dimClassIn, classIn(class, StateResuming)), aggType)
	return n + countKeys(t.txn, prefix, prefix, nil), nil
}

// windowCount is one window's count of records in states other than
// resuming. Its two iterators, over sub's buckets and over its time
// path, are made once and sought for each range: making one costs more
// than a seek, the more the store holds.
type windowCount struct {
	t        *kvTx
	sub      string
	states   []State // without StateResuming
	buckets  kvtx.Iterator
	entries  kvtx.Iterator
	bucketsH []byte
	entriesH []byte
}

func (w *windowCount) close() {
	for _, it := range []kvtx.Iterator{w.buckets, w.entries} {
		if it != nil {
			it.Close()
		}
	}
}

// count counts [lo, hi) with the buckets of level i and finer: the whole
// buckets of level i inside it, and its ends at the next level.
func (w *windowCount) count(lo, hi uint64, i int) (int, error) {
	if lo >= hi {
		return 0, nil
	}
	if i == len(bucketLevels) {
		return w.countEntries(lo, hi)
	}
	width := bucketLevels[i].width
	first, last := lo/width, hi/width
	if lo%width != 0 {
		first++
	}
	if first >= last {
		return w.count(lo, hi, i+1)
	}
	n, err := w.sumBuckets(bucketLevels[i].level, first, last)
	if err != nil {
		return 0, err
	}
	for _, end := range [][2]uint64{{lo, first * width}, {last * width, hi}} {
		m, err := w.count(end[0], end[1], i+1)
		if err != nil {
			return 0, err
		}
		n += m
	}
	return n, nil
}

// sumBuckets adds the counters of level's buckets [first, last) in states.
func (w *windowCount) sumBuckets(level byte, first, last uint64) (int, error) {
	if w.bucketsH == nil {
		w.bucketsH = append(key(kindTally, w.sub), dimBucket)
	}
	head := bucketHead(w.sub, level)
	start := binary.BigEndian.AppendUint64(bytes.Clone(head), first)
	end := binary.BigEndian.AppendUint64(bytes.Clone(head), last)
	n := 0
	err := w.walk(w.bucketsH, start, end, &w.buckets, func(k []byte, value func() ([]byte, error)) error {
		// Filtered even for every state kept: counters of state
		// resuming an earlier host left are not read.
		st, _, ok := cutLP(k[len(head)+8:])
		if !ok {
			return fmt.Errorf("%w: bucket %q", errBadKey, k)
		}
		if !slices.Contains(w.states, State(st)) {
			return nil
		}
		v, err := value()
		if err != nil {
			return err
		}
		c, err := decodeUint64(k, v)
		n += int(c)
		return err
	})
	return n, err
}

// walk calls fn with each key under prefix in [start, end) and a func
// reading its value: from the View's cache when it keeps the range
// (readcache.go), else with *it, made once for all of w's ranges.
func (w *windowCount) walk(prefix, start, end []byte, it *kvtx.Iterator, fn func(k []byte, value func() ([]byte, error)) error) error {
	if rr, ok := w.t.txn.(rangeReader); ok {
		kvs, ok, err := rr.rangeOf(prefix, start, end)
		if err != nil {
			return err
		}
		if ok {
			for _, kv := range kvs {
				if err := fn(kv[0], func() ([]byte, error) { return kv[1], nil }); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if *it == nil {
		*it = w.t.txn.Iterate(prefix, false)
	}
	for (*it).Seek(start); (*it).Valid() && bytes.Compare((*it).Key(), end) < 0; (*it).Next() {
		if err := fn((*it).Key(), (*it).Value); err != nil {
			return err
		}
	}
	return nil
}

// countEntries counts the entries of sub's time path in [lo, hi) whose
// record is in states: what is left of a window finer than a second.
func (w *windowCount) countEntries(lo, hi uint64) (int, error) {
	if w.entriesH == nil {
		// Values (for the state) are read only in the range: an
		// iterator that prefetches reads past its end.
		w.entriesH = indexHead(w.sub, dimFirst, nil)
	}
	start := binary.BigEndian.AppendUint64(bytes.Clone(w.entriesH), lo)
	end := binary.BigEndian.AppendUint64(bytes.Clone(w.entriesH), hi)
	n := 0
	err := w.walk(w.entriesH, start, end, &w.entries, func(_ []byte, value func() ([]byte, error)) error {
		v, err := value()
		if err != nil {
			return err
		}
		s, err := decodeSummary(v, false)
		if err == nil && slices.Contains(w.states, s.state) {
			n++
		}
		return err
	})
	return n, err
}
