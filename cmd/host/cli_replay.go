package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/wasm/abi"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// replayHelp is `berth parked replay --help`'s long text.
const replayHelp = `Replay the failed attempt a parked aggregate's capsule recorded, in a local sandbox: the
module version that made it (fetched from the server) or, with --module, a candidate fix, runs
the recorded event under the recorded limits; its host calls are answered from the recording
(HTTP responses, key/value reads, config values), its clocks and random bytes are the recorded
ones, and nothing reaches the network. It prints the outcome beside the recorded one, the host
calls made and every one where the run departed from the recording (a request the recording
has no answer for is answered "not recorded in the capsule" and listed).

A capsule is checked before anything runs: a field no host could have recorded (a memory limit
past 4 GiB, an answer larger than the host delivers, a file past 1 MiB) is refused, named. The
replay runs under the recorded time budget and, whatever the capsule says (0: none), under
--max-time of real time: past it the replay is stopped and reported.

With --group G (and --module), every capsule of the failure group is replayed against the
candidate, --parallel at a time, with a progress bar on a terminal: it answers how many the
candidate handles, how many still fail (grouped again by their masked message), and how many
departed from the recording (made host calls it has no answer for: no proof either way). The
verdict is kept on the host (the handled aggregates), so that a job --proven-by the candidate's
sha256 resumes exactly those once the candidate is deployed.

Exit status: without --module, 0 when the failure is reproduced, 1 when it is not; with
--module, 0 when the candidate handles the event (succeeds), 1 when it fails; with --group, 0
when it handles every capsule of the group, 1 when not. Other codes as "berth help exit-codes".`

func (a *app) replayCmd() *cobra.Command {
	c := a.verb("replay SUB TYPE ID", "Run a parked aggregate's recorded failing attempt again, here, with no network; --module tries a fix",
		-1, replayFlags, parkedReplay)
	c.Long = replayHelp
	return c
}

func replayFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.module, "module", "", "run candidate `FIX.wasm` instead of the recorded module version")
	fs.StringVar(&o.capsule, "capsule", "", "replay the capsule in `FILE` (from --save or GET …/capsule) instead of fetching one; no arguments then")
	fs.StringVar(&o.save, "save", "", "also write the fetched capsule to `FILE` (for a test kit's Replay)")
	fs.DurationVar(&o.maxTime, "max-time", defaultReplayMaxTime, "stop the replay after `DURATION` of real time, whatever the capsule's timeout_ms")
	fs.StringVar(&o.group, "group", "", "replay every capsule of failure group `G` against --module, and keep the verdict on the host")
	fs.IntVar(&o.parallel, "parallel", 0, "with --group, replay `N` capsules at once (default: the cores)")
}

// defaultReplayMaxTime is --max-time's default: a replay is an offline
// tool, and a capsule's own budget may be none (0) or absurd.
const defaultReplayMaxTime = time.Minute

// capsule fetches the capsule of a parked (or recently resolved) aggregate.
func (c *client) capsule(ctx context.Context, sub, aggType, aggID string) ([]byte, error) {
	return c.get(ctx, apiPath("subscriptions", sub, "parked", aggType, aggID, "capsule"), nil)
}

// moduleVersionWasm fetches a kept module version's bytes.
func (c *client) moduleVersionWasm(ctx context.Context, name string, version int) ([]byte, error) {
	return c.get(ctx, apiPath("modules", name, "versions", strconv.Itoa(version), "wasm"), nil)
}

func parkedCapsule(x *invocation, args []string) error {
	raw, err := x.client.capsule(x.ctx, args[0], args[1], args[2])
	if err != nil {
		return err
	}
	return x.printJSON(raw)
}

// replayReport is what `parked replay --json` prints.
type replayReport struct {
	Capsule    replayCapsule      `json:"capsule"`
	Module     abi.CapsuleModule  `json:"module"`
	Candidate  string             `json:"candidate,omitempty"` // the --module file
	Recorded   abi.CapsuleOutcome `json:"recorded"`
	Replayed   abi.CapsuleOutcome `json:"replayed"`
	Reproduced bool               `json:"reproduced"`
	Succeeded  bool               `json:"succeeded"`
	Calls      []abi.CapsuleCall  `json:"calls"`
	Departures []replayDeparture  `json:"departures"`
}

