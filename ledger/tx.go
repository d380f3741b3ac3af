package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/berthhq/berth/ledger/internal/kvtx"
)

var errEnded = errors.New("ledger: transaction used after it ended")

// kvTx is the one implementation of Tx, on an ordered key-value
// transaction: it owns the key layout (keys.go) every role is kept in. Every
// store of the ledger tree runs its transactions through it (the Badger
// store, and ledger/jetstream through OnKV), so they agree to the byte. Its methods are documented on the roles they implement. A
// failed write sets err, which End returns, so that the store fails the
// commit even if the closure ignored the error.
type kvTx struct {
	txn      kvtx.Txn
	readOnly bool
	ended    bool
	err      error
	bytes    int64 // keys and values written, for the space guard
}

var _ Tx = (*kvTx)(nil)

// newKVTx returns a Tx running on txn; readOnly makes its writes fail with
// ErrReadOnly (a View).
func newKVTx(txn kvtx.Txn, readOnly bool) *kvTx {
	return &kvTx{txn: txn, readOnly: readOnly}
}

// OnKV returns a Tx running on txn, for a store of the ledger tree (only
// they can name a kvtx.Txn), and end, which ends it: later calls through
// it fail, and end returns the bytes of keys and values it wrote and the
// first write that failed (nil if none did), which must fail the commit.
// readOnly makes its writes fail with ErrReadOnly (a View).
func OnKV(txn kvtx.Txn, readOnly bool) (tx Tx, end func() (written int64, err error)) {
	t := newKVTx(txn, readOnly)
	return t, t.End
}

// End ends the transaction: later calls through it fail. It returns the
// bytes of keys and values it wrote and the first write that failed (nil
// if none did), which must fail the commit.
func (t *kvTx) End() (written int64, err error) {
	t.ended = true
	return t.bytes, t.err
}

// checkWrite fails a write in a View or after the transaction ended.
func (t *kvTx) checkWrite(op string) error {
	switch {
	case t.ended:
		return fmt.Errorf("%s: %w", op, errEnded)
	case t.readOnly:
		return fmt.Errorf("%w: %s", ErrReadOnly, op)
	}
	return nil
}

func (t *kvTx) checkRead(op string) error {
	if t.ended {
		return fmt.Errorf("%s: %w", op, errEnded)
	}
	return nil
}

// fail records a write error (the first one sticks) and returns it.
func (t *kvTx) fail(op string, err error) error {
	err = fmt.Errorf("ledger: %s: %w", op, mapErr(err))
	if t.err == nil {
		t.err = err
	}
	return err
}

func (t *kvTx) set(op string, k, v []byte) error {
	if err := t.txn.Set(k, v); err != nil {
		return t.fail(op, err)
	}
	t.bytes += int64(len(k) + len(v))
	return nil
}

func (t *kvTx) delete(op string, k []byte) error {
	if err := t.txn.Delete(k); err != nil {
		return t.fail(op, err)
	}
	t.bytes += int64(len(k))
	return nil
}

// mapErr turns kvtx's errors into the ledger's.
func mapErr(err error) error {
	switch {
	case errors.Is(err, kvtx.ErrNotFound):
		return ErrNotFound
	case errors.Is(err, kvtx.ErrTooBig):
		return fmt.Errorf("%w: %w", ErrTooBig, err)
	case errors.Is(err, kvtx.ErrReadOnly):
		return ErrReadOnly
	}
	return err
}

// get returns a copy of the value under k, ErrNotFound if there is none.
func (t *kvTx) get(k []byte) ([]byte, error) {
	v, err := t.txn.Get(k)
	if err != nil {
		return nil, mapErr(err)
	}
	return v, nil
}

// getUint64 reads an 8-byte number, 0 and false if none is stored.
func (t *kvTx) getUint64(k []byte) (uint64, bool, error) {
	v, err := t.get(k)
	if errors.Is(err, ErrNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	n, err := decodeUint64(k, v)
	return n, err == nil, err
}

// decodeUint64 decodes the 8-byte number v stored under k.
func decodeUint64(k, v []byte) (uint64, error) {
	if len(v) != 8 {
		return 0, fmt.Errorf("ledger: corrupt number under key %q", k)
	}
	return binary.BigEndian.Uint64(v), nil
}

// keysWithPrefix returns copies of up to n (n < 0: all) keys starting with
// prefix.
func (t *kvTx) keysWithPrefix(prefix []byte, n int) [][]byte {
	var out [][]byte
	it := t.txn.Iterate(prefix, false)
	defer it.Close()
	for it.Seek(prefix); it.Valid() && (n < 0 || len(out) < n); it.Next() {
		out = append(out, append([]byte(nil), it.Key()...))
	}
	return out
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
