// Package groupcommit owns the group commit of the host's Badger stores:
// callers that arrive while one of them is writing wait, and are then
// written together by one of them, in one transaction and so (with
// store.sync "always") under one fsync. It holds no goroutine: the caller
// at the head of the queue writes the group its own request leads, then
// hands the lead to the first caller still waiting.
package groupcommit

import "sync"

// Queue is a group-commit queue of requests of type T. The zero value is
// not usable: make one with New.
type Queue[T any] struct {
	max     int
	mu      sync.Mutex
	waiting []*waiter[T]
	leading bool // a caller is writing a group
}

type waiter[T any] struct {
	v    T
	lead chan bool // true: write the next group; false: written
}

// New returns a queue whose groups hold at most limit requests (at least 1).
func New[T any](limit int) *Queue[T] {
	return &Queue[T]{max: max(1, limit)}
}

// Do queues v and returns once write has been called with a group that
// holds it: by this caller, when it leads the group, or by another. write
// is called by one caller at a time, with the requests in the order they
// were queued, and must record each one's outcome in the request itself
// (so T is a pointer). A request's outcome should say "not written" until
// write says otherwise: if write panics, the other callers of its group
// return with their requests as write left them, and the panic goes on in
// the leader.
func (q *Queue[T]) Do(v T, write func(group []T)) {
	q.DoAll([]T{v}, write)
}

// DoAll is Do for many requests of one caller: they are queued together,
// in order, so that they go into as few groups as the limit allows (one,
// when they and those waiting before them fit), and DoAll returns once
// every one of them has been written. The caller leads each group that
// one of its requests heads. If write panics in a group it leads, the
// panic goes on and its requests not yet written are left queued: the
// queue is then stuck, as a panic in write is a bug.
func (q *Queue[T]) DoAll(vs []T, write func(group []T)) {
	if len(vs) == 0 {
		return
	}
	ws := make([]*waiter[T], len(vs))
	for i, v := range vs {
		ws[i] = &waiter[T]{v: v, lead: make(chan bool, 1)}
	}
	q.mu.Lock()
	q.waiting = append(q.waiting, ws...)
	lead := !q.leading
	q.leading = true
	q.mu.Unlock()
	for i, w := range ws {
		if (i > 0 || !lead) && !<-w.lead {
			continue // written in a group another request led
		}
		q.writeHead(write)
	}
}

// writeHead writes the group at the head of the queue, which the caller
// leads (its request is the first waiting), and hands the lead on.
func (q *Queue[T]) writeHead(write func(group []T)) {
	q.mu.Lock()
	n := min(len(q.waiting), q.max)
	group := q.waiting[:n:n]
	q.waiting = q.waiting[n:]
	q.mu.Unlock()
	defer q.handOff(group)
	vs := make([]T, len(group))
	for i, g := range group {
		vs[i] = g.v
	}
	write(vs)
}

// handOff tells the group's other callers their requests were written and
// gives the lead to the first caller waiting, if any.
func (q *Queue[T]) handOff(group []*waiter[T]) {
	for _, g := range group[1:] {
		g.lead <- false
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) > 0 {
		q.waiting[0].lead <- true
		return
	}
	q.leading = false
	q.waiting = nil
}
