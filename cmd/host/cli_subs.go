package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func (a *app) subscriptionsCmd() *cobra.Command {
	return a.group("subscriptions", []string{"subs", "sub"}, "List, show, pause, unpause and reset subscriptions",
		ls(a.verb("list", "List the subscriptions with their lag and parked counts", 0, nil, subsList)),
		a.verb("show NAME", "Show a subscription: checkpoint, retry settings, partitions", 1, nil, subsShow),
		a.verb("pause NAME", "Pause a subscription (its events wait), until an unpause or --until/--for", 1, pauseFlags, subsPause),
		a.verb("unpause NAME", "Unpause a subscription", 1, nil, subsUnpause),
		a.verb("reset NAME --position N", "Move a subscription's checkpoint: it delivers from position N next", 1, resetFlags, subsReset))
}

func resetFlags(fs *pflag.FlagSet, o *options) {
	fs.Var(&o.position, "position", "position to deliver from next (required; 1 replays from the beginning)")
}

// stateSummary is the subscription's state with its partitions that are not
// running, e.g. "running (2 partitions paused)".
func stateSummary(s wire.Subscription) string {
	other := map[string]int{}
	for _, p := range s.Partitions {
		if p.State != "" && p.State != "running" && p.State != s.State {
			other[p.State]++
		}
	}
	if len(other) == 0 {
		return s.State
	}
	var parts []string
	for _, st := range slices.Sorted(maps.Keys(other)) {
		parts = append(parts, fmt.Sprintf("%d %s", other[st], plural(other[st], "partition")+" "+st))
	}
	return s.State + " (" + strings.Join(parts, ", ") + ")"
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

func subsList(x *invocation, _ []string) error {
	raw, err := x.client.subscriptions(x.ctx)
	if err != nil {
		return err
	}
	if x.global.json {
		return x.printJSON(raw)
	}
	var list wire.SubscriptionList
	if err := decode(raw, &list); err != nil {
		return err
	}
	if len(list.Subscriptions) == 0 {
		fmt.Fprintln(x.stdout, "no subscriptions (push a module to add some)")
		return nil
	}
	t := x.table("NAME", "MODULE", "STATE", "CHECKPOINT", "HEAD", "LAG", "RETRYING", "WAITING", "RESUMING")
	for _, s := range list.Subscriptions {
		head, lag := "?", "?" // not known during an outage (Unread)
		if s.Head != nil && s.Lag != nil {
			head, lag = u(*s.Head), u(*s.Lag)
		}
		t.row(s.Name, orDash(s.Module), stateSummary(s), u(s.Checkpoint), head, lag,
			strconv.Itoa(s.Parked[wire.StateRetrying]), strconv.Itoa(s.Parked[wire.StateWaiting]), strconv.Itoa(s.Parked[wire.StateResuming]))
	}
	return t.flush()
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

func subsShow(x *invocation, args []string) error {
	raw, err := x.client.subscription(x.ctx, args[0])
	return x.showSub(raw, err, "")
}

func subsPause(x *invocation, args []string) error {
	req := wire.PauseRequest{Reason: x.opts.reason}
	switch {
	case x.opts.until != "" && x.opts.pauseFor != 0:
		return usagef("--until and --for: give one")
	case x.opts.until != "":
		t, err := time.Parse(time.RFC3339Nano, x.opts.until)
		if err != nil {
			return usagef("--until %q is no RFC 3339 time (e.g. 2026-12-03T18:00:00Z)", x.opts.until)
		}
		req.Until = &t
	case x.flags.Changed("for"):
		if x.opts.pauseFor <= 0 {
			return usagef("--for must be more than 0")
		}
		t := x.now.Add(x.opts.pauseFor)
		req.Until = &t
	}
	raw, err := x.client.postJSON(x.ctx, apiPath("subscriptions", args[0], "pause"), req)
	what := "paused subscription " + args[0]
	if req.Until != nil {
		what += " until " + timestamp(*req.Until)
	}
	return x.showSub(raw, err, what)
}

func subsUnpause(x *invocation, args []string) error {
	raw, err := x.client.unpause(x.ctx, args[0])
	return x.showSub(raw, err, "unpaused subscription "+args[0])
}

func subsReset(x *invocation, args []string) error {
	if !x.opts.position.set {
		return usagef("--position is required: 1 replays from the beginning, head+1 skips to the end")
	}
	raw, err := x.client.reset(x.ctx, args[0], x.opts.position.v)
	return x.showSub(raw, err, fmt.Sprintf("reset subscription %s to position %d", args[0], x.opts.position.v))
}

// showSub prints a subscription answer, after a line saying what was done.
func (x *invocation) showSub(raw []byte, err error, done string) error {
	if err != nil {
		return err
	}
	if x.global.json {
		return x.printJSON(raw)
	}
	var s wire.Subscription
	if err := decode(raw, &s); err != nil {
		return err
	}
	if done != "" {
		fmt.Fprintf(x.stdout, "%s: it is now %s\n\n", done, stateSummary(s))
	}
	kv := newKeyValues(x.stdout)
	kv.add("name", "%s", s.Name)
	kv.add("module", "%s", orDash(s.Module))
	if s.PausedUntil.IsZero() {
		kv.add("state", "%s", stateSummary(s))
	} else {
		kv.add("state", "%s until %s (%s), then it goes on by itself", stateSummary(s), timestamp(s.PausedUntil), relative(s.PausedUntil, x.now))
	}
	// The checkpoint is the next position to deliver, so a subscription
	// that is caught up is one past the head.
	kv.add("checkpoint", "%d: the next position to deliver (written: %d, where a restart goes on)", s.Checkpoint, s.DurableCheckpoint)
	switch {
	case s.Head == nil || s.Lag == nil: // an outage of the log or the ledger
		kv.add("head", "not known: %s", s.Unread)
		kv.add("lag", "not known")
	case *s.Head == 0:
		kv.add("head", "0: the log is empty")
		kv.add("lag", "0: caught up")
	case *s.Lag == 0:
		kv.add("head", "%d: the log's last position", *s.Head)
		kv.add("lag", "0: caught up")
	default:
		kv.add("head", "%d: the log's last position", *s.Head)
		kv.add("lag", "%d %s not yet delivered", *s.Lag, plural(int(*s.Lag), "commit"))
	}
	var parked []string
	for _, st := range wire.ParkedStates() {
		parked = append(parked, fmt.Sprintf("%d %s", s.Parked[st], st))
	}
	kv.add("parked", "%s", strings.Join(parked, ", "))
	pr := s.ParkedRetries
	retries := strconv.Itoa(pr.MaxRetries)
	if pr.MaxRetries < 0 {
		retries = "none (subscription.parked.max-retries = -1): a parked aggregate waits for an operator"
	}
	kv.add("parked retries", "%s, first after %s, up to %s apart, %s each", retries, pr.FirstDelay, pr.MaxDelay, pr.Timeout)
	if err := kv.flush(); err != nil {
		return err
	}

	if len(s.Retry) > 0 {
		fmt.Fprintln(x.stdout, "\nretry:")
		t := x.table("  SETTING", "VALUE", "FROM")
		for _, k := range slices.Sorted(maps.Keys(s.Retry)) {
			t.row("  "+k, settingValue(s.Retry[k].Value), orDash(s.Retry[k].Source))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	var busy []wire.Partition
	for _, p := range s.Partitions {
		if p.State != "running" || p.Active > 0 || p.Held > 0 {
			busy = append(busy, p)
		}
	}
	fmt.Fprintf(x.stdout, "\npartitions: %d, %d running and idle\n", len(s.Partitions), len(s.Partitions)-len(busy))
	if len(busy) == 0 {
		return nil
	}
	t := x.table("  PARTITION", "STATE", "ACTIVE", "HELD", "CONCURRENCY", "PAUSED SINCE", "NEXT PROBE", "REASON")
	for _, p := range busy {
		since := "-"
		if !p.PausedSince.IsZero() {
			since = timestamp(p.PausedSince)
		}
		t.row("  "+strconv.Itoa(p.Index), p.State, strconv.Itoa(p.Active), strconv.Itoa(p.Held), strconv.Itoa(p.Concurrency),
			since, relative(p.NextProbe, x.now), orDash(p.PauseReason))
	}
	return t.flush()
}

// settingValue formats a retry setting's JSON value.
func settingValue(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case []any:
		if len(v) == 0 {
			return "none"
		}
		s := make([]string, len(v))
		for i, e := range v {
			s[i] = fmt.Sprint(e)
		}
		return strings.Join(s, ", ")
	default:
		return fmt.Sprint(v)
	}
}

func pauseFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.until, "until", "", "go on by itself at `TIME` (RFC 3339)")
	fs.DurationVar(&o.pauseFor, "for", 0, "go on by itself after `DURATION` (e.g. 30m)")
	fs.StringVar(&o.reason, "reason", "", "why, kept in the audit log")
}
