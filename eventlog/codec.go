package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"
)

// A stored commit is a compact binary record (the position is its key):
//
//	byte     codec version (commitCodec)
//	uvarint  aggregate version
//	varint   time, Unix seconds
//	uvarint  time, nanoseconds within the second
//	lp       aggregate type
//	lp       aggregate id
//	lp       owner id
//	uvarint  number of events
//	then per event: lp type, lp payload
//
// where lp is a uvarint length followed by that many bytes. Time keeps
// nanosecond precision for any year and is read back in UTC.
const commitCodec = 1

var errCorrupt = errors.New("eventlog: corrupt commit")

// AppendCommit appends the stored form of c (Position excluded) to b. Every
// Log implementation stores commits in this form, so that a commit reads back
// the same from each.
func AppendCommit(b []byte, c *Commit) []byte {
	b = append(b, commitCodec)
	b = binary.AppendUvarint(b, c.Version)
	b = binary.AppendVarint(b, c.Time.Unix())
	b = binary.AppendUvarint(b, uint64(c.Time.Nanosecond()))
	b = appendLP(b, c.AggregateType)
	b = appendLP(b, c.AggregateID)
	b = appendLP(b, c.OwnerID)
	b = binary.AppendUvarint(b, uint64(len(c.Events)))
	for _, e := range c.Events {
		b = appendLP(b, e.Type)
		b = binary.AppendUvarint(b, uint64(len(e.Payload)))
		b = append(b, e.Payload...)
	}
	return b
}

// EncodedSize is an upper bound of len(AppendCommit(nil, c)).
func EncodedSize(c *Commit) int {
	n := 1 + 3*binary.MaxVarintLen64 + 4*binary.MaxVarintLen64 + len(c.AggregateType) + len(c.AggregateID) + len(c.OwnerID)
	for _, e := range c.Events {
		n += 2*binary.MaxVarintLen64 + len(e.Type) + len(e.Payload)
	}
	return n
}

// decoder reads the fields of an encoded commit; the first error sticks.
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
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errCorrupt
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns a length-prefixed field as a sub-slice of the buffer
// (capacity-limited, so appending to it never overwrites the next field).
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errCorrupt
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// str returns a length-prefixed field as a string that shares the buffer's
// bytes (no copy): DecodeCommit's buffer is the commit's own and never
// changes after it (see there).
func (d *decoder) str() string {
	v := d.bytes()
	if len(v) == 0 {
		return ""
	}
	return unsafe.String(&v[0], len(v))
}

// DecodeCommit decodes the commit at pos from b, which it keeps: the
// commit's strings and event payloads are views of b, not copies, so b is
// the commit's from then on and must never be changed or reused (the
// payloads are capacity-limited, so appending to one never writes into b).
// A malformed b is an error naming pos. The Badger log's Read gives it one copy of the stored value per commit; that copy is the
// commit's only allocation besides its Events.
func DecodeCommit(pos uint64, b []byte) (Commit, error) {
	if len(b) == 0 || b[0] != commitCodec {
		return Commit{}, fmt.Errorf("%w at position %d: unknown codec", errCorrupt, pos)
	}
	d := decoder{b: b[1:]}
	c := Commit{Position: pos, Version: d.uvarint()}
	sec := d.varint()
	nsec := d.uvarint()
	c.Time = time.Unix(sec, int64(nsec)).UTC()
	c.AggregateType = d.str()
	c.AggregateID = d.str()
	c.OwnerID = d.str()
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) { // every event takes at least 2 bytes
		d.err = errCorrupt
	}
	if d.err == nil {
		c.Events = make([]Event, 0, n)
		for i := uint64(0); i < n && d.err == nil; i++ {
			c.Events = append(c.Events, Event{Type: d.str(), Payload: d.bytes()})
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errCorrupt
	}
	if d.err != nil || nsec >= 1e9 {
		return Commit{}, fmt.Errorf("%w at position %d", errCorrupt, pos)
	}
	return c, nil
}
