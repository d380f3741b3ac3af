package eventlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

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
	c, err := NewCommit(req)
	if err != nil {
		return Commit{}, err
	}
	if err := b.enter(); err != nil {
		return Commit{}, err
	}
	defer b.life.RUnlock()
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
	if err := CheckVersion(&req, current); err != nil {
		return Commit{}, err
	}
	c.Version = current + 1
	c.Position = b.head.Load() + 1
	value := AppendCommit(make([]byte, 0, EncodedSize(&c)), &c)
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
		return Commit{}, fmt.Errorf("%w: commit of %d events is too large for one transaction (raise MemTableSize)", ErrInvalid, len(c.Events))
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
