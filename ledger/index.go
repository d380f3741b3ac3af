package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The parked index. Every parked record has, beside its JSON under 'r',
// entries under 'i' whose value is its summary: what a filter checks
// (state, classes, lower-cased message, first failure) and what the engine
// needs at start (next retry, whether it was unrecoverable). A listing walks
// one range of entries, the access path its filter narrows most, checks the
// other conditions on the summaries and reads the JSON of the matches only.
//
//	'i' lp(sub) 'a' lp("")    lp(type) lp(id) -> summary: every record, in record key order
//	'i' lp(sub) 's' lp(state) lp(type) lp(id) -> summary: by state
//	'i' lp(sub) 'c' lp(class) lp(type) lp(id) -> summary: by each class of its chain
//	'i' lp(sub) 'k' lp(class "\x00" state) lp(type) lp(id) -> summary: by each class and its state
//	'i' lp(sub) 'f' ts(8)     lp(type) lp(id) -> summary: by first failure
//	'i' lp(sub) 'o' ts(8)     lp(type) lp(id) -> summary: by first failure, retrying and waiting only
//	'i' lp(sub) 'r' ts(8)     lp(type) lp(id) -> summary: by first failure, resuming only (counters.go)
//	'i' lp(sub) 'g' lp(group) lp(type) lp(id) -> summary: by failure group (group.go)
//	'l' lp(sub) dim lp(value) lp(state)      -> count(8): per class ('c'), aggregate type ('t') and group ('g') and state
//	'l' lp(sub) 'v' lp(group) lp(module)     -> count(8): a group's records per module version (group.go)
//	'l' lp(sub) 'h' lp(group)                -> the group's head (group.go)
//	'l' lp(sub) 'y' lp(class NUL type) lp(state) -> count(8): per class and aggregate type (counters.go)
//	'l' lp(sub) 'b' level bucket(8) lp(state) -> count(8): per time bucket of first failure (counters.go)
//	'x' "parked-index"                        -> indexVersion once every record is indexed
//
// A path keeps one record at one place for as long as the filter's value
// on it holds (a record's class, state or first failure is in its key
// only on the paths of that class, state or time), so a record is never
// listed twice while paging. The counters, the entries and the record
// change in one transaction, so a count is exact in every snapshot.
const (
	kindIndex  = 'i'
	kindTally  = 'l'
	dimAll     = 'a'
	dimState   = 's'
	dimClass   = 'c'
	dimClassIn = 'k' // a class in a state: its value is class NUL state
	dimFirst   = 'f'
	dimOldest  = 'o'
	dimResumed = 'r' // resuming records by first failure, for a window's count of them
	dimType    = 't' // counters only: the 'a' path has the type in its key
	dimGroup   = 'g'
	// summaryVer is the summary's format. The group and the module version
	// were added at its end, where a host that does not know them stops
	// reading: an entry without them is of a host before groups.
	summaryVer = 1
	// summaryCounted ends a summary whose record is in the counters of
	// counters.go; a host before them stops reading at the module.
	summaryCounted = 1
	// summaryResuming ends the summary of a resuming record that is not
	// in those counters (counters.go keeps no resuming record): a host
	// that counted resuming records there reads it as a record never
	// counted, and so leaves those counters alone when it changes it.
	summaryResuming = 2

	// indexVersion is what BuildIndex writes once every record is indexed:
	// 2 once every record is also in its failure group, 3 once it is also
	// in the counters per class and type and per time bucket, 4 once every
	// resuming record is also on the 'r' path.
	indexVersion = 4
	// countedVersion is the mark of a store indexed and counted (3) whose
	// resuming records may not be on the 'r' path yet.
	countedVersion = 3
)

func indexMarkKey() []byte { return []byte("xparked-index") }

// MaxScan is how many index entries one ListParked examines at most: a
// filter whose conditions are each broad but rarely met together answers
// a page with fewer records than asked for (maybe none) and a cursor to go
// on with, rather than reading every record in one request.
const MaxScan = 20_000

// summary is what the index keeps of a record.
type summary struct {
	state         State
	first, next   time.Time
	unrecoverable bool
	message       string // lower-cased
	classes       []string
	// group is the record's Fingerprint and module its module version
	// (empty in a summary written before groups).
	group, module string
	// counted: the record is in the counters per class and aggregate
	// type and per time bucket (counters.go). A summary written before
	// them says false, so its record is taken out of only the counters
	// it was put in.
	counted bool
	// resumingCounted: a resuming record counted there by a host that
	// counted resuming records (summaryCounted in a resuming summary);
	// it is taken out of them when it changes.
	resumingCounted bool
}

