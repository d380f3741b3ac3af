package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/wasm/abi"
)

// The replay of a group runs here, in the CLI, not in the host: the
// candidate is not deployed and may misbehave, and the host goes on
// serving while a group of 10,000 replays on the operator's cores. What
// the host keeps is the verdict (POST /v1/parked/groups/{group}/proofs),
// which a proven job then holds to.

// groupReport is what `parked replay --group --json` prints.
type groupReport struct {
	Group        string         `json:"group"`
	Subscription string         `json:"subscription"`
	Candidate    string         `json:"candidate"`
	Module       string         `json:"module"`
	SHA256       string         `json:"sha256"`
	Replayed     int            `json:"replayed"`
	Handled      int            `json:"handled"`
	StillFailing int            `json:"stillFailing"`
	Departed     int            `json:"departed"`
	NoCapsule    int            `json:"noCapsule"` // records whose attempt was not recorded
	Failing      []failingGroup `json:"failing"`   // the still failing, grouped by fingerprint again
	Seconds      float64        `json:"seconds"`
	// FetchSeconds is the time listing the group and fetching its
	// capsules took, ReplaySeconds the replays' (the module's load too).
	FetchSeconds  float64 `json:"fetchSeconds"`
	ReplaySeconds float64 `json:"replaySeconds"`
	Kept          bool    `json:"kept"` // the verdict was sent to the host
}

// failingGroup is what the candidate still fails with, and how often.
type failingGroup struct {
	Classes []string `json:"classes"`
	Message string   `json:"message"` // masked
	Count   int      `json:"count"`
}

// groupItem is one capsule of a group and what its replay came to.
type groupItem struct {
	sub, aggType, aggID string
	raw                 []byte
	verdict             string // handled, failing, departed, none
	classes             []string
	message             string
}

// replayVerdict classifies one replay: a departure from the recording
// makes it no proof either way; else the candidate handled the event or
// still fails.
func replayVerdict(r *sandbox.Replayed) string {
	switch {
	case len(r.Departures) > 0:
		return "departed"
	case r.Outcome.Kind == sandbox.Success:
		return "handled"
	}
	return "failing"
}

