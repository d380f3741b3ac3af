// Package kvtx is the small ordered key-value transaction the ledger's Tx
// logic is written on: point reads and writes and a prefix iterator with
// seek, nothing more. The Badger store adapts a *badger.Txn to it (Badger);
// ledger/jetstream wraps that adapter to record what a transaction read and
// wrote. It is internal to the ledger tree: no other package sees it.
package kvtx

import (
	"bytes"
	"errors"
)

// Errors of every Txn.
var (
	// ErrNotFound: Get found no value under the key.
	ErrNotFound = errors.New("kvtx: key not found")
	// ErrTooBig: a write would make the transaction larger than its store
	// commits at once.
	ErrTooBig = errors.New("kvtx: transaction too big")
	// ErrReadOnly: a write in a read-only transaction.
	ErrReadOnly = errors.New("kvtx: write in a read-only transaction")
)

// Txn is one transaction on an ordered key-value store: its reads see its
// own writes. It is used by one goroutine.
type Txn interface {
	// Get returns the value under key (the caller must not change it, and
	// may keep it), ErrNotFound if there is none.
	Get(key []byte) ([]byte, error)
	// Set stores value under key; the store may keep both slices until the
	// transaction ends, so the caller must not change them.
	Set(key, value []byte) error
	// Delete removes key; removing what is not there is no error.
	Delete(key []byte) error
	// Iterate returns an iterator over the keys starting with prefix, in
	// byte order. values says the caller reads the values (a store may
	// prefetch them). Only one iterator may be open at a time; Close it.
	Iterate(prefix []byte, values bool) Iterator
}

// Iterator walks the keys under one prefix in byte order. It starts
// invalid: Seek first.
type Iterator interface {
	// Seek moves to the first key under the prefix at or after key.
	Seek(key []byte)
	// Valid reports whether the iterator is at a key under the prefix.
	Valid() bool
	// Next moves to the next key.
	Next()
	// Key returns the current key, valid until the next move.
	Key() []byte
	// Value returns a copy of the current value.
	Value() ([]byte, error)
	// Close releases the iterator.
	Close()
}

// PrefixEnd returns the first key after every key starting with prefix,
// nil when there is none (a prefix of 0xff bytes only, or none).
func PrefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for len(end) > 0 {
		if last := len(end) - 1; end[last] < 0xff {
			end[last]++
			return end
		}
		end = end[:len(end)-1]
	}
	return nil
}
