package ledger

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Failure groups in the index (index.go). Beside a record's other
// entries, its summary is kept under its group, and counted:
//
//	'i' lp(sub) 'g' lp(group) lp(type) lp(id)         -> summary
//	'l' lp(sub) 'g' lp(group) lp(state)               -> count(8)
//	'l' lp(sub) 'u' lp(group NUL type) lp(state)      -> count(8)
//	'l' lp(sub) 'v' lp(group) lp(module version)      -> count(8)
//	'l' lp(sub) 'h' lp(group)                         -> the group's head, JSON
//	'l' lp(sub) 'n' lp(group)                         -> its stats (groupstats.go)
//
// The head is what the group's records share (masked message, classes,
// module) and the largest threshold told (group-opened, group-grew); the
// stats its total and the span of its failures. Both exist from the park
// that opens the group to the change that leaves it empty, so one
// incident notifies once per threshold however often its records change
// state.
const (
	dimGroupType = 'u'
	dimGroupMod  = 'v'
	dimGroupHead = 'h'
)

// GroupGrewAt reports whether a group of n records has reached a
// threshold of group-grew: 100, 1,000, 10,000 and every further power
// of ten.
func GroupGrewAt(n int) bool {
	if n < 100 {
		return false
	}
	for n%10 == 0 {
		n /= 10
	}
	return n == 1
}

// Group is one failure group of a subscription, as GroupsParked lists it.
type Group struct {
	Subscription string
	// Fingerprint names the group (see Fingerprint).
	Fingerprint string
	// Message is the masked message its records share (MaskMessage).
	Message string
	Classes []string
	// Module is the module its records failed in, without version.
	Module string
	// Count is how many records it holds (in the state asked for, if any).
	Count int
	// FirstFailure and LastFailure span the failures of the records that
	// joined the group since it opened (a record resolved does not
	// narrow them).
	FirstFailure, LastFailure time.Time
	// Modules counts its records by module version.
	Modules map[string]int
	// SampleType and SampleID name one record of the group.
	SampleType, SampleID string
}

// GroupFilter selects the groups GroupsParked lists: those of a
// subscription (empty: all), counting the records in State (empty: all)
// of AggregateType (empty: all), whose class chain holds Class and whose
// masked message holds Message (ignoring case).
type GroupFilter struct {
	Subscription, AggregateType, Class, Message string
	State                                       State
	After                                       string // cursor; empty: from the start
	Limit                                       int    // 0 or less: DefaultLimit
}

type groupHead struct {
	Message string   `json:"message"`
	Classes []string `json:"classes,omitempty"`
	Module  string   `json:"module,omitempty"`
	// First and Last are the span of failures as heads written before
	// the group's stats (groupstats.go) kept it; the stats keep it now.
	First    time.Time `json:"first,omitzero"`
	Last     time.Time `json:"last,omitzero"`
	Notified int       `json:"notified"` // the largest threshold told: 1 opened, 100 grew, …
}

func groupHeadKey(sub, group string) []byte {
	return appendLP(append(key(kindTally, sub), dimGroupHead), group)
}

func groupModuleKey(sub, group, module string) []byte {
	return appendLP(appendLP(append(key(kindTally, sub), dimGroupMod), group), module)
}

func groupTypeValue(group, aggType string) string { return group + "\x00" + aggType }

func (t *kvTx) groupHead(sub, group string) (*groupHead, error) {
	v, err := t.get(groupHeadKey(sub, group))
	if err != nil {
		return nil, err
	}
	h := new(groupHead)
	if err := json.Unmarshal(v, h); err != nil {
		return nil, fmt.Errorf("corrupt group head %q: %w", group, err)
	}
	return h, nil
}

func allStates() []State { return []State{StateRetrying, StateWaiting, StateResuming} }

