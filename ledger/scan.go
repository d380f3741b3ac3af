package ledger

// scan calls fn with each key under prefix from start on, in key order, and
// its value (valid only during the call), until fn returns false or an
// error. The ledger's newer records (jobs, audit, resolved parks) read
// through it alone.
func (t *kvTx) scan(prefix, start []byte, fn func(k, v []byte) (bool, error)) error {
	it := t.txn.Iterate(prefix, true)
	defer it.Close()
	if len(start) < len(prefix) {
		start = prefix
	}
	for it.Seek(start); it.Valid(); it.Next() {
		v, err := it.Value()
		if err != nil {
			return err
		}
		more, err := fn(it.Key(), v)
		if err != nil || !more {
			return err
		}
	}
	return nil
}
