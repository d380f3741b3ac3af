package jetstream_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/berthhq/berth/ledger"
)

// TestUpdateGivesUpByItsOwnDeadline: Updates run one at a time, and one
// waiting behind a slow one (its closure still running, as when NATS does
// not answer) ends by its own context's deadline, not the slow one's, and
// says why; the slow one then commits.
func TestUpdateGivesUpByItsOwnDeadline(t *testing.T) {
	n := natstest.RunServer(t)
	o := optionsFor(t.Name(), 1)
	o.Dir = t.TempDir()
	s := open(t, connect(t, n.URL()), o)
	t.Cleanup(func() { s.Close(context.Background()) })
	inside, release := make(chan struct{}), make(chan struct{})
	slow := make(chan error, 1)
	go func() {
		slow <- s.Update(context.Background(), func(tx ledger.Tx) error {
			close(inside)
			<-release
			return tx.SetMeta("s", "k", []byte("slow"))
		})
	}()
	<-inside
	// Released at the latest after 5 s, so that a store that makes the
	// late update wait for the slow one fails this test rather than hang.
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	time.AfterFunc(5*time.Second, free)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Update(ctx, func(tx ledger.Tx) error { return tx.SetMeta("s", "k", []byte("late")) })
	took := time.Since(start)
	free()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the update behind a slow one: %v, want its deadline exceeded", err)
	}
	if took >= 5*time.Second {
		t.Fatalf("the update behind a slow one took %v; its deadline was 200ms", took)
	}
	if err := <-slow; err != nil {
		t.Fatalf("the slow update: %v", err)
	}
	err = s.View(context.Background(), func(tx ledger.Tx) error {
		v, err := tx.Meta("s", "k")
		if err == nil && string(v) != "slow" {
			t.Errorf("stored %q, want the slow update's", v)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
