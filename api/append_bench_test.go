package api

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	cfg, err := config.Parse([]byte(fmt.Sprintf("[server]\ndata-dir = %q\n", b.TempDir())), "berth.toml")
	if err != nil {
		b.Fatal(err)
	}
	kit, err := assembly.Open(b.Context(), cfg, assembly.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { kit.Close(context.Background()) })
	deps := DepsOf(kit)
	deps.Logger = slog.New(slog.DiscardHandler)
	srv := New(deps)
	h := srv.Handler()
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
			if err := kit.Ledger.Update(context.Background(), func(tx ledger.Tx) error { return tx.Audit(e) }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
