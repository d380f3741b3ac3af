package jetstream

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/berthhq/berth/internal/lpcodec"
)

// A transaction's message on the stream, in this binary form (uv: uvarint,
// lp: uvarint length then the bytes):
//
//	format(1) = 1
//	snapshot uv                     the stream sequence its reads saw
//	uv n, n × lp(key)               keys it read
//	uv n, n × (lp(start) lp(end))   key ranges it iterated; empty end: no bound
//	uv n, n × (op(1) lp(key) [lp(value)])
//	                                its writes: op 1 sets (value follows), 2 deletes
//
// A message of one byte, format 2 (floorFormat), is a compaction point
// instead (see compact.go): every transaction after it whose snapshot is
// before it aborts.
//
// Every host decodes and applies the same bytes alike, so the format only
// ever grows by a new format byte, under a new Layout; a host that meets a
// format it does not read stops its cache (it cannot decide the message as
// the others do) rather than skip it.
const messageFormat = 1

// floorFormat is the format byte of a compaction point's message.
const floorFormat = 2

// isFloor reports whether data is a compaction point's message.
func isFloor(data []byte) bool { return len(data) == 1 && data[0] == floorFormat }

const (
	opSet    = 1
	opDelete = 2
)

// txMessage is one transaction as the stream carries it.
type txMessage struct {
	snapshot uint64
	reads    [][]byte
	ranges   []keyRange
	keys     [][]byte // written keys, in order
	writes   []write  // writes[i] is to keys[i]
}

// messageOf builds the message of what r recorded at snapshot.
func messageOf(r *recorder, snapshot uint64) *txMessage {
	m := &txMessage{snapshot: snapshot, ranges: r.ranges}
	for _, k := range r.readKeys() {
		m.reads = append(m.reads, []byte(k))
	}
	for _, k := range sortedKeys(r.writes) {
		m.keys = append(m.keys, []byte(k))
		m.writes = append(m.writes, r.writes[k])
	}
	return m
}

func (m *txMessage) encode() []byte {
	b := []byte{messageFormat}
	b = binary.AppendUvarint(b, m.snapshot)
	b = binary.AppendUvarint(b, uint64(len(m.reads)))
	for _, k := range m.reads {
		b = lpcodec.AppendLP(b, k)
	}
	b = binary.AppendUvarint(b, uint64(len(m.ranges)))
	for _, r := range m.ranges {
		b = lpcodec.AppendLP(lpcodec.AppendLP(b, r.start), r.end)
	}
	b = binary.AppendUvarint(b, uint64(len(m.keys)))
	for i, k := range m.keys {
		w := m.writes[i]
		if w.del {
			b = lpcodec.AppendLP(append(b, opDelete), k)
			continue
		}
		b = lpcodec.AppendLP(lpcodec.AppendLP(append(b, opSet), k), w.value)
	}
	return b
}

var errMalformed = errors.New("malformed transaction message")

func decodeMessage(b []byte) (*txMessage, error) {
	d := lpcodec.NewReader(b, errMalformed)
	if f := d.Byte(); d.Err == nil && f != messageFormat {
		return nil, fmt.Errorf("%w: a transaction message of format %d (this host reads %d)", ErrLayout, f, messageFormat)
	}
	m := &txMessage{snapshot: d.Uvarint()}
	for range d.Count() {
		m.reads = append(m.reads, d.LP())
	}
	for range d.Count() {
		start := d.LP()
		end := d.LP()
		if len(end) == 0 {
			end = nil
		}
		m.ranges = append(m.ranges, keyRange{start: start, end: end})
	}
	for range d.Count() {
		op := d.Byte()
		m.keys = append(m.keys, d.LP())
		switch op {
		case opSet:
			m.writes = append(m.writes, write{value: d.LP()})
		case opDelete:
			m.writes = append(m.writes, write{del: true})
		default:
			d.Fail()
		}
	}
	if d.Len() != 0 {
		d.Fail()
	}
	if d.Err != nil {
		return nil, d.Err
	}
	return m, nil
}
