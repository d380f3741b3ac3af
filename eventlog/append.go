package eventlog

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// nullPayload is what an event with an empty payload is stored with.
var nullPayload = []byte("null")

// validate checks req and returns the events to store: an empty Payload
// (nil or zero length) is accepted and stored as JSON null, so that a reader
// always gets valid JSON.
func validate(req *AppendRequest) ([]Event, error) {
	if len(req.Events) == 0 {
		return nil, ErrEmptyCommit
	}
	switch {
	case req.AggregateType == "":
		return nil, fmt.Errorf("%w: aggregate type is empty", ErrInvalid)
	case req.AggregateID == "":
		return nil, fmt.Errorf("%w: aggregate id is empty", ErrInvalid)
	case len(req.AggregateType) > MaxNameLen:
		return nil, fmt.Errorf("%w: aggregate type is %d bytes, more than %d", ErrInvalid, len(req.AggregateType), MaxNameLen)
	case len(req.AggregateID) > MaxNameLen:
		return nil, fmt.Errorf("%w: aggregate id is %d bytes, more than %d", ErrInvalid, len(req.AggregateID), MaxNameLen)
	case len(req.OwnerID) > MaxNameLen:
		return nil, fmt.Errorf("%w: owner id is %d bytes, more than %d", ErrInvalid, len(req.OwnerID), MaxNameLen)
	case req.ExpectedVersion < AnyVersion:
		return nil, fmt.Errorf("%w: expected version %d is below AnyVersion", ErrInvalid, req.ExpectedVersion)
	}
	events := make([]Event, len(req.Events))
	for i, e := range req.Events {
		switch {
		case e.Type == "":
			return nil, fmt.Errorf("%w: event %d: type is empty", ErrInvalid, i)
		case len(e.Type) > MaxNameLen:
			return nil, fmt.Errorf("%w: event %d: type is %d bytes, more than %d", ErrInvalid, i, len(e.Type), MaxNameLen)
		case len(e.Payload) == 0:
			e.Payload = nullPayload
		case !json.Valid(e.Payload):
			return nil, fmt.Errorf("%w: event %d (%s): payload is not valid JSON", ErrInvalid, i, e.Type)
		}
		events[i] = e
	}
	return events, nil
}

// Append validates req, checks the aggregate's version and writes the commit
// at the next position. The returned commit is what Read will return: Time
// is req.Time (now when zero) in UTC, and empty payloads read as null. Its
// Events slice is new; the payloads share memory with req's. While the
// Options' Space guard refuses writes, Append fails with its
// *diskspace.Error (wrapped) and writes nothing.
func (b *Badger) Append(ctx context.Context, req AppendRequest) (Commit, error) {
	if err := ctx.Err(); err != nil {
		return Commit{}, err
	}
	events, err := validate(&req)
	if err != nil {
		return Commit{}, err
	}
	if err := b.enter(); err != nil {
		return Commit{}, err
	}
	defer b.life.RUnlock()

	t := req.Time
	if t.IsZero() {
		t = time.Now()
	}
	c := Commit{
		AggregateType: req.AggregateType,
		AggregateID:   req.AggregateID,
		OwnerID:       req.OwnerID,
		Time:          t.Round(0).UTC(),
		Events:        events,
	}
	vkey := versionKey(req.AggregateType, req.AggregateID)

	b.appendMu.Lock()
	defer b.appendMu.Unlock()
	if err := ctx.Err(); err != nil {
		return Commit{}, err
	}
	if err := b.space.Check(); err != nil {
		return Commit{}, fmt.Errorf("eventlog: append refused: %w", err)
	}
	txn := b.db.NewTransaction(true)
	defer txn.Discard()

	current, err := readVersion(txn, vkey)
	if err != nil {
		return Commit{}, fmt.Errorf("eventlog: append: %w", err)
	}
	if req.ExpectedVersion != AnyVersion && uint64(req.ExpectedVersion) != current {
		return Commit{}, fmt.Errorf("%w: %s %q is at version %d, expected %d",
			ErrVersionConflict, req.AggregateType, req.AggregateID, current, req.ExpectedVersion)
	}
	c.Version = current + 1
	c.Position = b.head.Load() + 1
	value := encodeCommit(make([]byte, 0, encodedSize(&c)), &c)
	pkey, akey := positionKey(c.Position), aggregateKey(c.AggregateType, c.AggregateID, c.Version)
	err = errors.Join(
		txn.Set(pkey, value),
		txn.Set(akey, binary.BigEndian.AppendUint64(nil, c.Position)),
		txn.Set(vkey, binary.BigEndian.AppendUint64(nil, c.Version)),
	)
	if err == nil {
		err = txn.Commit()
	}
	switch {
	case errors.Is(err, badger.ErrTxnTooBig):
		return Commit{}, fmt.Errorf("%w: commit of %d events is too large for one transaction (raise MemTableSize)", ErrInvalid, len(events))
	case err != nil:
		return Commit{}, fmt.Errorf("eventlog: append: %w", err)
	}
	b.space.Wrote(int64(len(pkey) + len(value) + len(akey) + len(vkey) + 16))
	b.head.Store(c.Position)
	b.wake()
	return c, nil
}

// readVersion returns the version stored under vkey, 0 if none.
func readVersion(txn *badger.Txn, vkey []byte) (uint64, error) {
	item, err := txn.Get(vkey)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var v uint64
	err = item.Value(func(b []byte) error {
		if len(b) != 8 {
			return fmt.Errorf("%w: version key holds %d bytes", errCorrupt, len(b))
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	return v, err
}
