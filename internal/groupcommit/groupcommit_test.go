package groupcommit

import (
	"sync"
	"testing"
)

type req struct {
	id      int
	written int
}

// TestDoAllWritesEachOnceInOrder queues batches and single requests from
// many goroutines at once: every request is written exactly once, by the
// time its DoAll returns, in groups no larger than the limit, and a batch's
// requests are written in their order.
func TestDoAllWritesEachOnceInOrder(t *testing.T) {
	const limit, callers, batch = 7, 16, 20
	q := New[*req](limit)
	var mu sync.Mutex // write is called by one caller at a time; mu checks it
	var order []int
	write := func(group []*req) {
		if !mu.TryLock() {
			t.Error("write called by two callers at once")
			return
		}
		defer mu.Unlock()
		if len(group) > limit {
			t.Errorf("a group of %d, more than the limit %d", len(group), limit)
		}
		for _, r := range group {
			r.written++
			order = append(order, r.id)
		}
	}
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			if c%2 == 0 {
				q.Do(&req{id: c * 1000}, write)
				return
			}
			rs := make([]*req, batch)
			for i := range rs {
				rs[i] = &req{id: c*1000 + i}
			}
			q.DoAll(rs, write)
			for _, r := range rs {
				if r.written != 1 {
					t.Errorf("request %d written %d times when DoAll returned", r.id, r.written)
				}
			}
		})
	}
	wg.Wait()
	want := callers/2 + callers/2*batch
	if len(order) != want {
		t.Fatalf("%d requests written, want %d", len(order), want)
	}
	last := map[int]int{}
	for _, id := range order {
		c, i := id/1000, id%1000
		if prev, ok := last[c]; ok && i != prev+1 {
			t.Errorf("caller %d: request %d written after %d", c, i, prev)
		}
		last[c] = i
	}
}
