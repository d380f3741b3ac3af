package eventlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/berthhq/berth/internal/lpcodec"
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
//	lp       traceparent (codec 2 only)
//	uvarint  number of events
//	then per event: lp type, lp payload
//
// where lp is a uvarint length followed by that many bytes. Time keeps
// nanosecond precision for any year and is read back in UTC. A commit with
// no traceparent is written in codec 1, as before there was one, so that a
// host of an earlier version reads every commit that has none.
const (
	commitCodec      = 1
	commitCodecTrace = 2
)

var errCorrupt = errors.New("eventlog: corrupt commit")

// AppendCommit appends the stored form of c (Position excluded) to b. Every
// Log implementation stores commits in this form, so that a commit reads back
// the same from each.
func AppendCommit(b []byte, c *Commit) []byte {
	if c.Traceparent == "" {
		b = append(b, commitCodec)
	} else {
		b = append(b, commitCodecTrace)
	}
	b = binary.AppendUvarint(b, c.Version)
	b = binary.AppendVarint(b, c.Time.Unix())
	b = binary.AppendUvarint(b, uint64(c.Time.Nanosecond()))
	b = lpcodec.AppendLP(b, c.AggregateType)
	b = lpcodec.AppendLP(b, c.AggregateID)
	b = lpcodec.AppendLP(b, c.OwnerID)
	if c.Traceparent != "" {
		b = lpcodec.AppendLP(b, c.Traceparent)
	}
	b = binary.AppendUvarint(b, uint64(len(c.Events)))
	for _, e := range c.Events {
		b = lpcodec.AppendLP(b, e.Type)
		b = lpcodec.AppendLP(b, e.Payload)
	}
	return b
}

// EncodedSize is an upper bound of len(AppendCommit(nil, c)).
func EncodedSize(c *Commit) int {
	n := 1 + 3*binary.MaxVarintLen64 + 4*binary.MaxVarintLen64 + len(c.AggregateType) + len(c.AggregateID) + len(c.OwnerID) +
		binary.MaxVarintLen64 + len(c.Traceparent)
	for _, e := range c.Events {
		n += 2*binary.MaxVarintLen64 + len(e.Type) + len(e.Payload)
	}
	return n
}

// str returns a length-prefixed field as a string that shares the buffer's
// bytes (no copy): DecodeCommit's buffer is the commit's own and never
// changes after it (see there).
func str(d *lpcodec.Reader) string {
	v := d.LP()
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
	if len(b) == 0 || (b[0] != commitCodec && b[0] != commitCodecTrace) {
		return Commit{}, fmt.Errorf("%w at position %d: unknown codec", errCorrupt, pos)
	}
	d := lpcodec.NewReader(b[1:], errCorrupt)
	c := Commit{Position: pos, Version: d.Uvarint()}
	sec := d.Varint()
	nsec := d.Uvarint()
	c.Time = time.Unix(sec, int64(nsec)).UTC()
	c.AggregateType = str(&d)
	c.AggregateID = str(&d)
	c.OwnerID = str(&d)
	if b[0] == commitCodecTrace {
		c.Traceparent = str(&d)
	}
	n := d.Count() // every event takes at least 2 bytes
	if d.Err == nil {
		c.Events = make([]Event, 0, n)
		for i := 0; i < n && d.Err == nil; i++ {
			c.Events = append(c.Events, Event{Type: str(&d), Payload: d.LP()})
		}
	}
	if d.Len() != 0 {
		d.Fail()
	}
	if d.Err != nil || nsec >= 1e9 {
		return Commit{}, fmt.Errorf("%w at position %d", errCorrupt, pos)
	}
	return c, nil
}