// replayDeparture is a sandbox.Departure in --json's words.
type replayDeparture struct {
	Call     int              `json:"call"` // from 1, as the text lists the calls
	Made     abi.CapsuleCall  `json:"made"`
	Recorded *abi.CapsuleCall `json:"recorded,omitempty"`
	Note     string           `json:"note"`
}

type replayCapsule struct {
	Subscription  string `json:"subscription,omitempty"`
	InvocationKey string `json:"invocation_key"`
	Attempt       uint32 `json:"attempt"`
	RecordedAt    string `json:"recorded_at"`
}

func parkedReplay(x *invocation, args []string) error {
	o := x.opts
	if o.group != "" {
		return parkedReplayGroup(x, args)
	}
	var raw []byte
	var err error
	switch {
	case o.capsule != "" && len(args) > 0:
		return usagef("--capsule FILE replays that file: leave SUB TYPE ID out")
	case o.capsule != "":
		if raw, err = readFile(o.capsule); err != nil {
			return err
		}
	case len(args) != 3:
		return usagef("want SUB TYPE ID (or --capsule FILE), got %d argument(s)", len(args))
	default:
		if raw, err = x.client.capsule(x.ctx, args[0], args[1], args[2]); err != nil {
			return err
		}
		if o.save != "" {
			if err := os.WriteFile(o.save, raw, 0o644); err != nil {
				return fmt.Errorf("--save: %w", err)
			}
		}
	}
	c, err := abi.DecodeCapsule(raw)
	if err != nil {
		return fmt.Errorf("the capsule cannot be read: %w", err)
	}
	rep := replayReport{Module: c.Module, Recorded: c.Outcome, Capsule: replayCapsule{Subscription: c.Subscription,
		InvocationKey: c.Event.InvocationKey, Attempt: c.Event.Attempt, RecordedAt: c.RecordedAt.UTC().Format("2006-01-02T15:04:05Z07:00")}}
	var wasm []byte
	if o.module != "" {
		if wasm, err = readFile(o.module); err != nil {
			return err
		}
		rep.Candidate = o.module
		sum := sha256.Sum256(wasm)
		rep.Module = abi.CapsuleModule{Name: c.Module.Name, SHA256: hex.EncodeToString(sum[:])}
	} else {
		if wasm, err = x.client.moduleVersionWasm(x.ctx, c.Module.Name, c.Module.Version); err != nil {
			return fmt.Errorf("module %s v%d, which made the capsule: %w (a version no longer kept can be replayed with --module)", c.Module.Name, c.Module.Version, err)
		}
		if sum := sha256.Sum256(wasm); c.Module.SHA256 != "" && hex.EncodeToString(sum[:]) != c.Module.SHA256 {
			return fmt.Errorf("module %s v%d: the server's bytes have sha256 %x, the capsule names %s", c.Module.Name, c.Module.Version, sum, c.Module.SHA256)
		}
	}
	if o.maxTime <= 0 {
		return usagef("--max-time %s: want a positive duration", o.maxTime)
	}
	r, err := replay(x.ctx, c, wasm, o.maxTime)
	if err != nil {
		return err
	}
	rep.Replayed, rep.Calls = r.Capsule.Outcome, r.Capsule.Calls
	rep.Departures = make([]replayDeparture, len(r.Departures))
	for i, d := range r.Departures {
		rep.Departures[i] = replayDeparture{Call: d.Call + 1, Made: d.Made, Recorded: d.Recorded, Note: d.Note}
	}
	rep.Reproduced = r.Reproduced(c.Outcome)
	rep.Succeeded = r.Outcome.Kind == sandbox.Success
	if x.global.json {
		if err := x.printIndented(rep); err != nil {
			return err
		}
	} else if err := printReplay(x.stdout, &rep); err != nil {
		return err
	}
	if (rep.Candidate == "" && !rep.Reproduced) || (rep.Candidate != "" && !rep.Succeeded) {
		return exitError{code: exitFailed}
	}
	return nil
}