func summarize(r *Record) summary {
	return summary{state: r.State, first: r.FirstFailure, next: r.NextRetry,
		unrecoverable: r.Error.Class == "unrecoverable" || (r.Error.Class == "" && r.Error.Kind == "unrecoverable"),
		message:       strings.ToLower(r.Error.Message), classes: r.Error.Classes,
		group: Fingerprint(r), module: r.Error.Module, counted: true}
}

var stateByte = map[State]byte{StateRetrying: 'r', StateWaiting: 'w', StateResuming: 's'}

func byteState(b byte) State {
	switch b {
	case 'r':
		return StateRetrying
	case 'w':
		return StateWaiting
	case 's':
		return StateResuming
	}
	return ""
}

// stamp encodes a time so that byte order is time order; the zero time
// is 0, before every other.
func stamp(t time.Time) uint64 {
	if t.IsZero() {
		return 0
	}
	return uint64(t.UnixNano()) ^ 1<<63
}

func unstamp(v uint64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(v^1<<63)).UTC()
}

func (s summary) encode() []byte {
	b := make([]byte, 0, 32+len(s.message)+16*len(s.classes))
	flags := byte(0)
	if s.unrecoverable {
		flags = 1
	}
	b = append(b, summaryVer, stateByte[s.state], flags)
	b = binary.BigEndian.AppendUint64(b, stamp(s.first))
	b = binary.BigEndian.AppendUint64(b, stamp(s.next))
	b = appendLP(b, s.message)
	b = binary.AppendUvarint(b, uint64(len(s.classes)))
	for _, c := range s.classes {
		b = appendLP(b, c)
	}
	if s.group == "" {
		return b
	}
	b = appendLP(b, s.group)
	b = appendLP(b, s.module)
	switch {
	case s.counted && s.state == StateResuming && !s.resumingCounted:
		b = append(b, summaryResuming)
	case s.counted:
		b = append(b, summaryCounted)
	}
	return b
}

var errBadSummary = errors.New("ledger: malformed index entry")

// decodeSummary decodes v; classes and message are read only when full.
func decodeSummary(v []byte, full bool) (summary, error) {
	var s summary
	if len(v) < 19 || v[0] != summaryVer {
		return s, errBadSummary
	}
	s.state, s.unrecoverable = byteState(v[1]), v[2]&1 != 0
	s.first = unstamp(binary.BigEndian.Uint64(v[3:]))
	s.next = unstamp(binary.BigEndian.Uint64(v[11:]))
	if !full {
		return s, nil
	}
	rest := v[19:]
	msg, rest, ok := cutLP(rest)
	if !ok {
		return s, errBadSummary
	}
	s.message = msg
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > uint64(len(rest)) {
		return s, errBadSummary
	}
	rest = rest[w:]
	s.classes = make([]string, 0, n)
	for range n {
		var c string
		if c, rest, ok = cutLP(rest); !ok {
			return s, errBadSummary
		}
		s.classes = append(s.classes, c)
	}
	if len(rest) == 0 {
		return s, nil // written before groups
	}
	if s.group, rest, ok = cutLP(rest); !ok {
		return s, errBadSummary
	}
	if s.module, rest, ok = cutLP(rest); !ok {
		return s, errBadSummary
	}
	if len(rest) > 0 {
		s.counted = rest[0] == summaryCounted || rest[0] == summaryResuming
		s.resumingCounted = rest[0] == summaryCounted && s.state == StateResuming
	}
	return s, nil
}

func cutLP(b []byte) (string, []byte, bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return "", nil, false
	}
	return string(b[w : w+int(n)]), b[w+int(n):], true
}

// indexHead is the start of every entry of sub on path dim with value val
// (val is 8 bytes of stamp on the time paths).
func indexHead(sub string, dim byte, val []byte) []byte {
	b := key(kindIndex, sub)
	b = append(b, dim)
	if isTimePath(dim) {
		return append(b, val...)
	}
	return appendLP(b, string(val))
}

// isTimePath reports whether dim's value is a stamp of 8 bytes.
func isTimePath(dim byte) bool { return dim == dimFirst || dim == dimOldest || dim == dimResumed }

func indexKey(sub string, dim byte, val []byte, aggType, aggID string) []byte {
	return appendLP(appendLP(indexHead(sub, dim, val), aggType), aggID)
}

func stampBytes(t time.Time) []byte { return binary.BigEndian.AppendUint64(nil, stamp(t)) }

