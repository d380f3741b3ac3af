package api

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/assembly"
	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/ledger"
)

// BenchmarkAppendREST is POST /v1/events through the API's handler over a
// whole host (Badger event log and ledger in a temporary directory): one
// ~100-byte event to a new aggregate per call. "with-audit-write" adds, after
// each append, the one ledger transaction an audit entry of it costs (what
// the audit middleware wrote for every append before appends left the audit
// log), so that one run gives the ratio.
func BenchmarkAppendREST(b *testing.B) {
	h, asm := benchHost(b, fmt.Sprintf("[server]\ndata-dir = %q\n", b.TempDir()))
	n := 0
	appendOne := func(b *testing.B) {
		n++
		body := fmt.Sprintf(`{"aggregateType":"Order","aggregateId":"o-%d","events":[{"type":"OrderPlaced","data":{"total":1999,"note":"%070d"}}]}`, n, n)
		req := httptest.NewRequest(http.MethodPost, "/v1/events", bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Host = "127.0.0.1"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusCreated {
			b.Fatalf("append: %d %s", rec.Code, rec.Body)
		}
	}
	b.Run("append", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			appendOne(b)
		}
	})
	b.Run("with-audit-write", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			appendOne(b)
			e := ledger.AuditEntry{Time: time.Now().UTC(), Actor: "anonymous", Action: "POST /v1/events", Status: 201,
				Target: fmt.Sprintf("Order/o-%d", n), Detail: "version 1 at position 1, 1 events"}
			if err := asm.Ledger.Update(context.Background(), func(tx ledger.Tx) error { return tx.Audit(e) }); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAppendBatch compares appends through the API from several
// clients at once, on a whole host (Badger in a temporary directory), with
// store.sync "none" and "always" in one run: one commit of one ~100-byte
// event to a new aggregate per append, POST /v1/events one commit a
// request, or POST /v1/events/batch many a request. One op is one append;
// appends/s is over the wall time. The ratio is a synced batch's
// appends/s over the unsynced single appends' of as many clients.
//
//	go test ./api -run '^$' -bench BenchmarkAppendBatch -benchtime 40000x -count 1
func BenchmarkAppendBatch(b *testing.B) {
	for _, c := range []struct {
		sync           string
		clients, batch int // batch 0: POST /v1/events
	}{
		{"none", 16, 0}, {"always", 16, 0},
		{"none", 16, 100}, {"always", 16, 100},
		{"none", 1, 1000}, {"always", 1, 1000},
		{"always", 4, 1000},
	} {
		name := fmt.Sprintf("sync=%s/clients=%d/single", c.sync, c.clients)
		if c.batch > 0 {
			name = fmt.Sprintf("sync=%s/clients=%d/batch=%d", c.sync, c.clients, c.batch)
		}
		b.Run(name, func(b *testing.B) {
			h, _ := benchHost(b, fmt.Sprintf("[server]\ndata-dir = %q\n[store]\nsync = %q\n", b.TempDir(), c.sync))
			var next atomic.Int64
			var failed atomic.Pointer[string]
			post := func(path string, body []byte, want int) {
				req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Host = "127.0.0.1"
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != want {
					msg := fmt.Sprintf("%s: %d %s", path, rec.Code, rec.Body)
					failed.Store(&msg)
				}
			}
			commit := func(buf []byte, i int64) []byte {
				return fmt.Appendf(buf, `{"aggregateType":"Order","aggregateId":"o-%d","expectedVersion":0,"events":[{"type":"OrderPlaced","data":{"total":1999,"note":"%070d"}}]}`, i, i)
			}
			per := max(1, c.batch)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range c.clients {
				wg.Go(func() {
					for failed.Load() == nil {
						first := next.Add(int64(per)) - int64(per)
						if first >= int64(b.N) {
							return
						}
						last := min(first+int64(per), int64(b.N))
						if c.batch == 0 {
							post("/v1/events", commit(nil, first), http.StatusCreated)
							continue
						}
						body := []byte(`{"appends":[`)
						for i := first; i < last; i++ {
							if i > first {
								body = append(body, ',')
							}
							body = commit(body, i)
						}
						post("/v1/events/batch", append(body, "]}"...), http.StatusOK)
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			if msg := failed.Load(); msg != nil {
				b.Fatal(*msg)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
		})
	}
}

// benchHost is the API's handler over a whole host opened with the
// configuration text, and the host, closed when the benchmark ends.
func benchHost(b *testing.B, text string) (http.Handler, *assembly.Host) {
	cfg, err := config.Parse([]byte(text), "berth.toml")
	if err != nil {
		b.Fatal(err)
	}
	asm, err := assembly.Open(b.Context(), cfg, assembly.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { asm.Close(context.Background()) })
	deps := DepsOf(asm)
	deps.Logger = slog.New(slog.DiscardHandler)
	return New(deps).Handler(), asm
}
