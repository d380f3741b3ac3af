package ledger

import "github.com/dgraph-io/badger/v4"

// scan calls fn with each key under prefix from start on, in key order, and
// its value (valid only during the call), until fn returns false or an
// error. The ledger's newer records (jobs, audit, resolved parks) read
// through it alone, so a store other than Badger needs only this.
func (t *badgerTx) scan(prefix, start []byte, fn func(k, v []byte) (bool, error)) error {
	it := t.txn.NewIterator(badger.IteratorOptions{PrefetchValues: true, PrefetchSize: 64, Prefix: prefix})
	defer it.Close()
	if len(start) < len(prefix) {
		start = prefix
	}
	for it.Seek(start); it.Valid(); it.Next() {
		item := it.Item()
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		more, err := fn(item.Key(), v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}