// replayGroupItems replays every item's capsule against the module in m
// (loaded once), parallel at a time, each under maxTime; progress is
// called after each. The replays reuse instances, one a worker, as live
// delivery does (sandbox.Replays): a fresh Go instance costs ~100 times
// a replay's call.
func replayGroupItems(ctx context.Context, m *sandbox.Module, items []*groupItem, parallel int, maxTime time.Duration, progress func()) error {
	rs := m.Replays(parallel)
	defer rs.Close()
	work := make(chan *groupItem)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range max(1, parallel) {
		wg.Go(func() {
			for it := range work {
				err := replayOne(ctx, rs, it, maxTime)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				if progress != nil {
					progress()
				}
			}
		})
	}
	for _, it := range items {
		if ctx.Err() != nil {
			break
		}
		work <- it
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

func replayOne(ctx context.Context, rs *sandbox.Replays, it *groupItem, maxTime time.Duration) error {
	if it.raw == nil {
		it.verdict = "none"
		return nil
	}
	c, err := abi.DecodeCapsule(it.raw)
	if err != nil {
		return fmt.Errorf("the capsule of %s/%s cannot be read: %w", it.aggType, it.aggID, err)
	}
	rctx, cancel := context.WithTimeout(ctx, maxTime)
	defer cancel()
	r, err := rs.Replay(rctx, c)
	if err != nil {
		return fmt.Errorf("the capsule of %s/%s cannot be replayed: %w", it.aggType, it.aggID, err)
	}
	it.verdict = replayVerdict(&r)
	if it.verdict == "failing" {
		it.classes, it.message = r.Capsule.Outcome.Classes, ledger.MaskMessage(r.Capsule.Outcome.Message)
	}
	return nil
}

func parkedReplayGroup(x *invocation, args []string) error {
	o := x.opts
	switch {
	case len(args) > 0 || o.capsule != "":
		return usagef("--group G replays every capsule of the group: leave SUB TYPE ID and --capsule out")
	case o.module == "":
		return usagef("--group G needs --module FIX.wasm: the candidate to try on the group")
	case o.maxTime <= 0:
		return usagef("--max-time %s: want a positive duration", o.maxTime)
	case o.parallel < 0:
		return usagef("--parallel must be 1 or more")
	}
	wasm, err := readFile(o.module)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(wasm)
	rep := groupReport{Group: o.group, Candidate: o.module, SHA256: hex.EncodeToString(sum[:])}
	start := time.Now()
	items, err := x.groupCapsules(o.group)
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return &problemError{Status: http.StatusNotFound, Problem: wire.Problem{Status: http.StatusNotFound,
			Detail: fmt.Sprintf("no parked aggregate is in group %q (berth parked groups lists the groups)", o.group)}}
	}
	rep.Subscription = items[0].sub
	rep.FetchSeconds = time.Since(start).Seconds()
	var first *abi.Capsule
	for _, it := range items {
		if it.raw != nil {
			if first, err = abi.DecodeCapsule(it.raw); err != nil {
				return fmt.Errorf("the capsule of %s/%s cannot be read: %w", it.aggType, it.aggID, err)
			}
			break
		}
	}
	if first != nil {
		rep.Module = first.Module.Name
		sb, err := sandbox.New(sandbox.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), CacheDir: replayCache()})
		if err != nil {
			return err
		}
		defer sb.Close(context.Background())
		m, err := sb.Load(x.ctx, first.Module.Name, wasm, sandbox.ModuleConfigOf(first))
		if err != nil {
			return fmt.Errorf("the module does not load: %w", err)
		}
		defer m.Close(context.Background())
		parallel := o.parallel
		if parallel == 0 {
			parallel = runtime.GOMAXPROCS(0)
		}
		bar := newProgress(x.stderr, len(items), !x.global.json && isTerminal(x.stderr))
		if err := replayGroupItems(x.ctx, m, items, parallel, o.maxTime, bar.step); err != nil {
			return err
		}
		bar.done()
	}
	rep.Seconds = time.Since(start).Seconds()
	rep.ReplaySeconds = rep.Seconds - rep.FetchSeconds
	failing := map[string]*failingGroup{}
	var handled []wire.ProofAggregate
	for _, it := range items {
		switch it.verdict {
		case "none":
			rep.NoCapsule++
			continue
		case "handled":
			rep.Handled++
			handled = append(handled, wire.ProofAggregate{AggregateType: it.aggType, AggregateID: it.aggID})
		case "departed":
			rep.Departed++
		case "failing":
			rep.StillFailing++
			k := strings.Join(it.classes, "\x00") + "\x01" + it.message
			if failing[k] == nil {
				failing[k] = &failingGroup{Classes: it.classes, Message: it.message}
			}
			failing[k].Count++
		}
		rep.Replayed++
	}
	rep.Failing = []failingGroup{}
	for _, g := range failing {
		rep.Failing = append(rep.Failing, *g)
	}
	sort.Slice(rep.Failing, func(i, j int) bool { return rep.Failing[i].Count > rep.Failing[j].Count })
	if rep.Replayed > 0 {
		if err := x.keepProof(&rep, handled); err != nil {
			return err
		}
		rep.Kept = true
	}
	if x.global.json {
		if err := x.printIndented(rep); err != nil {
			return err
		}
	} else if err := printGroupReplay(x.stdout, &rep); err != nil {
		return err
	}
	if rep.Handled < len(items) {
		return exitError{code: exitFailed}
	}
	return nil
}

