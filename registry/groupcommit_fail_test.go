package registry_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/diskspace"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/subscription"
)

// countingStore is a ledger whose Updates are counted; it is the real
// store underneath.
type countingStore struct {
	ledger.Store
	updates atomic.Int64
}

func (s *countingStore) Update(ctx context.Context, fn func(ledger.Tx) error) error {
	s.updates.Add(1)
	return s.Store.Update(ctx, fn)
}

// A group the store refuses (its disk guard, a real diskspace.Guard above
// the free space) fails every one of its calls in that one transaction,
// each told the store's error and none applied: the calls are not applied
// one by one, each meeting the store's failure again (a group holds up to
// subscription.projection-writers calls). Once the store takes writes
// again, the same writes are applied.
func TestGroupCommitRefusedFailsTheGroupAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	guard, err := diskspace.New(dir, diskspace.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { guard.Close() })
	store, err := ledger.Open(dir, ledger.Options{Space: guard})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close(context.Background()) })
	counted := &countingStore{Store: store}
	proj := registry.NewProjections(counted, func() int { return 64 }, nil)
	proj.Wait() // its sweep of retired read models
	const sub, calls = "P.h", 32
	apply := func(reserve int64) []error {
		guard.SetReserve(0)
		release := holdStore(t, store)
		guard.SetReserve(reserve) // the held transaction was let in
		before := counted.updates.Load()
		results := make([]chan error, calls)
		for i := range calls {
			kv := registry.NewCallKV(ctx, counted, sub)
			_ = kv.Put(fmt.Sprint("k", i), []byte("v"))
			d := &subscription.Delivery{Commit: eventlog.Commit{AggregateType: "A", AggregateID: fmt.Sprint("a", i), Version: 1,
				Events: []eventlog.Event{{Type: "X"}}}}
			results[i] = make(chan error, 1)
			go func() { results[i] <- proj.Apply(ctx, sub, kv, d) }()
			// The first call's group waits for the held store; the others
			// queue for the next.
			projEventually(t, func() error { return waiting(proj, i+1) })
		}
		release()
		errs := make([]error, calls)
		for i := range calls {
			errs[i] = <-results[i]
		}
		if n := counted.updates.Load() - before; n != 2 {
			t.Errorf("%d transactions for a group of 1 and one of %d; want 2", n, calls-1)
		}
		return errs
	}

	for i, err := range apply(1 << 62) { // more than any disk has free
		if _, ok := errors.AsType[*diskspace.Error](err); !ok {
			t.Errorf("call %d: %v, want the disk guard's refusal", i, err)
		}
	}
	read := func(key string) error {
		return store.View(ctx, func(tx ledger.Tx) error {
			_, err := tx.ProjectionGet(sub, key)
			return err
		})
	}
	for i := range calls {
		if err := read(fmt.Sprint("k", i)); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("key k%d after the refusal: %v, want not found", i, err)
		}
	}

	for i, err := range apply(0) {
		if err != nil {
			t.Errorf("call %d once the store takes writes: %v", i, err)
		}
		if err := read(fmt.Sprint("k", i)); err != nil {
			t.Errorf("key k%d: %v", i, err)
		}
	}
}