// joinGroup keeps r's group's stats and head after index counted r in
// it. joined says r is new to the group (else it changed state in it):
// the group's total counts it. The span of failures widens to r's. The
// head is written when r opens the group and when the group reaches a
// threshold not told yet; then, when notify, group-opened or group-grew
// is queued. BuildIndex joins without notifying: the groups of an older
// store are not news.
func (t *kvTx) joinGroup(op string, r *Record, s summary, joined, notify bool) error {
	if s.group == "" {
		return nil
	}
	sub := r.Subscription
	st, found, legacy, err := t.readGroupStats(sub, s.group)
	if err != nil {
		return t.fail(op, err)
	}
	opened := !found
	changed := opened || legacy
	if opened {
		// index counted r: the count is what the group holds.
		n, err := t.tally(sub, dimGroup, s.group, allStates())
		if err != nil {
			return t.fail(op, err)
		}
		st = groupStats{total: uint64(n)}
	} else if joined && !legacy {
		st.total, changed = st.total+1, true
	}
	if first := unixNano(r.FirstFailure); first != 0 && (st.first == 0 || first < st.first) {
		st.first, changed = first, true
	}
	if last := unixNano(r.LastFailure); last > st.last {
		st.last, changed = last, true
	}
	if changed {
		if err := t.set(op, groupStatsKey(sub, s.group), st.encode()); err != nil {
			return err
		}
	}
	var h *groupHead
	typ := ""
	switch {
	case opened:
		h = &groupHead{Message: MaskMessage(r.Error.Message), Classes: r.Error.Classes, Module: ModuleName(r.Error.Module), Notified: 1}
		typ = NotifyGroupOpened
	case joined && GroupGrewAt(int(st.total)):
		if h, err = t.groupHead(sub, s.group); err != nil {
			return t.fail(op, err)
		}
		if int(st.total) <= h.Notified {
			return nil // told already: the group shrank and grew back
		}
		h.Notified, typ = int(st.total), NotifyGroupGrew
	default:
		return nil
	}
	v, err := json.Marshal(h)
	if err != nil {
		return t.fail(op, err)
	}
	if err := t.set(op, groupHeadKey(sub, s.group), v); err != nil {
		return err
	}
	if !notify {
		return nil
	}
	// About a group, not an aggregate: no aggregate is named, as for a
	// partition's notifications.
	// At the park's time, on the engine's clock.
	return t.Notify(Notification{Type: typ, Time: r.LastFailure, Subscription: sub, Group: s.group, Count: int(st.total),
		Error: &ErrorInfo{Classes: h.Classes, Message: h.Message, Module: r.Error.Module, Kind: r.Error.Kind}})
}

// leaveGroup uncounts a record that left its group (after unindex
// uncounted it), and drops the group's stats and head once it holds no
// record.
func (t *kvTx) leaveGroup(op, sub string, s summary) error {
	if s.group == "" {
		return nil
	}
	st, found, legacy, err := t.readGroupStats(sub, s.group)
	if err != nil {
		return t.fail(op, err)
	}
	if !found {
		return nil
	}
	if !legacy { // legacy: its total, from the counters, no longer counts the record
		if st.total == 0 {
			return t.fail(op, fmt.Errorf("group %q's total would go below 0", s.group))
		}
		st.total--
	}
	if st.total > 0 {
		return t.set(op, groupStatsKey(sub, s.group), st.encode())
	}
	if err := t.delete(op, groupStatsKey(sub, s.group)); err != nil {
		return err
	}
	return t.delete(op, groupHeadKey(sub, s.group))
}

// GroupsParked implements [ParkedRecords.GroupsParked]: it reads the
// heads of the groups of the subscriptions asked for and their counters,
// not their records, so it costs a few reads a group.
func (t *kvTx) GroupsParked(f GroupFilter) ([]Group, string, error) {
	if err := t.checkRead("GroupsParked"); err != nil {
		return nil, "", err
	}
	if f.State != "" && !validState(f.State) {
		return nil, "", fmt.Errorf("%w: GroupsParked: unknown state %q", ErrInvalid, f.State)
	}
	skip := 0
	if f.After != "" {
		n, err := strconv.Atoi(f.After)
		if err != nil || n < 0 {
			return nil, "", fmt.Errorf("%w: GroupsParked: bad cursor %q", ErrInvalid, f.After)
		}
		skip = n
	}
	subs := []string{f.Subscription}
	if f.Subscription == "" {
		var err error
		if subs, err = t.subscriptionsParked(); err != nil {
			return nil, "", fmt.Errorf("ledger: GroupsParked: %w", err)
		}
	}
	var all []Group
	for _, sub := range subs {
		gs, err := t.groupsOf(sub, &f)
		if err != nil {
			return nil, "", fmt.Errorf("ledger: GroupsParked %q: %w", sub, err)
		}
		all = append(all, gs...)
	}
	slices.SortFunc(all, func(a, b Group) int {
		if a.Count != b.Count {
			return b.Count - a.Count
		}
		if c := strings.Compare(a.Subscription, b.Subscription); c != 0 {
			return c
		}
		return strings.Compare(a.Fingerprint, b.Fingerprint)
	})
	if skip >= len(all) {
		return nil, "", nil
	}
	all = all[skip:]
	limit := limitOr(f.Limit)
	if len(all) <= limit {
		return all, "", t.fillGroups(all)
	}
	all = all[:limit]
	return all, strconv.Itoa(skip + limit), t.fillGroups(all)
}

