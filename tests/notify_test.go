package tests

import (
	"encoding/json"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// behaviour scripts how the fake notification service answers one buyer.
type behaviour struct {
	Unknown    bool          // 404: the service does not know the buyer
	Fail       int           // answer 503 this many times, then succeed
	Busy       int           // answer 429 with Retry-After this many times, then succeed
	RetryAfter string        // the Retry-After of a 429 (default "1")
	Delay      time.Duration // wait this long before answering
	// HoldKey and Hold: a call with Idempotency-Key HoldKey is answered
	// only once Hold is closed or the caller gives up; that it arrived is
	// known at once (notifier.arrived).
	HoldKey string
	Hold    <-chan struct{}
}

// call is one request the service received.
type call struct {
	Buyer  string
	Key    string    // the Idempotency-Key header
	Order  string    // from the body
	Status int       // what the service answered
	Epoch  int       // the epoch when it arrived (see notifier.setEpoch)
	At     time.Time // when it arrived
	// Dropped: the service deduplicates (notifier.dedupe) and had already
	// notified this key, so it answered 200 and notified no one.
	Dropped bool
	// Traceparent is the W3C traceparent header the call carried.
	Traceparent string
}

// notifier is a fake notification service, scriptable per buyer: it serves
// POST /buyers/{buyer}/notifications and records every request.
type notifier struct {
	srv *httptest.Server

	mu     sync.Mutex
	script map[string]*behaviour
	calls  []call
	epoch  int
	// arrivals counts the calls that arrived, by Idempotency-Key, answered
	// or not.
	arrivals map[string]int
	// dedupe makes it behave like a real service keyed on Idempotency-Key
	// (as samples/notification-service does): a key it has notified is
	// answered 200 and dropped.
	dedupe bool
}

func newNotifier(t testing.TB) *notifier {
	n := &notifier{script: map[string]*behaviour{}, arrivals: map[string]int{}}
	n.srv = httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(n.srv.Close)
	return n
}

func (n *notifier) URL() string { return n.srv.URL }

// set scripts how buyer is answered from now on; buyers without a script succeed.
func (n *notifier) set(buyer string, b behaviour) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.script[buyer] = &b
}

// setEpoch tags the calls that arrive from now on.
func (n *notifier) setEpoch(e int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.epoch = e
}

func (n *notifier) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/buyers/")
	buyer, ok2 := strings.CutSuffix(rest, "/notifications")
	if r.Method != http.MethodPost || !ok || !ok2 {
		http.Error(w, "no such route", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		Order string `json:"order"`
	}
	json.Unmarshal(body, &msg)

	n.mu.Lock()
	b := n.script[buyer]
	epoch, at := n.epoch, time.Now() // as it arrives, before any delay
	var delay time.Duration
	var hold <-chan struct{}
	if b != nil {
		delay = b.Delay
		if b.HoldKey != "" && b.HoldKey == r.Header.Get("Idempotency-Key") {
			hold = b.Hold
		}
	}
	n.arrivals[r.Header.Get("Idempotency-Key")]++
	n.mu.Unlock()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
		}
	}
	if hold != nil {
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}

	n.mu.Lock()
	status := http.StatusAccepted
	key := r.Header.Get("Idempotency-Key")
	dropped := false
	switch {
	case n.dedupe && n.notifiedLocked(key) > 0:
		status, dropped = http.StatusOK, true
	case b == nil:
	case b.Unknown:
		status = http.StatusNotFound
	case b.Fail > 0:
		b.Fail--
		status = http.StatusServiceUnavailable
	case b.Busy > 0:
		b.Busy--
		status = http.StatusTooManyRequests
		ra := b.RetryAfter
		if ra == "" {
			ra = "1"
		}
		w.Header().Set("Retry-After", ra)
	}
	n.calls = append(n.calls, call{Buyer: buyer, Key: key, Order: msg.Order,
		Status: status, Epoch: epoch, At: at, Dropped: dropped, Traceparent: r.Header.Get("traceparent")})
	n.mu.Unlock()
	w.WriteHeader(status)
	io.WriteString(w, http.StatusText(status))
}

// callsOf returns the calls for buyer, in the order they were answered ("" for all).
func (n *notifier) callsOf(buyer string) []call {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []call
	for _, c := range n.calls {
		if buyer == "" || c.Buyer == buyer {
			out = append(out, c)
		}
	}
	return out
}

// arrived counts the calls with key that arrived, answered or not.
// calledFor says how many calls the notifier had for buyer until it had
// want; nil then.
func (n *notifier) calledFor(buyer string, want int) error {
	if got := n.callsOf(buyer); len(got) != want {
		return fmt.Errorf("%d calls for %s, want %d: %+v", len(got), buyer, want, got)
	}
	return nil
}

// notifiedAll says which of keys has no successful notification until
// each has one; nil then.
func notifiedAll(n *notifier, keys ...string) error {
	for _, k := range keys {
		if n.notified(k) == 0 {
			return fmt.Errorf("no successful notification with key %s", k)
		}
	}
	return nil
}

// arrivedAfter says how many requests with key reached n until more than
// before did; nil then.
func arrivedAfter(n *notifier, key string, before int) error {
	if got := n.arrived(key); got <= before {
		return fmt.Errorf("%d requests with key %s reached the service, want more than %d", got, key, before)
	}
	return nil
}

func (n *notifier) arrived(key string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.arrivals[key]
}

// notified counts the successful calls with key.
func (n *notifier) notified(key string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.notifiedLocked(key)
}

// notifiedLocked is notified with n.mu held.
func (n *notifier) notifiedLocked(key string) int {
	count := 0
	for _, c := range n.calls {
		if c.Key == key && c.Status < 300 && !c.Dropped {
			count++
		}
	}
	return count
}

// waitNotified waits until key has been answered with success.
func (n *notifier) waitNotified(t testing.TB, key string, within time.Duration) {
	t.Helper()
	checkfor.Within(t, within, func() error {
		if n.notified(key) == 0 {
			n.mu.Lock()
			defer n.mu.Unlock()
			tried := slices.DeleteFunc(slices.Clone(n.calls), func(c call) bool { return c.Key != key })
			return fmt.Errorf("no successful notification with key %s; its calls: %+v", key, tried)
		}
		return nil
	})
}
