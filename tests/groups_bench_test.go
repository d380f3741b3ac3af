package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/ledgertest"
)

// BenchmarkReplayGroup replays a failure group of 10,000 capsules against
// the fix that passes unknown buyers over, with `berth parked replay
// --group --module --json` through the binary. One aggregate is parked by
// the notifier (a real capsule: the event, the POST and its 404); the
// host is stopped and 9,999 copies of its record and capsule are written
// beside it, so the group holds 10,000. capsules/s is over the whole
// command: listing the group, fetching each capsule over HTTP, replaying
// them (--parallel the cores, on one reused instance a worker) and
// keeping the verdict.
//
//	go test ./tests -run '^$' -bench BenchmarkReplayGroup -benchtime 1x
func BenchmarkReplayGroup(b *testing.B) {
	const n = 10_000
	fix, err := fixedNotifierWasm()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		svc := newNotifier(b)
		svc.set("ghost", behaviour{Unknown: true})
		h := newHost(b, hostConfig{NotifyURL: svc.URL(), Extra: groupsConfig})
		h.uploadNotifier(b, 201)
		h.appendShipped(b, "o-0", "ghost")
		h.waitParked(b, "o-0", 20*time.Second)
		h.Stop()
		copyParked(b, h.Data, "o-0", n)
		h = h.restart(b)
		gs := h.groups(b)
		if len(gs) != 1 || gs[0].Count != n {
			b.Fatalf("groups %+v, want one of %d", gs, n)
		}
		start := time.Now()
		cmd := exec.Command(hostBin, "parked", "replay", "--server", h.URL, "--json", "--group", gs[0].Group, "--module", fix)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		took := time.Since(start)
		var rep groupReplay
		if jerr := json.Unmarshal(out, &rep); err != nil || jerr != nil || rep.Handled != n {
			b.Fatalf("replay --group: %v, %+v\n%s%s", err, rep, out, stderr.String())
		}
		b.ReportMetric(n/took.Seconds(), "capsules/s")
		b.ReportMetric(n/rep.ReplaySecs, "replayed/s")
		b.ReportMetric(rep.FetchSecs, "fetch-s")
		b.ReportMetric(rep.ReplaySecs, "replay-s")
		// The rest: the CLI's start, keeping the verdict (10,000 handled
		// aggregates, 1,000 a request) and printing it.
		b.ReportMetric(took.Seconds()-rep.FetchSecs-rep.ReplaySecs, "rest-s")
		b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "cores")
	}
}

// BenchmarkGroupsAt100k lists the failure groups of 100,000 parked
// records (ledgertest.Fill: three causes, varied ids) from the ledger,
// as GET /v1/parked/groups does: from the counters, not the records.
//
//	go test ./tests -run '^$' -bench BenchmarkGroupsAt100k
func BenchmarkGroupsAt100k(b *testing.B) {
	l, err := ledger.Open(filepath.Join(b.TempDir(), "ledger"), ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close(context.Background())
	const n = 100_000
	if err := ledgertest.Fill(context.Background(), l, 0, n, n, 2000); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		err := l.View(context.Background(), func(tx ledger.Tx) error {
			gs, _, err := tx.GroupsParked(ledger.GroupFilter{Subscription: ledgertest.ScaleSubscription})
			if err == nil && len(gs) != 3 {
				err = fmt.Errorf("%d groups, want 3", len(gs))
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// copyParked writes n-1 copies of the parked record of order and its
// capsule (o-bench-1, …) into the ledger of the stopped host whose data
// directory is data.
func copyParked(b *testing.B, data, order string, n int) {
	b.Helper()
	copyParkedAs(b, data, order, true, 1, n, func(r *ledger.Record, i int) { r.AggregateID = fmt.Sprintf("o-bench-%d", i) })
}

// copyParkedAs writes copies from..to-1 of the parked record of order
// (its capsule too, with capsule) into the ledger of the stopped host
// whose data directory is data, as vary makes copy i of it.
func copyParkedAs(t testing.TB, data, order string, capsule bool, from, to int, vary func(r *ledger.Record, i int)) {
	t.Helper()
	l, err := ledger.Open(filepath.Join(data, "ledger"), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(context.Background())
	var r *ledger.Record
	var raw []byte
	err = l.View(context.Background(), func(tx ledger.Tx) (err error) {
		if r, err = tx.Parked(subName, "Order", order); err != nil || !capsule {
			return err
		}
		raw, err = tx.Capsule(subName, "Order", order)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i += 500 {
		err := l.Update(context.Background(), func(tx ledger.Tx) error {
			for j := i; j < min(i+500, to); j++ {
				c := *r
				vary(&c, j)
				if err := tx.PutParked(&c); err != nil {
					return err
				}
				if capsule {
					if err := tx.PutCapsule(subName, "Order", c.AggregateID, raw); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
