package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// A group's stats: how many records it holds, in every state, and the
// span of their failures, in one fixed-size value beside its head:
//
//	'l' lp(sub) 'n' lp(group)   -> total(8) first(8) last(8), unix ns
//
// A park reads and writes this one key for its group (and the head only
// when it opens the group or reaches a threshold of group-grew); a change
// of state that moves no failure writes nothing of the group. A group
// whose head was written before the stats (a store of an earlier host)
// has no stats key: its stats are read from its head and per-state
// counters, and written at its next change.
const dimGroupStats = 'n'

type groupStats struct {
	total       uint64
	first, last int64 // unix ns; 0: none
}

func groupStatsKey(sub, group string) []byte {
	return appendLP(append(key(kindTally, sub), dimGroupStats), group)
}

func (st groupStats) encode() []byte {
	b := binary.BigEndian.AppendUint64(make([]byte, 0, 24), st.total)
	b = binary.BigEndian.AppendUint64(b, uint64(st.first))
	return binary.BigEndian.AppendUint64(b, uint64(st.last))
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// readGroupStats returns the stats of a group; found is false when the
// group has neither stats nor head (it holds no record). legacy says they
// were made up from its head and counters (a group of an earlier host):
// their total counts the records indexed so far in this transaction.
func (t *kvTx) readGroupStats(sub, group string) (st groupStats, found, legacy bool, err error) {
	v, err := t.get(groupStatsKey(sub, group))
	if err == nil {
		if len(v) != 24 {
			return st, false, false, fmt.Errorf("corrupt group stats %q: %d bytes", group, len(v))
		}
		st.total = binary.BigEndian.Uint64(v)
		st.first = int64(binary.BigEndian.Uint64(v[8:]))
		st.last = int64(binary.BigEndian.Uint64(v[16:]))
		return st, true, false, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return st, false, false, err
	}
	h, err := t.groupHead(sub, group)
	if errors.Is(err, ErrNotFound) {
		return st, false, false, nil
	} else if err != nil {
		return st, false, false, err
	}
	n, err := t.tally(sub, dimGroup, group, allStates())
	if err != nil {
		return st, false, false, err
	}
	return groupStats{total: uint64(n), first: unixNano(h.First), last: unixNano(h.Last)}, true, true, nil
}

// spanOf returns the span of a group's failures for GroupsParked: from
// its stats, else (a group of an earlier host) from its head.
func (t *kvTx) spanOf(sub, group string, h *groupHead) (first, last time.Time, err error) {
	v, err := t.get(groupStatsKey(sub, group))
	switch {
	case errors.Is(err, ErrNotFound):
		return h.First, h.Last, nil
	case err != nil:
		return first, last, err
	case len(v) != 24:
		return first, last, fmt.Errorf("corrupt group stats %q: %d bytes", group, len(v))
	}
	return fromUnixNano(int64(binary.BigEndian.Uint64(v[8:]))), fromUnixNano(int64(binary.BigEndian.Uint64(v[16:]))), nil
}
