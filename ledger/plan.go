package ledger

import (
	"bytes"
)

// A listing's plan: which range of index entries (index.go) it walks.

// path is one range of index entries that holds every record of a
// subscription matching a filter.
type path struct {
	head   []byte // the path's entries are head lp(type) lp(id), but on the time path
	prefix []byte // every entry of the path starts with it
	start  []byte // the first key to look at
	end    []byte // nil, or the first key past the range
}

// plan picks the path of sub that f narrows most, by the counts of the
// state, the aggregate type, the class and the group it names, and of the
// time window's entries (counters.go's buckets).
func (t *kvTx) plan(sub string, f *Filter) (path, error) {
	all := []State{StateRetrying, StateWaiting, StateResuming}
	var (
		best  path
		bestN = -1
	)
	consider := func(p path, n int) {
		if bestN < 0 || n < bestN {
			best, bestN = p, n
		}
	}
	if f.AggregateType != "" {
		n, err := t.tally(sub, dimType, f.AggregateType, all)
		if err != nil {
			return path{}, err
		}
		consider(allPath(sub, f), n)
	} else {
		n, err := t.stateCount(sub, all)
		if err != nil {
			return path{}, err
		}
		consider(allPath(sub, f), n)
	}
	if f.State != "" {
		var n int
		var err error
		if f.AggregateType != "" {
			n, err = t.tally(sub, dimType, f.AggregateType, []State{f.State})
		} else {
			n, err = t.stateCount(sub, []State{f.State})
		}
		if err != nil {
			return path{}, err
		}
		consider(headPath(indexHead(sub, dimState, []byte(f.State)), f.AggregateType), n)
	}
	if f.Class != "" {
		n, err := t.classCount(sub, f)
		if err != nil {
			return path{}, err
		}
		if f.State != "" {
			consider(headPath(indexHead(sub, dimClassIn, classIn(f.Class, f.State)), f.AggregateType), n)
		} else {
			consider(headPath(indexHead(sub, dimClass, []byte(f.Class)), f.AggregateType), n)
		}
	}
	if f.Group != "" {
		var n int
		var err error
		if f.AggregateType != "" {
			n, err = t.tally(sub, dimGroupType, groupTypeValue(f.Group, f.AggregateType), statesOf(f))
		} else {
			n, err = t.tally(sub, dimGroup, f.Group, statesOf(f))
		}
		if err != nil {
			return path{}, err
		}
		consider(headPath(indexHead(sub, dimGroup, []byte(f.Group)), f.AggregateType), n)
	}
	if !f.KeyOrder && (!f.FailedAfter.IsZero() || !f.FailedBefore.IsZero()) {
		// The resuming records are not in the time buckets: every one
		// is taken for in the window (an estimate; 0 is still exact).
		lo, hi := windowStamps(f)
		n, err := t.countWindow(sub, lo, hi, []State{StateRetrying, StateWaiting})
		if err != nil {
			return path{}, err
		}
		m, err := t.stateCount(sub, []State{StateResuming})
		if err != nil {
			return path{}, err
		}
		consider(timePath(sub, f), n+m)
	}
	if bestN == 0 {
		// A count that is exact says nothing matches: walk nothing.
		best.start, best.end = best.prefix, best.prefix
	}
	return best, nil
}

func (t *kvTx) stateCount(sub string, states []State) (int, error) {
	n := 0
	for _, st := range states {
		c, _, err := t.getUint64(key(kindCount, sub, string(st)))
		if err != nil {
			return 0, err
		}
		n += int(c)
	}
	return n, nil
}

func allPath(sub string, f *Filter) path {
	return headPath(indexHead(sub, dimAll, nil), f.AggregateType)
}

// headPath is every entry under head, or under head and the aggregate type
// when one is given.
func headPath(head []byte, aggType string) path {
	prefix := head
	if aggType != "" {
		prefix = appendLP(bytes.Clone(head), aggType)
	}
	return path{head: head, prefix: prefix, start: prefix}
}

func timePath(sub string, f *Filter) path {
	head := indexHead(sub, dimFirst, nil)
	p := path{prefix: head, start: head}
	if !f.FailedAfter.IsZero() {
		p.start = append(bytes.Clone(head), stampBytes(f.FailedAfter)...)
	}
	if !f.FailedBefore.IsZero() {
		p.end = append(bytes.Clone(head), stampBytes(f.FailedBefore)...)
	}
	return p
}

// walk calls fn with each entry of p from after on (exclusive; nil: from
// the start), and the number examined so far, until fn returns false.
func (t *kvTx) walk(p path, after []byte, fn func(k, v []byte) (bool, error)) error {
	start := p.start
	if after != nil {
		if next := append(bytes.Clone(after), 0); bytes.Compare(next, start) > 0 {
			start = next
		}
	}
	if p.end != nil && bytes.Compare(start, p.end) >= 0 {
		// An empty range (a count said nothing matches): no iterator,
		// whose seek goes through every level of the store.
		return nil
	}
	it := t.txn.Iterate(p.prefix, true)
	defer it.Close()
	for it.Seek(start); it.Valid(); it.Next() {
		if p.end != nil && bytes.Compare(it.Key(), p.end) >= 0 {
			return nil
		}
		v, err := it.Value()
		if err != nil {
			return err
		}
		if more, err := fn(it.Key(), v); err != nil || !more {
			return err
		}
	}
	return nil
}

// classCount counts sub's records in f's class (and aggregate type, if
// f names one) and state.
func (t *kvTx) classCount(sub string, f *Filter) (int, error) {
	if f.AggregateType != "" {
		return t.classTypeCount(sub, f.Class, f.AggregateType, statesOf(f))
	}
	return t.tally(sub, dimClass, f.Class, statesOf(f))
}