// CountGroups implements [ParkedRecords.CountGroups].
func (t *kvTx) CountGroups(subscription string) (int, error) {
	if err := t.checkRead("CountGroups"); err != nil {
		return 0, err
	}
	prefix := append(key(kindTally, subscription), dimGroupHead)
	it := t.txn.Iterate(prefix, false)
	defer it.Close()
	n := 0
	for it.Seek(prefix); it.Valid(); it.Next() {
		n++
	}
	return n, nil
}

// groupsOf lists the groups of sub passing f, with their counts.
func (t *kvTx) groupsOf(sub string, f *GroupFilter) ([]Group, error) {
	var out []Group
	prefix := append(key(kindTally, sub), dimGroupHead)
	lower := strings.ToLower(f.Message)
	err := t.scan(prefix, nil, func(k, v []byte) (bool, error) {
		fp, _, ok := cutLP(k[len(prefix):])
		if !ok {
			return false, fmt.Errorf("%w: group head %q", errBadKey, k)
		}
		var h groupHead
		if err := json.Unmarshal(v, &h); err != nil {
			return false, fmt.Errorf("corrupt group head %q: %w", fp, err)
		}
		if (f.Class != "" && !slices.Contains(h.Classes, f.Class)) ||
			(lower != "" && !strings.Contains(strings.ToLower(h.Message), lower)) {
			return true, nil
		}
		var n int
		var err error
		if f.AggregateType != "" {
			n, err = t.tally(sub, dimGroupType, groupTypeValue(fp, f.AggregateType), statesOfState(f.State))
		} else {
			n, err = t.tally(sub, dimGroup, fp, statesOfState(f.State))
		}
		if err != nil || n == 0 {
			return err == nil, err
		}
		first, last, err := t.spanOf(sub, fp, &h)
		if err != nil {
			return false, err
		}
		out = append(out, Group{Subscription: sub, Fingerprint: fp, Message: h.Message, Classes: h.Classes,
			Module: h.Module, Count: n, FirstFailure: first, LastFailure: last})
		return true, nil
	})
	return out, err
}

func statesOfState(s State) []State {
	if s != "" {
		return []State{s}
	}
	return allStates()
}

// fillGroups reads the module versions and a sample record of each
// group of a page.
func (t *kvTx) fillGroups(gs []Group) error {
	for i := range gs {
		g := &gs[i]
		g.Modules = map[string]int{}
		prefix := appendLP(append(key(kindTally, g.Subscription), dimGroupMod), g.Fingerprint)
		err := t.scan(prefix, nil, func(k, v []byte) (bool, error) {
			mod, _, ok := cutLP(k[len(prefix):])
			if !ok || len(v) != 8 {
				return false, fmt.Errorf("%w: group module count %q", errBadKey, k)
			}
			g.Modules[mod] = int(binary.BigEndian.Uint64(v))
			return true, nil
		})
		if err != nil {
			return fmt.Errorf("ledger: GroupsParked: %w", err)
		}
		head := indexHead(g.Subscription, dimGroup, []byte(g.Fingerprint))
		err = t.walk(path{prefix: head, start: head}, nil, func(k, _ []byte) (bool, error) {
			_, _, _, g.SampleType, g.SampleID, _ = indexKeyParts(k)
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("ledger: GroupsParked: %w", err)
		}
	}
	return nil
}
