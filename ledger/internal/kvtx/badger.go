package kvtx

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Badger adapts a Badger transaction to Txn. Badger's own errors come back
// as this package's (ErrNotFound, ErrTooBig, ErrReadOnly), wrapped.
func Badger(txn *badger.Txn) Txn { return badgerTxn{txn} }

type badgerTxn struct{ txn *badger.Txn }

func (b badgerTxn) Get(key []byte) ([]byte, error) {
	item, err := b.txn.Get(key)
	if err != nil {
		return nil, mapErr(err)
	}
	v, err := item.ValueCopy(nil)
	if err == nil && v == nil {
		v = []byte{}
	}
	return v, mapErr(err)
}

func (b badgerTxn) Set(key, value []byte) error { return mapErr(b.txn.Set(key, value)) }

func (b badgerTxn) Delete(key []byte) error { return mapErr(b.txn.Delete(key)) }

func (b badgerTxn) Iterate(prefix []byte, values bool) Iterator {
	opts := badger.IteratorOptions{Prefix: prefix, PrefetchValues: values}
	if values {
		opts.PrefetchSize = 100
	}
	return badgerIter{b.txn.NewIterator(opts)}
}

type badgerIter struct{ it *badger.Iterator }

func (i badgerIter) Seek(key []byte) { i.it.Seek(key) }
func (i badgerIter) Valid() bool     { return i.it.Valid() }
func (i badgerIter) Next()           { i.it.Next() }
func (i badgerIter) Key() []byte     { return i.it.Item().Key() }
func (i badgerIter) Close()          { i.it.Close() }

func (i badgerIter) Value() ([]byte, error) {
	v, err := i.it.Item().ValueCopy(nil)
	if err == nil && v == nil {
		v = []byte{}
	}
	return v, err
}

// mapErr turns Badger's errors into this package's, keeping Badger's text.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, badger.ErrKeyNotFound):
		return ErrNotFound
	case errors.Is(err, badger.ErrTxnTooBig):
		return fmt.Errorf("%w: %w", ErrTooBig, err)
	case errors.Is(err, badger.ErrReadOnlyTxn):
		return ErrReadOnly
	}
	return err
}
