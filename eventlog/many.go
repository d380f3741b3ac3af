package eventlog

import (
	"context"
	"sync"
)

// AppendEach is AppendMany for a log whose appends do not share a write:
// it calls appendOne for each request, the requests of one aggregate one
// after another in their order (each is checked against the version the
// one before wrote), and up to parallel aggregates at a time, so that the
// batch waits for about as many round trips as its longest aggregate
// holds rather than one per request. It returns one outcome per request,
// in order. eventlog/jetstream's AppendMany is this over its Append.
func AppendEach(ctx context.Context, reqs []AppendRequest, parallel int,
	appendOne func(context.Context, AppendRequest) (Commit, error)) []AppendOutcome {
	out := make([]AppendOutcome, len(reqs))
	type aggregate struct{ typ, id string }
	var order []aggregate
	runs := map[aggregate][]int{} // each aggregate's requests, in order
	for i, r := range reqs {
		a := aggregate{r.AggregateType, r.AggregateID}
		if _, ok := runs[a]; !ok {
			order = append(order, a)
		}
		runs[a] = append(runs[a], i)
	}
	sem := make(chan struct{}, max(1, parallel))
	var wg sync.WaitGroup
	for _, a := range order {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, i := range runs[a] {
				out[i].Commit, out[i].Err = appendOne(ctx, reqs[i])
			}
		})
	}
	wg.Wait()
	return out
}