// entryKeys lists every index key of a record of sub with summary s.
func entryKeys(sub, aggType, aggID string, s summary) [][]byte {
	ks := [][]byte{
		indexKey(sub, dimAll, nil, aggType, aggID),
		indexKey(sub, dimState, []byte(s.state), aggType, aggID),
		indexKey(sub, dimFirst, stampBytes(s.first), aggType, aggID),
	}
	switch {
	case s.state == StateResuming:
		ks = append(ks, indexKey(sub, dimResumed, stampBytes(s.first), aggType, aggID))
	case !s.first.IsZero():
		ks = append(ks, indexKey(sub, dimOldest, stampBytes(s.first), aggType, aggID))
	}
	for i, c := range s.classes {
		if !containsBefore(s.classes, i, c) {
			ks = append(ks, indexKey(sub, dimClass, []byte(c), aggType, aggID),
				indexKey(sub, dimClassIn, classIn(c, s.state), aggType, aggID))
		}
	}
	if s.group != "" {
		ks = append(ks, indexKey(sub, dimGroup, []byte(s.group), aggType, aggID))
	}
	return ks
}

// classIn is the value of a class in a state on the 'k' path.
func classIn(class string, state State) []byte {
	return []byte(class + "\x00" + string(state))
}

// containsBefore reports whether c is among the first i of cs.
func containsBefore(cs []string, i int, c string) bool {
	for _, x := range cs[:i] {
		if x == c {
			return true
		}
	}
	return false
}

// indexKeyParts splits an index key into sub, dim, the path's value and
// the record's aggregate type and id.
func indexKeyParts(k []byte) (sub string, dim byte, val []byte, aggType, aggID string, err error) {
	if len(k) == 0 || k[0] != kindIndex {
		return "", 0, nil, "", "", errBadKey
	}
	rest := k[1:]
	var ok bool
	if sub, rest, ok = cutLP(rest); !ok || len(rest) == 0 {
		return "", 0, nil, "", "", errBadKey
	}
	dim, rest = rest[0], rest[1:]
	switch dim {
	case dimFirst, dimOldest, dimResumed:
		if len(rest) < 8 {
			return "", 0, nil, "", "", errBadKey
		}
		val, rest = rest[:8], rest[8:]
	case dimAll, dimState, dimClass, dimClassIn, dimGroup:
		var v string
		if v, rest, ok = cutLP(rest); !ok {
			return "", 0, nil, "", "", errBadKey
		}
		val = []byte(v)
	default:
		return "", 0, nil, "", "", errBadKey
	}
	if aggType, rest, ok = cutLP(rest); !ok {
		return "", 0, nil, "", "", errBadKey
	}
	if aggID, rest, ok = cutLP(rest); !ok || len(rest) != 0 {
		return "", 0, nil, "", "", errBadKey
	}
	return sub, dim, val, aggType, aggID, nil
}

func tallyKey(sub string, dim byte, val string, state State) []byte {
	b := append(key(kindTally, sub), dim)
	return appendLP(appendLP(b, val), string(state))
}

// tallies lists the counters a record with summary s counts in.
func tallies(sub, aggType string, s summary) [][]byte {
	ks := [][]byte{tallyKey(sub, dimType, aggType, s.state)}
	for i, c := range s.classes {
		if !containsBefore(s.classes, i, c) {
			ks = append(ks, tallyKey(sub, dimClass, c, s.state))
		}
	}
	if s.group != "" {
		ks = append(ks, tallyKey(sub, dimGroup, s.group, s.state), groupModuleKey(sub, s.group, s.module),
			tallyKey(sub, dimGroupType, groupTypeValue(s.group, aggType), s.state))
	}
	if s.counted {
		ks = append(ks, countedTallies(sub, aggType, s)...)
	}
	return ks
}

// summaryOf returns the summary of the stored record under (sub, type,
// id): from its index entry, or from its JSON for a record written before
// the index.
func (t *kvTx) summaryOf(sub, aggType, aggID string) (summary, bool, error) {
	v, err := t.get(indexKey(sub, dimAll, nil, aggType, aggID))
	if err == nil {
		s, err := decodeSummary(v, true)
		return s, true, err
	}
	if !errors.Is(err, ErrNotFound) {
		return summary{}, false, err
	}
	return summary{}, false, nil
}

