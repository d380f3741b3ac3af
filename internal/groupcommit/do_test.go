package groupcommit

import (
	"sync"
	"testing"
)

type doReq struct {
	n       int
	written bool
}

// TestEveryRequestWrittenOnceInBoundedGroups runs many callers at once and
// checks that each request is written exactly once, by one writer at a
// time, in groups of at most the limit, and that Do returns only once its
// request was written.
func TestEveryRequestWrittenOnceInBoundedGroups(t *testing.T) {
	const callers, limit = 200, 8
	q := New[*doReq](limit)
	var mu sync.Mutex // guards writing, seen and groups
	writing := false
	seen := map[int]int{}
	groups := 0
	write := func(group []*doReq) {
		mu.Lock()
		if writing {
			t.Error("two writers at once")
		}
		writing = true
		mu.Unlock()
		if len(group) == 0 || len(group) > limit {
			t.Errorf("a group of %d, want 1 to %d", len(group), limit)
		}
		for _, r := range group {
			r.written = true
		}
		mu.Lock()
		for _, r := range group {
			seen[r.n]++
		}
		groups++
		writing = false
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			r := &doReq{n: i}
			q.Do(r, write)
			if !r.written {
				t.Errorf("Do returned before request %d was written", i)
			}
		})
	}
	wg.Wait()
	for i := range callers {
		if seen[i] != 1 {
			t.Errorf("request %d written %d times", i, seen[i])
		}
	}
	if groups > callers {
		t.Errorf("%d groups for %d requests", groups, callers)
	}
}

// TestLeaderPanicReleasesItsGroup checks that a write that panics returns
// the group's other callers (with their requests unwritten) and that the
// queue goes on for the next caller.
func TestLeaderPanicReleasesItsGroup(t *testing.T) {
	q := New[*doReq](4)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the leader")
			}
		}()
		q.Do(&doReq{n: 1}, func([]*doReq) { panic("disk on fire") })
	}()
	r := &doReq{n: 2}
	q.Do(r, func(g []*doReq) {
		for _, x := range g {
			x.written = true
		}
	})
	if !r.written {
		t.Error("the queue did not write after a leader's panic")
	}
}