// groupCapsules lists the group's records and fetches each one's capsule
// (nil when its attempt was not recorded).
func (x *invocation) groupCapsules(group string) ([]*groupItem, error) {
	var items []*groupItem
	q := parkedQuery{Group: group, Limit: 1000}
	for {
		raw, err := x.client.parked(x.ctx, q)
		if err != nil {
			return nil, err
		}
		var page struct {
			Records []wire.ParkedRecord `json:"records"`
			Next    string              `json:"next"`
		}
		if err := decode(raw, &page); err != nil {
			return nil, err
		}
		for _, r := range page.Records {
			items = append(items, &groupItem{sub: r.Subscription, aggType: r.AggregateType, aggID: r.AggregateID})
		}
		if page.Next == "" || page.Next == q.After {
			break
		}
		q.After = page.Next
	}
	// Fetched a few at a time: the host serves them while it works.
	work := make(chan *groupItem)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for it := range work {
				raw, err := x.client.capsule(x.ctx, it.sub, it.aggType, it.aggID)
				var pe *problemError
				switch {
				case errors.As(err, &pe) && pe.Status == http.StatusNotFound:
				case err != nil:
					select {
					case errs <- err:
					default:
					}
				default:
					it.raw = raw
				}
			}
		})
	}
	for _, it := range items {
		work <- it
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	return items, nil
}

// keepProof sends the verdict to the host, a page of handled aggregates a
// request.
func (x *invocation) keepProof(rep *groupReport, handled []wire.ProofAggregate) error {
	p := apiPath("parked", "groups", rep.Group, "proofs")
	for i := 0; i == 0 || i < len(handled); i += 1000 {
		page := handled[i:min(i+1000, len(handled))]
		if page == nil {
			page = []wire.ProofAggregate{}
		}
		req := wire.ProofRequest{Subscription: rep.Subscription, Module: rep.Module, SHA256: rep.SHA256,
			Replayed: rep.Replayed, Handled: rep.Handled, StillFailing: rep.StillFailing, Departed: rep.Departed,
			Aggregates: page}
		if _, err := x.client.postJSON(x.ctx, p, req); err != nil {
			return fmt.Errorf("keeping the verdict: %w", err)
		}
	}
	return nil
}

func printGroupReplay(w io.Writer, r *groupReport) error {
	pct := func(n int) string {
		if r.Replayed == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(r.Replayed))
	}
	kv := newKeyValues(w)
	kv.add("group", "%s (%s)", r.Group, r.Subscription)
	kv.add("candidate", "%s (module %s, sha256 %s)", r.Candidate, r.Module, short(r.SHA256))
	kv.add("replayed", "%d capsules in %.1fs (%.0f/s)", r.Replayed, r.Seconds, float64(r.Replayed)/max(r.Seconds, 1e-9))
	kv.add("handled", "%d (%s)", r.Handled, pct(r.Handled))
	kv.add("still failing", "%d (%s)", r.StillFailing, pct(r.StillFailing))
	for _, g := range r.Failing {
		kv.add("  "+fmt.Sprint(g.Count), "%s: %s", orDash(strings.Join(g.Classes, " < ")), g.Message)
	}
	kv.add("departed", "%d (%s): host calls the recording could not answer, so no proof either way", r.Departed, pct(r.Departed))
	if r.NoCapsule > 0 {
		kv.add("not recorded", "%d record(s) have no capsule and were not replayed", r.NoCapsule)
	}
	if r.Kept {
		kv.add("verdict kept", `deploy the candidate, then resume the %d it handled: berth jobs resume --group %s --proven-by %s:%s --reason "…"`,
			r.Handled, r.Group, r.Module, r.SHA256)
	}
	return kv.flush()
}

// progress draws "replayed n/total" on a terminal, at most ten times a
// second.
type progress struct {
	w     io.Writer
	total int
	on    bool
	mu    sync.Mutex
	n     int
	last  time.Time
}

func newProgress(w io.Writer, total int, on bool) *progress {
	return &progress{w: w, total: total, on: on}
}

func (p *progress) step() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if !p.on || time.Since(p.last) < 100*time.Millisecond {
		return
	}
	p.last = time.Now()
	const width = 30
	fill := width * p.n / max(p.total, 1)
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d", strings.Repeat("#", fill), strings.Repeat(".", width-fill), p.n, p.total)
}

func (p *progress) done() {
	if p.on {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", 50))
	}
}

// isTerminal reports whether w is a terminal (a character device).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