// replay runs c on wasm in a sandbox of its own, under the capsule's
// limits; the guest's logs are in the replay's recording, not on stderr.
// It ends by maxTime of real time whatever the capsule says.
func replay(ctx context.Context, c *abi.Capsule, wasm []byte, maxTime time.Duration) (*sandbox.Replayed, error) {
	sb, err := sandbox.New(sandbox.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), CacheDir: replayCache()})
	if err != nil {
		return nil, err
	}
	defer sb.Close(context.Background())
	m, err := sb.Load(ctx, c.Module.Name, wasm, sandbox.ModuleConfigOf(c))
	if err != nil {
		return nil, fmt.Errorf("the module does not load: %w", err)
	}
	defer m.Close(context.Background())
	rctx, cancel := context.WithTimeout(ctx, maxTime)
	defer cancel()
	r, err := m.Replay(rctx, c)
	if err != nil {
		return nil, fmt.Errorf("the capsule cannot be replayed: %w", err)
	}
	if errors.Is(rctx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return nil, fmt.Errorf("the replay ran past --max-time %s and was stopped (the capsule's limits.timeout_ms is %d)", maxTime, c.Limits.TimeoutMillis)
	}
	return &r, nil
}

// replayCache is where replays keep compiled modules, so that a second
// replay of a module starts at once ("" when the user has no cache dir).
func replayCache() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "berth", "replay")
}

func printReplay(w io.Writer, r *replayReport) error {
	kv := newKeyValues(w)
	kv.add("attempt", "%s, attempt %d, recorded %s", r.Capsule.InvocationKey, r.Capsule.Attempt, r.Capsule.RecordedAt)
	if r.Candidate != "" {
		kv.add("module", "candidate %s (sha256 %s)", r.Candidate, short(r.Module.SHA256))
	} else {
		kv.add("module", "%s v%d (sha256 %s), as recorded", r.Module.Name, r.Module.Version, short(r.Module.SHA256))
	}
	kv.add("recorded", "%s", sandbox.OutcomeText(r.Recorded))
	kv.add("replayed", "%s", sandbox.OutcomeText(r.Replayed))
	kv.add("verdict", "%s", verdict(r))
	kv.add("host calls", "%d", len(r.Calls))
	for i, c := range r.Calls {
		kv.add(fmt.Sprintf("  %d", i+1), "%s", callText(c))
	}
	if len(r.Departures) == 0 {
		kv.add("departures", "none: every host call was answered from the recording")
	} else {
		kv.add("departures", "%d", len(r.Departures))
		for _, d := range r.Departures {
			kv.add(fmt.Sprintf("  call %d", d.Call), "%s: %s", callText(d.Made), d.Note)
		}
	}
	return kv.flush()
}

func verdict(r *replayReport) string {
	switch {
	case r.Candidate == "" && r.Reproduced:
		return "reproduced: " + sandbox.OutcomeText(r.Recorded)
	case r.Candidate == "":
		return "not reproduced: the replay ended otherwise than the recorded attempt"
	case r.Succeeded:
		return "the candidate handles this event (the recorded attempt failed)"
	case r.Reproduced:
		return "the candidate fails as the recorded attempt did"
	}
	return "the candidate fails, otherwise than the recorded attempt"
}

// callText is a host call in one line: "http POST URL → 404".
func callText(c abi.CapsuleCall) string {
	var b strings.Builder
	b.WriteString(c.Fn)
	switch {
	case c.HTTP != nil:
		fmt.Fprintf(&b, " %s %s", c.HTTP.Method, c.HTTP.URL)
	case c.Command != nil:
		fmt.Fprintf(&b, " %s %s/%s", c.Command.Type, c.Command.AggregateType, c.Command.AggregateID)
	case c.Log != nil:
		fmt.Fprintf(&b, " %s: %s", c.Log.Level, truncate(string(c.Log.Text), 120))
	case c.Key != "":
		fmt.Fprintf(&b, " %s", c.Key)
	}
	switch {
	case c.HTTP != nil && c.HTTP.Response != nil:
		fmt.Fprintf(&b, " → %d", c.HTTP.Response.Status)
	case c.Reply != nil && c.Reply.Message != "":
		fmt.Fprintf(&b, " → %s: %s", c.Reply.Code, truncate(c.Reply.Message, 120))
	case c.Reply != nil:
		fmt.Fprintf(&b, " → %s", c.Reply.Code)
	}
	if c.Deadline {
		b.WriteString(" (the deadline passed during it)")
	}
	return b.String()
}

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}
