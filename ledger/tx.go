package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

var errEnded = errors.New("ledger: transaction used after it ended")

// badgerTx is one transaction. A failed write sets err, which fails the whole
// Update even if the closure ignores it, so a transaction never commits half
// of what it meant to.
type badgerTx struct {
	txn      *badger.Txn
	readOnly bool
	ended    bool
	err      error
	bytes    int64 // keys and values written, for the space guard
}

var _ Tx = (*badgerTx)(nil)

// checkWrite fails a write in a View or after the transaction ended.
func (t *badgerTx) checkWrite(op string) error {
	switch {
	case t.ended:
		return fmt.Errorf("%s: %w", op, errEnded)
	case t.readOnly:
		return fmt.Errorf("%w: %s", ErrReadOnly, op)
	}
	return nil
}

func (t *badgerTx) checkRead(op string) error {
	if t.ended {
		return fmt.Errorf("%s: %w", op, errEnded)
	}
	return nil
}

// fail records a write error (the first one sticks) and returns it.
func (t *badgerTx) fail(op string, err error) error {
	err = fmt.Errorf("ledger: %s: %w", op, mapErr(err))
	if t.err == nil {
		t.err = err
	}
	return err
}

func (t *badgerTx) set(op string, k, v []byte) error {
	if err := t.txn.Set(k, v); err != nil {
		return t.fail(op, err)
	}
	t.bytes += int64(len(k) + len(v))
	return nil
}

func (t *badgerTx) delete(op string, k []byte) error {
	if err := t.txn.Delete(k); err != nil {
		return t.fail(op, err)
	}
	t.bytes += int64(len(k))
	return nil
}

// get returns a copy of the value under k, ErrNotFound if there is none.
func (t *badgerTx) get(k []byte) ([]byte, error) {
	item, err := t.txn.Get(k)
	if err != nil {
		return nil, mapErr(err)
	}
	v, err := item.ValueCopy(nil)
	if err == nil && v == nil {
		v = []byte{}
	}
	return v, err
}

// getUint64 reads an 8-byte number, 0 and false if none is stored.
func (t *badgerTx) getUint64(k []byte) (uint64, bool, error) {
	v, err := t.get(k)
	if errors.Is(err, ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("ledger: corrupt number under key %q", k)
	}
	return binary.BigEndian.Uint64(v), true, nil
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
