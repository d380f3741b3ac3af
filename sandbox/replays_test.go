package sandbox

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/wasm/abi"
)

// verdictOf is what a group's replay keeps of one replay: handled or
// not, the classes it still fails with, departed or not (the message, a
// guest may build from its clocks: see the tests).
func verdictOf(r Replayed) string {
	return fmt.Sprintf("%v %q departures=%d", r.Outcome.Kind, r.Capsule.Outcome.Classes, len(r.Departures))
}

func replayedOn(t *testing.T, rs *Replays, c *abi.Capsule) Replayed {
	t.Helper()
	r, err := rs.Replay(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A group's replays on reused instances come to the verdicts of replays
// on fresh instances, each: unknown buyers the fix handles, a service's
// 500 it still fails on, interleaved, on one instance reused.
func TestReplaysOnReusedInstancesKeepEachVerdict(t *testing.T) {
	s := newSandbox(t, Config{})
	svc := &notificationService{status: http.StatusNotFound}
	srv := httptest.NewServer(svc)
	m := notifierModule(t, s, srv.URL)
	var capsules []*abi.Capsule
	for i := range 6 {
		svc.status = http.StatusNotFound
		if i%3 == 2 {
			svc.status = http.StatusInternalServerError
		}
		c, _ := recordFailure(t, m, shipped(fmt.Sprintf("order-%d", i), fmt.Sprintf("buyer-%d", i), 1), time.Second, GuestFailure)
		capsules = append(capsules, c)
	}
	srv.Close()
	fix := load(t, s, notifierFix, ModuleConfigOf(capsules[0]))
	fresh := make([]string, len(capsules))
	for i, c := range capsules {
		r := replayed(t, fix, c)
		fresh[i] = verdictOf(r) + " " + OutcomeText(r.Capsule.Outcome)
	}
	if !strings.HasPrefix(fresh[0], "success") || strings.HasPrefix(fresh[2], "success") {
		t.Fatalf("fresh verdicts %q: want the 404s handled, the 500s failing", fresh)
	}
	rs := fix.Replays(1)
	defer rs.Close()
	const rounds = 3
	for round := range rounds {
		for i, c := range capsules {
			r := replayedOn(t, rs, c)
			if got := verdictOf(r) + " " + OutcomeText(r.Capsule.Outcome); got != fresh[i] {
				t.Fatalf("round %d, capsule %d on a reused instance: %s, on a fresh one %s", round, i, got, fresh[i])
			}
		}
	}
	if made, n := rs.Made(), rounds*len(capsules); made >= n {
		t.Errorf("%d instances made for %d replays: none reused", made, n)
	} else {
		t.Logf("%d instances made for %d replays", made, n)
	}
}

// An instance whose replay timed out is closed, as live delivery closes
// it; the next replay's verdict, departures and clock are its own. A
// reused instance's monotonic clock never runs backwards, and moves
// within a replay as recorded.
func TestReplaysCloseATimedOutInstance(t *testing.T) {
	s := newSandbox(t, Config{})
	m, _ := serviceAnswering(t, s, http.StatusForbidden, "no")
	spin, _ := recordFailure(t, m, &abi.Event{Handler: "spinner", InvocationKey: "spin-1"}, 50*time.Millisecond, Timeout)
	clock, _ := recordFailure(t, m, &abi.Event{Handler: "clockRandom", InvocationKey: "cr-1", Attempt: 1}, time.Second, GuestFailure)
	auth, _ := recordFailure(t, m, &abi.Event{Handler: "authorizedCall", InvocationKey: "auth-1"}, time.Second, GuestFailure)
	variant := load(t, s, misbehavingV2, ModuleConfigOf(auth))
	want := map[*abi.Capsule]string{}
	for _, c := range []*abi.Capsule{spin, clock, auth} {
		want[c] = verdictOf(replayed(t, variant, c))
	}
	rs := variant.Replays(1)
	defer rs.Close()
	made := rs.Made()
	var last int64
	for _, step := range []struct {
		c       *abi.Capsule
		newInst bool
	}{{clock, true}, {clock, false}, {auth, false}, {auth, false}, {spin, false}, {clock, true}, {spin, false}, {auth, true}} {
		r := replayedOn(t, rs, step.c)
		if got := verdictOf(r); got != want[step.c] {
			t.Fatalf("%s on a reused instance: %s, on a fresh one %s", step.c.Event.InvocationKey, got, want[step.c])
		}
		if step.c == clock {
			// The wall clock and the random bytes are the recorded ones. The
			// time the guest measured ("N ns on") may differ on a reused
			// instance: its runtime may read the clock at other places than
			// on the instance that recorded it (ABI.md, Replay).
			msg, was := r.Outcome.Failure.Message, clock.Outcome.Message
			if !slices.Equal(r.Capsule.Clock.Walltime, clock.Clock.Walltime) || string(r.Capsule.Random) != string(clock.Random) ||
				msg[:strings.Index(msg, ",")] != was[:strings.Index(was, ",")] || msg[strings.LastIndex(msg, ","):] != was[strings.LastIndex(was, ","):] {
				t.Errorf("clockRandom: %q, recorded %q", msg, was)
			}
			nano, rec := r.Capsule.Clock.Nanotime, clock.Clock.Nanotime
			if len(nano) == 0 || (!step.newInst && nano[0] <= last) {
				t.Fatalf("monotonic readings %v after %d, recorded %v", nano, last, rec)
			}
			for j := 1; j < min(len(nano), len(rec)); j++ {
				if nano[j]-nano[j-1] != rec[j]-rec[j-1] {
					t.Fatalf("reading %d moved by %d, recorded %d", j, nano[j]-nano[j-1], rec[j]-rec[j-1])
				}
			}
		}
		if len(r.Capsule.Clock.Nanotime) > 0 {
			last = r.Capsule.Clock.Nanotime[len(r.Capsule.Clock.Nanotime)-1]
		}
		if n := rs.Made(); (n > made) != step.newInst {
			t.Fatalf("%s: instances made %d → %d, want a new one: %v", step.c.Event.InvocationKey, made, n, step.newInst)
		}
		made = rs.Made()
	}
}