// unindex removes a record's entries and its counts.
func (t *kvTx) unindex(op, sub, aggType, aggID string, s summary) error {
	for _, k := range entryKeys(sub, aggType, aggID, s) {
		if err := t.delete(op, k); err != nil {
			return err
		}
	}
	for _, k := range tallies(sub, aggType, s) {
		if err := t.addTally(op, k, -1); err != nil {
			return err
		}
	}
	return nil
}

// reindex changes a record's entries and counts from summary old to s:
// an entry it keeps is written once, and a counter both count it in (its
// group's module version when it changes state, say) is not written.
func (t *kvTx) reindex(op, sub, aggType, aggID string, old, s summary) error {
	keep := entryKeys(sub, aggType, aggID, s)
	for _, k := range entryKeys(sub, aggType, aggID, old) {
		if !slices.ContainsFunc(keep, func(x []byte) bool { return bytes.Equal(x, k) }) {
			if err := t.delete(op, k); err != nil {
				return err
			}
		}
	}
	delta := map[string]int64{}
	var order []string
	for _, d := range []struct {
		ks [][]byte
		by int64
	}{{tallies(sub, aggType, old), -1}, {tallies(sub, aggType, s), +1}} {
		for _, k := range d.ks {
			if _, ok := delta[string(k)]; !ok {
				order = append(order, string(k))
			}
			delta[string(k)] += d.by
		}
	}
	var counts [][]byte
	for _, k := range order {
		switch delta[k] {
		case 0:
		case 1:
			counts = append(counts, []byte(k))
		default:
			if err := t.addTally(op, []byte(k), delta[k]); err != nil {
				return err
			}
		}
	}
	return t.writeEntries(op, sub, aggType, aggID, s, counts)
}

// index writes a record's entries and counts it.
func (t *kvTx) index(op, sub, aggType, aggID string, s summary) error {
	return t.writeEntries(op, sub, aggType, aggID, s, tallies(sub, aggType, s))
}

// writeEntries writes a record's entries with summary s and adds it to
// the counters under counts.
func (t *kvTx) writeEntries(op, sub, aggType, aggID string, s summary, counts [][]byte) error {
	v := s.encode()
	for _, k := range entryKeys(sub, aggType, aggID, s) {
		if err := t.set(op, k, v); err != nil {
			return err
		}
	}
	for _, k := range counts {
		if err := t.addTally(op, k, +1); err != nil {
			return err
		}
	}
	return nil
}

func (t *kvTx) addTally(op string, k []byte, delta int64) error {
	n, _, err := t.getUint64(k)
	if err != nil {
		return t.fail(op, err)
	}
	switch next := int64(n) + delta; {
	case next < 0:
		return t.fail(op, fmt.Errorf("counter %q would go below 0", k))
	case next == 0:
		return t.delete(op, k)
	default:
		return t.set(op, k, u64(uint64(next)))
	}
}

func (t *kvTx) tally(sub string, dim byte, val string, states []State) (int, error) {
	n := 0
	for _, st := range states {
		c, _, err := t.getUint64(tallyKey(sub, dim, val, st))
		if err != nil {
			return 0, err
		}
		n += int(c)
	}
	return n, nil
}

// subscriptionsParked lists the subscriptions with parked records, in key
// order, from the per-state counts.
func (t *kvTx) subscriptionsParked() ([]string, error) {
	var subs []string
	err := t.scan([]byte{kindCount}, nil, func(k, _ []byte) (bool, error) {
		parts, err := splitLP(k[1:])
		if err != nil || len(parts) != 2 {
			return false, fmt.Errorf("%w: count key %q", errBadKey, k)
		}
		if n := len(subs); n == 0 || subs[n-1] != parts[0] {
			subs = append(subs, parts[0])
		}
		return true, nil
	})
	return subs, err
}

// matchSummary reports whether a record passes f's conditions, checked on
// its summary and its key.
func matchSummary(f *Filter, lowerMessage, aggType string, s *summary) bool {
	switch {
	case f.AggregateType != "" && aggType != f.AggregateType,
		f.State != "" && s.state != f.State,
		!f.FailedAfter.IsZero() && s.first.Before(f.FailedAfter),
		!f.FailedBefore.IsZero() && !s.first.Before(f.FailedBefore),
		lowerMessage != "" && !strings.Contains(s.message, lowerMessage),
		f.Group != "" && s.group != f.Group:
		return false
	case f.Class != "":
		for _, c := range s.classes {
			if c == f.Class {
				return true
			}
		}
		return false
	}
	return true
}

func statesOf(f *Filter) []State {
	if f.State != "" {
		return []State{f.State}
	}
	return []State{StateRetrying, StateWaiting, StateResuming}
}
