package tests

import (
	"encoding/json"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/testbuild"
)

// attemptReporter is the service the misbehaving module's attemptReporter
// tells its attempts to; it answers 500 to the first failures calls.
type attemptReporter struct {
	srv      *httptest.Server
	mu       sync.Mutex
	failures int
	attempts []int
	keys     []string
}

func newAttemptReporter(t *testing.T, failures int) *attemptReporter {
	r := &attemptReporter{failures: failures}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var in struct {
			Key     string `json:"key"`
			Attempt int    `json:"attempt"`
		}
		json.NewDecoder(req.Body).Decode(&in)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.attempts, r.keys = append(r.attempts, in.Attempt), append(r.keys, in.Key)
		if len(r.attempts) <= r.failures {
			w.WriteHeader(500)
		}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *attemptReporter) seen() ([]int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.attempts), slices.Clone(r.keys)
}

// reporterHost starts a host with the misbehaving Rust module uploaded, its
// attemptReporter (a budget of 2 attempts) telling rep its attempts, and
// one ReportAttempt event of Probe p-1 appended; extra is more TOML.
func reporterHost(t *testing.T, rep *attemptReporter, extra string) *hostProc {
	wasm, err := testbuild.RustBytes("samples/misbehaving-rs")
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(rep.srv.URL, "http://")
	h := newHost(t, hostConfig{Extra: fmt.Sprintf("[modules.misbehaving]\nallowed-hosts = [%q]\nconfig = { report-url = %q }\n\n%s",
		host, rep.srv.URL, extra)})
	h.must(201, "PUT", "/v1/modules/misbehaving", wasm, "Content-Type", "application/wasm")
	h.must(201, "POST", "/v1/events", map[string]any{"aggregateType": "Probe", "aggregateId": "p-1",
		"events": []map[string]any{{"type": "ReportAttempt", "data": map[string]any{}}}})
	return h
}

const reporterSub = "Misbehaving.attemptReporter"

// waitAttempts waits until rep has seen n calls and checks their attempt
// numbers, and that every call had the event's one invocation key.
func (r *attemptReporter) waitAttempts(t *testing.T, want []int) {
	t.Helper()
	checkfor.Within(t, 20*time.Second, func() error {
		if attempts, _ := r.seen(); len(attempts) < len(want) {
			return fmt.Errorf("attempts %v, want %d calls", attempts, len(want))
		}
		return nil
	})
	attempts, keys := r.seen()
	if !slices.Equal(attempts, want) {
		t.Errorf("attempts %v, want %v", attempts, want)
	}
	for _, k := range keys {
		if k != reporterSub+":Probe/p-1@1:0" {
			t.Errorf("keys %v; want %s:Probe/p-1@1:0 each time", keys, reporterSub)
		}
	}
}

// TestAttemptNumbers pins ABI.md's account of the Event's attempt with a
// Rust guest through the binary: attempts count from 1 within the budget;
// an operator's resume gives the event a fresh budget (attempt 1 again); a
// long-horizon retry goes on counting; the key stays the same throughout.
func TestAttemptNumbers(t *testing.T) {
	t.Run("after an operator's resume", func(t *testing.T) {
		rep := newAttemptReporter(t, 2)
		h := reporterHost(t, rep, "")
		checkfor.Within(t, 20*time.Second, func() error {
			return h.answers("/v1/subscriptions/"+reporterSub+"/parked/Probe/p-1", 200)
		})
		h.must(202, "POST", "/v1/subscriptions/"+reporterSub+"/parked/Probe/p-1/resume", map[string]string{"reason": "fixed"})
		rep.waitAttempts(t, []int{1, 2, 1})
	})
	t.Run("in long-horizon retries", func(t *testing.T) {
		rep := newAttemptReporter(t, 3)
		reporterHost(t, rep, "[subscription.parked]\nfirst-delay = \"100ms\"\nmax-delay = \"200ms\"\n")
		rep.waitAttempts(t, []int{1, 2, 3, 4})
	})
}
