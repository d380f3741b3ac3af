package eventlog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// ctxCheckEvery is how many commits a read handles between looks at its
// context.
const ctxCheckEvery = 64

// Read returns up to limit commits (DefaultReadLimit when limit <= 0) with
// Position >= from, in position order; from 0 reads from the start. All
// commits come from one snapshot of the log.
func (b *Badger) Read(ctx context.Context, from uint64, limit int) ([]Commit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.life.RUnlock()
	limit = ReadLimit(limit)
	if from == 0 {
		from = 1
	}
	if head := b.head.Load(); from > head {
		return nil, nil
	} else if n := head - from + 1; n < uint64(limit) {
		limit = int(n) // for the capacity below only
	}

	commits := make([]Commit, 0, limit)
	err := b.db.View(func(txn *badger.Txn) error {
		// No prefetch: a commit's value sits in the LSM tree with its key
		// (the value threshold is far above a commit's size), so Badger's
		// prefetch would only start a goroutine per item to copy what
		// Value reads in place anyway; decodeItem makes the one copy.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{kindPosition}})
		defer it.Close()
		for it.Seek(positionKey(from)); it.Valid() && len(commits) < cap(commits); it.Next() {
			if len(commits)%ctxCheckEvery == ctxCheckEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			item := it.Item()
			pos := binary.BigEndian.Uint64(item.Key()[1:])
			c, err := decodeItem(pos, item)
			if err != nil {
				return err
			}
			commits = append(commits, c)
		}
		return nil
	})
	if err != nil {
		return nil, readErr(err)
	}
	return commits, nil
}

// ReadAggregate returns up to limit commits (DefaultReadLimit when limit <=
// 0) of one aggregate with Version >= fromVersion, in version order. An
// unknown aggregate has no commits (no error).
func (b *Badger) ReadAggregate(ctx context.Context, aggregateType, aggregateID string, fromVersion uint64, limit int) ([]Commit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := b.enter(); err != nil {
		return nil, err
	}
	defer b.life.RUnlock()
	limit = ReadLimit(limit)

	var commits []Commit
	err := b.db.View(func(txn *badger.Txn) error {
		prefix := aggregatePrefix(aggregateType, aggregateID)
		// The index's values are 8-byte positions: no prefetch (see Read).
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(binary.BigEndian.AppendUint64(prefix, fromVersion)); it.Valid() && len(commits) < limit; it.Next() {
			if len(commits)%ctxCheckEvery == ctxCheckEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			var pos uint64
			if err := it.Item().Value(func(v []byte) error {
				if len(v) != 8 {
					return fmt.Errorf("%w: aggregate index holds %d bytes", errCorrupt, len(v))
				}
				pos = binary.BigEndian.Uint64(v)
				return nil
			}); err != nil {
				return err
			}
			item, err := txn.Get(positionKey(pos))
			if err != nil {
				return fmt.Errorf("%w: aggregate index points at position %d: %w", errCorrupt, pos, err)
			}
			c, err := decodeItem(pos, item)
			if err != nil {
				return err
			}
			commits = append(commits, c)
		}
		return nil
	})
	if err != nil {
		return nil, readErr(err)
	}
	return commits, nil
}

// decodeItem decodes the commit item holds. The item's value is valid only
// inside Value's callback (it is Badger's buffer, reused after Next), and
// the commit outlives it: its one copy is made here, and DecodeCommit takes
// its strings and payloads from that copy.
func decodeItem(pos uint64, item *badger.Item) (c Commit, err error) {
	err = item.Value(func(v []byte) error {
		c, err = DecodeCommit(pos, bytes.Clone(v))
		return err
	})
	return c, err
}

// readErr wraps a read failure, leaving context errors as they are.
func readErr(err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("eventlog: read: %w", err)
}

// Head returns the position of the last commit (0 for an empty log).
func (b *Badger) Head(ctx context.Context) (uint64, error) {
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.life.RUnlock()
	return b.head.Load(), nil
}

// Version returns an aggregate's current version (0 if it has none).
func (b *Badger) Version(ctx context.Context, aggregateType, aggregateID string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := b.enter(); err != nil {
		return 0, err
	}
	defer b.life.RUnlock()
	var v uint64
	err := b.db.View(func(txn *badger.Txn) (err error) {
		v, err = readVersion(txn, versionKey(aggregateType, aggregateID))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("eventlog: version: %w", err)
	}
	return v, nil
}
