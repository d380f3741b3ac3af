package tests

import (
	"context"
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/ledgertest"
)

// scaleParked is how many parked records TestHundredThousandParked writes:
// BERTH_SCALE_PARKED, else 100,000.
func scaleParked(t *testing.T) int {
	if v := os.Getenv("BERTH_SCALE_PARKED"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1000 {
			t.Fatalf("BERTH_SCALE_PARKED=%q: want a number of at least 1000", v)
		}
		return n
	}
	return 100_000
}

// TestHundredThousandParked: a host whose ledger holds 100,000 parked
// aggregates of a deployed module (written into its data directory by
// ledgertest.Fill while it was stopped) starts, holds them, and answers
// every operator read exactly: counts by state, each filter of
// /v1/parked paged to its end, a dry run's count, /metrics' parked gauges
// and oldest first failure. It logs what each took (docs/BENCHMARKS.md
// has the figures; nothing here asserts a time).
func TestHundredThousandParked(t *testing.T) {
	n := scaleParked(t)
	h := newHost(t, hostConfig{NotifyURL: "http://127.0.0.1:1"})
	h.uploadNotifier(t, 201)
	h.Stop()

	start := time.Now()
	fillParked(t, h.Data, n)
	t.Logf("wrote %d parked records in %v", n, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	h = h.restart(t)
	t.Logf("restart to serving: %v", time.Since(start).Round(time.Millisecond))

	// What the generator wrote, counted by hand.
	var waiting, retrying, resuming, rare, unknown, needle, carts, window int
	from, to := n/2, n/2+n/100
	for i := range n {
		r := ledgertest.ScaleRecord(i, n)
		switch r.State {
		case ledger.StateWaiting:
			waiting++
		case ledger.StateRetrying:
			retrying++
		default:
			resuming++
		}
		if slices.Contains(r.Error.Classes, "Rare") {
			rare++
		}
		if slices.Contains(r.Error.Classes, "UnknownBuyer") {
			unknown++
		}
		if strings.Contains(r.Error.Message, "needle") {
			needle++
		}
		if r.AggregateType == "cart" && r.State != ledger.StateResuming {
			carts++
		}
		if i >= from && i < to && r.State != ledger.StateResuming {
			window++
		}
	}
	// The resumes under way at the stop go on: their aggregates have no
	// events, so each is resolved at once.
	sub := ledgertest.ScaleSubscription
	checkfor.Within(t, 60*time.Second, func() error {
		var st struct {
			Parked     map[string]int `json:"parked"`
			Partitions []struct {
				Held int `json:"held"`
			} `json:"partitions"`
		}
		h.must(200, "GET", "/v1/subscriptions/"+sub, nil).JSON(t, &st)
		held := 0
		for _, p := range st.Partitions {
			held += p.Held
		}
		if st.Parked["resuming"] != 0 || st.Parked["waiting"] != waiting || st.Parked["retrying"] != retrying || held != waiting+retrying {
			return fmt.Errorf("parked %v, %d held, want %d waiting, %d retrying, none resuming, all held", st.Parked, held, waiting, retrying)
		}
		return nil
	})

	q := func(kv ...string) string {
		v := url.Values{"subscription": {sub}}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v.Encode()
	}
	ts := func(i int) string {
		return ledgertest.ScaleStart.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
	}
	for _, tc := range []struct {
		name  string
		query string
		want  int
	}{
		{"class, 1%", q("class", "Rare"), rare},
		{"message, 1%", q("message", "NEEDLE"), needle},
		{"time window, 1%", q("failedAfter", ts(from), "failedBefore", ts(to)), window},
		{"aggregate type and state", q("aggregateType", "cart", "state", "retrying"), carts},
		{"class and state, none", q("class", "UnknownBuyer", "state", "retrying"), 0},
		{"class with descendants, 49%", q("class", "Downstream", "aggregateType", "cart"), -1},
	} {
		listed, pages, first := 0, 0, time.Duration(0)
		after := ""
		for {
			start := time.Now()
			var page struct {
				Records []parkedRecord `json:"records"`
				Next    string         `json:"next"`
			}
			path := "/v1/parked?limit=1000&" + tc.query
			if after != "" {
				path += "&after=" + url.QueryEscape(after)
			}
			h.must(200, "GET", path, nil).JSON(t, &page)
			if pages == 0 {
				first = time.Since(start)
			}
			pages++
			listed += len(page.Records)
			if page.Next == "" {
				break
			}
			after = page.Next
		}
		p50, worst := timeRequests(h, 20, "/v1/parked?limit=100&"+tc.query)
		t.Logf("%s: %d listed in %d pages of 1000, the first in %v; a first page of 100: median %v, slowest of 20 %v",
			tc.name, listed, pages, first.Round(time.Microsecond), p50, worst)
		if tc.want >= 0 && listed != tc.want {
			t.Errorf("%s: listed %d, want %d", tc.name, listed, tc.want)
		}
	}

	start = time.Now()
	var dry struct {
		Matched int `json:"matched"`
	}
	h.must(200, "POST", "/v1/jobs", map[string]any{"action": "resume", "dryRun": true,
		"filter": map[string]any{"subscriptions": []string{sub}, "class": "UnknownBuyer"}}).JSON(t, &dry)
	t.Logf("dry run of 50%%: %v", time.Since(start).Round(time.Microsecond))
	if dry.Matched != unknown {
		t.Errorf("dry run matched %d, want %d", dry.Matched, unknown)
	}

	p50, worst := timeRequests(h, 20, "/metrics")
	t.Logf("/metrics: median %v, slowest of 20 %v", p50, worst)
	metrics := h.must(200, "GET", "/metrics", nil).String()
	for _, want := range []string{
		fmt.Sprintf(`berth_parked_aggregates{state="waiting",subscription=%q} %d`, sub, waiting),
		fmt.Sprintf(`berth_parked_oldest_first_failure_timestamp_seconds{subscription=%q} %s`, sub,
			strconv.FormatFloat(float64(ledgertest.ScaleStart.Unix()), 'g', -1, 64)),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// timeRequests GETs path n times, one after another, and returns the
// median and the slowest.
func timeRequests(h *hostProc, n int, path string) (median, slowest time.Duration) {
	ds := make([]time.Duration, n)
	for i := range ds {
		start := time.Now()
		h.must(200, "GET", path, nil)
		ds[i] = time.Since(start).Round(time.Microsecond)
	}
	slices.Sort(ds)
	return ds[n/2], ds[n-1]
}

// fillParked writes n parked records of ledgertest.ScaleRecord into the
// ledger of the stopped host whose data directory is data.
func fillParked(t testing.TB, data string, n int) {
	t.Helper()
	l, err := ledger.Open(filepath.Join(data, "ledger"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ledgertest.Fill(context.Background(), l, 0, n, n, 2000); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
