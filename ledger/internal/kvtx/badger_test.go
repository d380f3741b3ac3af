package kvtx

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

func openBadger(t *testing.T) *badger.DB {
	t.Helper()
	// A small memtable bounds a transaction at a few hundred KiB.
	db, err := badger.Open(badger.DefaultOptions(t.TempDir()).WithLogger(nil).WithMemTableSize(4 << 20).WithValueThreshold(64 << 10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestBadgerTxnReadsItsWritesAndIteratesAPrefix checks the adapter on a
// real Badger: reads see the transaction's own writes, an empty value
// reads as empty (not missing), a delete makes Get say ErrNotFound, and an
// iterator walks only its prefix, in byte order, from where it seeks.
func TestBadgerTxnReadsItsWritesAndIteratesAPrefix(t *testing.T) {
	db := openBadger(t)
	err := db.Update(func(txn *badger.Txn) error {
		tx := Badger(txn)
		for _, k := range []string{"a/2", "a/1", "a/3", "b/1"} {
			if err := tx.Set([]byte(k), []byte("v"+k)); err != nil {
				return err
			}
		}
		if err := tx.Set([]byte("empty"), nil); err != nil {
			return err
		}
		if v, err := tx.Get([]byte("a/2")); err != nil || string(v) != "va/2" {
			return fmt.Errorf("Get a/2 = %q, %v", v, err)
		}
		if v, err := tx.Get([]byte("empty")); err != nil || v == nil || len(v) != 0 {
			return fmt.Errorf("Get empty = %#v, %v, want an empty, non-nil value", v, err)
		}
		if err := tx.Delete([]byte("a/3")); err != nil {
			return err
		}
		if err := tx.Delete([]byte("never")); err != nil {
			return fmt.Errorf("deleting what is not there: %v", err)
		}
		if _, err := tx.Get([]byte("a/3")); !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("Get of a deleted key = %v, want ErrNotFound", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(txn *badger.Txn) error {
		it := Badger(txn).Iterate([]byte("a/"), true)
		defer it.Close()
		var keys, values []string
		for it.Seek([]byte("a/")); it.Valid(); it.Next() {
			v, err := it.Value()
			if err != nil {
				return err
			}
			keys, values = append(keys, string(it.Key())), append(values, string(v))
		}
		if fmt.Sprint(keys) != "[a/1 a/2]" || fmt.Sprint(values) != "[va/1 va/2]" {
			return fmt.Errorf("iterated %v = %v, want [a/1 a/2] = [va/1 va/2]", keys, values)
		}
		it2 := Badger(txn).Iterate([]byte("a/"), false)
		defer it2.Close()
		it2.Seek([]byte("a/2"))
		if !it2.Valid() || !bytes.Equal(it2.Key(), []byte("a/2")) {
			return fmt.Errorf("Seek(a/2) did not land on a/2")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBadgerErrorsAreThePackages checks that Badger's own errors come
// back as this package's: a write in a read-only transaction, and a
// transaction too big to commit at once.
func TestBadgerErrorsAreThePackages(t *testing.T) {
	db := openBadger(t)
	_ = db.View(func(txn *badger.Txn) error {
		if err := Badger(txn).Set([]byte("k"), []byte("v")); !errors.Is(err, ErrReadOnly) {
			t.Errorf("Set in a view = %v, want ErrReadOnly", err)
		}
		return nil
	})
	big := make([]byte, 10<<10)
	_ = db.Update(func(txn *badger.Txn) error {
		tx := Badger(txn)
		for i := range 1000 {
			if err := tx.Set(fmt.Appendf(nil, "k%04d", i), big); err != nil {
				if !errors.Is(err, ErrTooBig) {
					t.Errorf("an oversized transaction's Set = %v, want ErrTooBig", err)
				}
				return nil
			}
		}
		t.Error("1000 writes of 10 KiB fit in one transaction")
		return nil
	})
}
