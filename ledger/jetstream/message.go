package jetstream

import (
	"encoding/binary"
	"errors"
	"fmt"
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
// Every host decodes and applies the same bytes alike, so the format only
// ever grows by a new format byte that every host reads.
const messageFormat = 1

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

func appendLP(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (m *txMessage) encode() []byte {
	b := []byte{messageFormat}
	b = binary.AppendUvarint(b, m.snapshot)
	b = binary.AppendUvarint(b, uint64(len(m.reads)))
	for _, k := range m.reads {
		b = appendLP(b, k)
	}
	b = binary.AppendUvarint(b, uint64(len(m.ranges)))
	for _, r := range m.ranges {
		b = appendLP(appendLP(b, r.start), r.end)
	}
	b = binary.AppendUvarint(b, uint64(len(m.keys)))
	for i, k := range m.keys {
		w := m.writes[i]
		if w.del {
			b = appendLP(append(b, opDelete), k)
			continue
		}
		b = appendLP(appendLP(append(b, opSet), k), w.value)
	}
	return b
}

var errMalformed = errors.New("malformed transaction message")

// decoder reads a message; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errMalformed
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte() byte {
	if d.err != nil || len(d.b) == 0 {
		d.err = errMalformed
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) lp() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.err = errMalformed
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

// count reads a number of items, each at least one byte long.
func (d *decoder) count() int {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err = errMalformed
		return 0
	}
	return int(n)
}

func decodeMessage(b []byte) (*txMessage, error) {
	d := &decoder{b: b}
	if f := d.byte(); d.err == nil && f != messageFormat {
		return nil, fmt.Errorf("transaction message of format %d (this host reads %d)", f, messageFormat)
	}
	m := &txMessage{snapshot: d.uvarint()}
	for range d.count() {
		m.reads = append(m.reads, d.lp())
	}
	for range d.count() {
		start := d.lp()
		end := d.lp()
		if len(end) == 0 {
			end = nil
		}
		m.ranges = append(m.ranges, keyRange{start: start, end: end})
	}
	for range d.count() {
		op := d.byte()
		m.keys = append(m.keys, d.lp())
		switch op {
		case opSet:
			m.writes = append(m.writes, write{value: d.lp()})
		case opDelete:
			m.writes = append(m.writes, write{del: true})
		default:
			d.err = errMalformed
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errMalformed
	}
	if d.err != nil {
		return nil, d.err
	}
	return m, nil
}
