package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger/internal/kvtx"
)

// openCached opens the store in dir, closed at the test's end.
func openCached(t *testing.T, dir string) *Badger {
	t.Helper()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

func parkOne(t *testing.T, s *Badger, id string, first time.Time) {
	t.Helper()
	r := &Record{Subscription: "sub", AggregateType: "order", AggregateID: id, State: StateRetrying,
		FirstFailure: first, LastFailure: first, NextRetry: first.Add(time.Minute),
		Error: ErrorInfo{Classes: []string{"Timeout"}, Kind: "recoverable"}}
	if err := s.Update(context.Background(), func(tx Tx) error { return tx.PutParked(r) }); err != nil {
		t.Fatal(err)
	}
}

// countsOf reads what the cache keeps in one View: see readCounts.
func countsOf(t *testing.T, s *Badger) string {
	t.Helper()
	var out string
	err := s.View(context.Background(), func(tx Tx) (err error) {
		out, err = readCounts(tx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readCounts reads the subscription's retrying count, its class count,
// a window's count (ranges of counters and entries) and its oldest parked.
func readCounts(tx Tx) (string, error) {
	c, err := tx.CountParked("sub")
	if err != nil {
		return "", err
	}
	n, err := tx.CountMatching(Filter{Subscription: "sub", Class: "Timeout"})
	if err != nil {
		return "", err
	}
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	w, err := tx.CountMatching(Filter{Subscription: "sub", FailedAfter: day.Add(-time.Second - time.Millisecond),
		FailedBefore: day.Add(48*time.Hour + time.Second + time.Millisecond)})
	if err != nil {
		return "", err
	}
	at, _, err := tx.OldestParked("sub")
	return fmt.Sprintf("%d retrying, %d Timeout, %d in the window, oldest %s", c[StateRetrying], n, w,
		at.Format(time.RFC3339)), err
}

// TestReadCacheKeepsEachSnapshot: a View's counts are those of its own
// snapshot. One taken before a park reads the counts before it even after
// a later View put the new counts in the cache; the later View reads the
// new ones, and a View after it reads them from the cache (its entries
// are of its epoch).
func TestReadCacheKeepsEachSnapshot(t *testing.T) {
	s := openCached(t, t.TempDir())
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	parkOne(t, s, "o-1", at)
	before := "1 retrying, 1 Timeout, 1 in the window, oldest 2026-12-01T00:00:00Z"
	if got := countsOf(t, s); got != before {
		t.Fatalf("counts after one park: %s, want %s", got, before)
	}

	// An old View, held open on another goroutine across a park and a
	// newer View.
	inside, resume, done := make(chan struct{}), make(chan struct{}), make(chan string, 3)
	var resumeOnce sync.Once
	letGo := func() { resumeOnce.Do(func() { close(resume) }) }
	defer letGo() // before Close, which waits for the View
	go func() {
		err := s.View(context.Background(), func(tx Tx) error {
			read := func() string {
				out, err := readCounts(tx)
				if err != nil {
					return err.Error()
				}
				return out
			}
			done <- read()
			close(inside)
			<-resume
			done <- read()
			return nil
		})
		if err != nil {
			done <- err.Error()
		}
	}()
	<-inside
	parkOne(t, s, "o-0", at.Add(-time.Hour))
	after := "2 retrying, 2 Timeout, 2 in the window, oldest 2026-11-30T23:00:00Z"
	if got := countsOf(t, s); got != after {
		t.Fatalf("counts after the second park: %s, want %s", got, after)
	}
	letGo()
	for i := range 2 {
		if got := <-done; got != before {
			t.Errorf("the old View's read %d: %s, want %s", i, got, before)
		}
	}
	e := s.cache.epoch.Load()
	hits := s.cache.entries.Len()
	if got := countsOf(t, s); got != after {
		t.Fatalf("counts read again: %s, want %s", got, after)
	}
	if hits == 0 || s.cache.epoch.Load() != e || s.cache.entries.Len() != hits {
		t.Errorf("the read again was not from the cache: %d entries then %d, epoch %d then %d",
			hits, s.cache.entries.Len(), e, s.cache.epoch.Load())
	}
}

// TestReadCacheAfterAFailedWrite: an Update that fails after changing the
// counters leaves the counts a View reads as they were (what failed does
// not matter to the cache: any write makes it read Badger again).
func TestReadCacheAfterAFailedWrite(t *testing.T) {
	s := openCached(t, t.TempDir())
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	parkOne(t, s, "o-1", at)
	want := countsOf(t, s)
	failed := errors.New("failed")
	err := s.Update(context.Background(), func(tx Tx) error {
		r := &Record{Subscription: "sub", AggregateType: "order", AggregateID: "o-0", State: StateRetrying,
			FirstFailure: at.Add(-time.Hour), Error: ErrorInfo{Classes: []string{"Timeout"}}}
		if err := tx.PutParked(r); err != nil {
			return err
		}
		return failed
	})
	if !errors.Is(err, failed) {
		t.Fatalf("the failing Update: %v", err)
	}
	if got := countsOf(t, s); got != want {
		t.Errorf("counts after a failed Update: %s, want %s", got, want)
	}
}

// TestReadCacheStartsEmpty: a store opened again has nothing cached, and
// reads its counts from Badger.
func TestReadCacheStartsEmpty(t *testing.T) {
	dir := t.TempDir()
	s := openCached(t, dir)
	parkOne(t, s, "o-1", time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	want := countsOf(t, s)
	if s.cache.entries.Len() == 0 {
		t.Fatal("a View's counts were not cached")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = openCached(t, dir)
	if n := s.cache.entries.Len(); n != 0 {
		t.Errorf("%d entries cached at Open", n)
	}
	if got := countsOf(t, s); got != want {
		t.Errorf("counts after a reopen: %s, want %s", got, want)
	}
}

// TestReadCacheNotWhileAWriteRuns: a View taken while a write runs, or
// taken across one, reads Badger alone; one taken between writes reads
// through the cache.
func TestReadCacheNotWhileAWriteRuns(t *testing.T) {
	c := newReadCache()
	cachedView := func(during func()) bool {
		_, ok := c.view(func() kvtx.Txn {
			during()
			return nil
		}).(*cachedTxn)
		return ok
	}
	if !cachedView(func() {}) {
		t.Error("a View between writes does not read through the cache")
	}
	done := c.writing()
	if cachedView(func() {}) {
		t.Error("a View taken while a write runs reads through the cache")
	}
	done()
	if cachedView(func() { c.writing()() }) {
		t.Error("a View taken across a whole write reads through the cache")
	}
	var end func()
	if cachedView(func() { end = c.writing() }) {
		t.Error("a View taken as a write began reads through the cache")
	}
	if cachedView(end) {
		t.Error("a View taken as a write ended reads through the cache")
	}
	if !cachedView(func() {}) {
		t.Error("a View after the writes does not read through the cache")
	}
}

// TestReadCacheLongRange: a window whose range holds more keys than a
// range of the cache keeps (rangeCacheKeys entries within one second) is
// counted exactly, read twice, and again after one more park in it.
func TestReadCacheLongRange(t *testing.T) {
	s := openCached(t, t.TempDir())
	first := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	n := rangeCacheKeys + 40
	parkOrders(t, s, n, first, time.Millisecond, 3, func(int) State { return StateWaiting })
	f := Filter{Subscription: "sub", FailedAfter: first.Add(time.Nanosecond), FailedBefore: first.Add(time.Duration(n) * time.Millisecond)}
	count := func() int {
		var got int
		if err := s.View(context.Background(), func(tx Tx) (err error) {
			got, err = tx.CountMatching(f)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	for i := range 2 {
		if got := count(); got != n-1 {
			t.Errorf("read %d: %d in the window, want %d", i, got, n-1)
		}
	}
	parkOne(t, s, "o-late", first.Add(time.Duration(n-1)*time.Millisecond+time.Microsecond))
	if got := count(); got != n {
		t.Errorf("after one more park: %d in the window, want %d", got, n)
	}
}
