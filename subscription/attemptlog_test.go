package subscription

import (
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/syncbuf"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// A failed attempt within budget is a debug line naming its key, attempt
// and class; the retry that succeeds at last, the park, each long-horizon
// retry's failure and the retries spent are info lines.
func TestAttemptLogLines(t *testing.T) {
	var buf syncbuf.Buffer
	clk := clock.NewFake(t0)
	var broken atomic.Bool
	broken.Store(true)
	rec := newRecorder(clk, func(d Delivery, n int) *retry.Failure {
		switch {
		case d.Commit.AggregateID == "r" && n == 1:
			return &retry.Failure{Classes: []string{"Flaky"}, Message: "try again"}
		case d.Commit.AggregateID == "p":
			return &retry.Failure{Classes: []string{"Bug"}, Message: "bad data"}
		}
		return nil
	})
	s := brokenSpec(rec)
	s.Parked = retry.ParkedSettings{MaxRetries: 2, FirstDelay: time.Minute, Timeout: 5 * time.Second, RetryUnrecoverable: retry.SwitchOn}
	e := newEnv(t, Options{Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}, s)
	e.clock = clk
	e.start()
	e.append("Order", "r")
	e.advance()
	rec.waitHandled(t, "r", 1)
	e.append("Order", "p")
	e.waitRecord(sub, "Order", "p", func(*ledger.Record) bool { return true })
	e.advance()
	e.waitRecord(sub, "Order", "p", func(r *ledger.Record) bool { return r.ParkedRetries == 1 })
	e.advance()
	e.waitRecord(sub, "Order", "p", func(r *ledger.Record) bool { return r.State == ledger.StateWaiting })
	// The line follows the commit the record shows.
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if n := len(buf.JSONLines("long-horizon retry failed; retries spent, the aggregate waits for an operator")); n == 0 {
			return fmt.Errorf("no retries-spent line yet")
		}
		return nil
	})

	failed := buf.JSONLines("attempt failed")
	if len(failed) != 2 || failed[0]["level"] != "DEBUG" || failed[0]["key"] != sub+":Order/r@1:0" ||
		failed[0]["attempt"] != 1.0 || failed[0]["class"] != "recoverable" || failed[0]["error"] != "try again" {
		t.Errorf("attempt failed lines %v", failed)
	}
	if ok := buf.JSONLines("attempt succeeded after retries"); len(ok) != 1 || ok[0]["level"] != "INFO" || ok[0]["attempt"] != 2.0 {
		t.Errorf("succeeded lines %v", ok)
	}
	if parked := buf.JSONLines("aggregate parked"); len(parked) != 1 || parked[0]["level"] != "INFO" {
		t.Errorf("parked lines %v", parked)
	}
	if l := buf.JSONLines("long-horizon retry failed"); len(l) != 1 || l[0]["level"] != "INFO" || l[0]["retry"] != 1.0 || l[0]["next"] == nil {
		t.Errorf("long-horizon retry lines %v", l)
	}
	spent := buf.JSONLines("long-horizon retry failed; retries spent, the aggregate waits for an operator")
	if len(spent) != 1 || spent[0]["level"] != "INFO" || spent[0]["retry"] != 2.0 || spent[0]["waitReason"] != ledger.WaitRetriesSpent {
		t.Errorf("retries spent lines %v", spent)
	}
}
