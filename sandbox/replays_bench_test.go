package sandbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// BenchmarkReplays replays the capsule of an unknown buyer against the fix
// that passes unknown buyers over, on a fresh instance each (Module.Replay)
// and on instances reused (Replays), two workers at a time as `berth parked
// replay --group` on 2 cores: the ratio is what reusing saves.
//
//	go test ./sandbox -run '^$' -bench BenchmarkReplays -benchtime 2000x
func BenchmarkReplays(b *testing.B) {
	s := newSandbox(b, Config{})
	srv := httptest.NewServer(&notificationService{status: http.StatusNotFound})
	m := load(b, s, "samples/shipment-notifier", ModuleConfig{
		AllowedHosts: []string{srv.Listener.Addr().String()}, Config: map[string]string{"notifications-url": srv.URL}})
	o := m.Invoke(context.Background(), shipped("order-404", "buyer-404", 1), time.Second)
	srv.Close()
	if o.Capsule == nil {
		b.Fatalf("no capsule: %s", o.Error())
	}
	c := o.Capsule
	fix := load(b, s, notifierFix, ModuleConfigOf(c))
	for _, bc := range []struct {
		name   string
		replay func(rs *Replays) (Replayed, error)
	}{
		{"fresh", func(*Replays) (Replayed, error) { return fix.Replay(context.Background(), c) }},
		{"reused", func(rs *Replays) (Replayed, error) { return rs.Replay(context.Background(), c) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const workers = 2
			rs := fix.Replays(workers)
			defer rs.Close()
			work := make(chan struct{})
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range work {
						if r, err := bc.replay(rs); err != nil || r.Outcome.Kind != Success {
							b.Errorf("replay: %v, %s", err, OutcomeText(r.Capsule.Outcome))
						}
					}
				})
			}
			start := time.Now()
			for b.Loop() {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "replays/s")
			b.ReportMetric(float64(rs.Made()), "instances")
		})
	}
}
