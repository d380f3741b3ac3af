package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/berthhq/berth/api/wire"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func (a *app) parkedCmd() *cobra.Command {
	return a.group("parked", []string{"park"}, "List, show, resume, skip and replay parked aggregates",
		ls(a.verb("list",
			"List parked aggregates (the first 100 unless --limit, --after or --all)", 0, parkedListFlags, parkedList)),
		a.verb("groups", "List the failure groups of the parked aggregates, biggest first: one line a cause", 0,
			parkedGroupsFlags, parkedGroups),
		a.verb("show SUB TYPE ID", "Show a parked aggregate: its error, the event it stopped at, its history", 3, nil, parkedShow),
		a.verb("resume SUB TYPE ID", "Deliver a parked aggregate's held events again, from the one it stopped at", 3, resumeFlags, parkedResume),
		a.verb("skip SUB TYPE ID", "Skip a parked aggregate's held events (all, or through a version)", 3, skipFlags, parkedSkip),
		a.verb("resolved [SUB [TYPE [ID]]]", "List the records of resumed and skipped aggregates, kept store.resolved-retention", -1, nil, parkedResolved),
		a.replayCmd(),
		a.verb("capsule SUB TYPE ID", "Print the capsule of a parked aggregate's failed attempt (what replay runs)", 3, nil, parkedCapsule))
}

func parkedListFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.subscription, "subscription", "", "only subscription `SUB`")
	fs.StringVar(&o.state, "state", "", "only `STATE`: retrying, waiting or resuming")
	fs.StringVar(&o.aggregateType, "aggregate-type", "", "only aggregate type `TYPE`")
	filterFlags(fs, o)
	fs.BoolVar(&o.ndjson, "ndjson", false, "write each record as one JSON line, page by page as they come, every page unless --limit (for large exports)")
	fs.IntVar(&o.limit, "limit", 0, "list at most `N` records (default 100)")
	fs.BoolVar(&o.all, "all", false, "list every record, page after page")
	fs.StringVar(&o.after, "after", "", "list from `CURSOR` on (the one a previous list printed)")
}

func resumeFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.reason, "reason", "", "the reason `R`, kept in the record's history (left out: none is recorded; given, it must not be blank)")
}

func skipFlags(fs *pflag.FlagSet, o *options) {
	resumeFlags(fs, o)
	fs.Uint64Var(&o.throughVersion, "through-version", 0, "skip the events up to version `N` only (default: every held event)")
}

// reason is the --reason to send: left out, none; given blank, a usage
// error, since an operator who wrote --reason meant to say why.
func (x *invocation) reason() (string, error) {
	if f := x.flags.Lookup("reason"); f != nil && f.Changed && strings.TrimSpace(x.opts.reason) == "" {
		return "", usagef("--reason is blank: say why (it is kept in the record's history), or leave --reason out")
	}
	return x.opts.reason, nil
}

// parkedPage is one answer of GET /v1/parked, its records kept as sent.
type parkedPage struct {
	Records []json.RawMessage `json:"records"`
	Next    string            `json:"next"`
}

// checkListFlags refuses a --state, --limit or --all of a listing that
// cannot be meant.
func checkListFlags(o *options) error {
	if o.state != "" && !slices.Contains(wire.ParkedStates(), o.state) {
		return usagef("--state must be retrying, waiting or resuming, not %q", o.state)
	}
	if o.limit < 0 {
		return usagef("--limit must be 1 or more")
	}
	if o.all && o.limit > 0 {
		return usagef("--all and --limit ask for different things: give one")
	}
	return nil
}

func parkedList(x *invocation, _ []string) error {
	o := x.opts
	if err := checkListFlags(o); err != nil {
		return err
	}
	if err := checkTimes(o); err != nil {
		return err
	}
	// At most want records, read in pages; a page may hold fewer than its
	// limit (a filter the host answers by a bounded walk) and still go on.
	want := o.limit
	switch {
	case o.all || (o.ndjson && o.limit == 0):
		want = 0 // every page
	case want == 0:
		want = defaultListLimit
	}
	q := parkedQuery{Subscription: o.subscription, State: o.state, AggregateType: o.aggregateType, Class: o.class,
		Message: o.message, Group: o.group, FailedAfter: o.failedAfter, FailedBefore: o.failedBefore, After: o.after, Limit: min(want, 1000)}
	if want == 0 {
		q.Limit = 1000
	}
	read := 0
	var all parkedPage
	var firstRaw []byte
	for pages := 0; ; pages++ {
		raw, err := x.client.parked(x.ctx, q)
		if err != nil {
			return err
		}
		var page parkedPage
		if err := decode(raw, &page); err != nil {
			return err
		}
		if pages == 0 {
			firstRaw = raw
		}
		read += len(page.Records)
		onePage := want > 0 && read >= want
		if o.ndjson {
			for _, r := range page.Records {
				if _, err := fmt.Fprintf(x.stdout, "%s\n", r); err != nil {
					return err
				}
			}
			if onePage || page.Next == "" || page.Next == q.After {
				return nil
			}
			q.After = page.Next
			if want > 0 {
				q.Limit = min(want-read, 1000)
			}
			continue
		}
		all.Records = append(all.Records, page.Records...)
		all.Next = page.Next
		if onePage || page.Next == "" || page.Next == q.After { // the last test guards against a cursor that does not move
			if pages == 0 && x.global.json {
				return x.printJSON(firstRaw) // one page: the server's answer as is
			}
			break
		}
		q.After = page.Next
		if want > 0 {
			q.Limit = min(want-read, 1000)
		}
	}
	if x.global.json { // every page, merged in the same shape
		if all.Records == nil {
			all.Records = []json.RawMessage{}
		}
		raw, err := json.Marshal(all)
		if err != nil {
			return err
		}
		return x.printJSON(raw)
	}
	records := make([]wire.ParkedRecord, len(all.Records))
	for i, r := range all.Records {
		if err := decode(r, &records[i]); err != nil {
			return err
		}
	}
	if len(records) == 0 {
		fmt.Fprintln(x.stdout, "no parked aggregates")
	} else {
		t := x.table("SUBSCRIPTION", "AGGREGATE", "STOPPED AT", "STATE", "ATTEMPTS", "RETRIES", "NEXT RETRY", "ERROR")
		for _, r := range records {
			t.row(r.Subscription, r.AggregateType+"/"+r.AggregateID, "v"+u(r.Version), string(r.State),
				strconv.Itoa(r.Attempts), strconv.Itoa(r.ParkedRetries), x.nextRetry(r), errorText(r.Error))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if all.Next != "" {
		fmt.Fprintf(x.stderr, "more records: berth parked list --after %s (or --all for every one)\n", all.Next)
	}
	return nil
}

// defaultListLimit is how many records `berth parked list` prints unless
// asked for another number or every one: an incident parks 100,000.
const defaultListLimit = 100

// nextRetry says when the next long-horizon retry runs, or what the
// aggregate waits for.
func (x *invocation) nextRetry(r wire.ParkedRecord) string {
	switch {
	case r.State == wire.StateWaiting:
		return "operator"
	case r.NextRetry.IsZero():
		return "-"
	}
	return relative(r.NextRetry, x.now)
}

// waitWords says why a waiting aggregate waits for an operator.
func waitWords(why string) string {
	switch why {
	case wire.WaitUnrecoverable:
		return "the failure is unrecoverable, so it waits for an operator (subscription.parked.retry-unrecoverable is off)"
	case wire.WaitNoRetries:
		return "the subscription has no long-horizon retries (subscription.parked.max-retries = -1)"
	}
	return "its retries are spent"
}

// errorText is a failure in one line: "recoverable: message".
func errorText(e wire.ErrorInfo) string {
	msg := e.Message
	if e.Kind != "" {
		msg = e.Kind + ": " + msg
	}
	return msg
}

func parkedShow(x *invocation, args []string) error {
	raw, err := x.client.parkedRecord(x.ctx, args[0], args[1], args[2])
	if err != nil {
		return err
	}
	if x.global.json {
		return x.printJSON(raw)
	}
	var d wire.ParkedRecordDetail
	if err := decode(raw, &d); err != nil {
		return err
	}
	r := d.ParkedRecord
	kv := newKeyValues(x.stdout)
	kv.add("subscription", "%s", r.Subscription)
	kv.add("aggregate", "%s/%s", r.AggregateType, r.AggregateID)
	kv.add("stopped at", "version %d (event %d of that commit, position %d)", r.Version, r.Index, r.Position)
	if r.InvocationKey != "" { // absent in records parked before the ledger kept it
		kv.add("invocation key", "%s", r.InvocationKey)
	}
	if d.Event != nil {
		kv.add("event", "%s %s", d.Event.Type, truncate(string(d.Event.Data), 200))
	}
	kv.add("held back", "%d later commit(s)", d.HeldCommits)
	kv.add("state", "%s", r.State)
	switch {
	case r.State == wire.StateWaiting:
		kv.add("next retry", "none: %s; resume or skip it", waitWords(r.WaitReason))
	case !r.NextRetry.IsZero():
		kv.add("next retry", "%s (%s)", timestamp(r.NextRetry), relative(r.NextRetry, x.now))
	}
	kv.add("attempts", "%d", r.Attempts)
	kv.add("parked retries", "%d", r.ParkedRetries)
	kv.add("first failure", "%s (%s)", timestamp(r.FirstFailure), relative(r.FirstFailure, x.now))
	kv.add("last failure", "%s (%s)", timestamp(r.LastFailure), relative(r.LastFailure, x.now))
	kv.add("error", "%s", r.Error.Message)
	kv.add("error kind", "%s", orDash(r.Error.Kind))
	if r.Error.Class != "" {
		kv.add("taken for", "%s (%s)", r.Error.Class, orDash(r.Error.Reason))
	}
	if len(r.Error.Classes) > 0 {
		kv.add("error classes", "%s", strings.Join(r.Error.Classes, " < "))
	}
	if len(r.Error.Undeclared) > 0 {
		kv.add("undeclared classes", "%s (not in the module's class tree; classified as sent)", strings.Join(r.Error.Undeclared, ", "))
	}
	if r.Error.Code != "" {
		kv.add("error code", "%s", r.Error.Code)
	}
	if d.Capsule != "" {
		kv.add("capsule", "the failed attempt was recorded: berth parked replay %s %s %s", r.Subscription, r.AggregateType, r.AggregateID)
	}
	if err := kv.flush(); err != nil {
		return err
	}
	if len(r.History) == 0 {
		return nil
	}
	history := slices.Clone(r.History)
	slices.SortStableFunc(history, func(a, b wire.HistoryEntry) int { return a.Time.Compare(b.Time) })
	fmt.Fprintln(x.stdout, "\nhistory:")
	t := x.table("  TIME", "ACTION", "ATTEMPT", "VERSION", "ACTOR", "REASON", "ERROR")
	for _, h := range history {
		attempt, version, errText := "-", "-", "-"
		if h.Attempt > 0 {
			attempt = strconv.Itoa(h.Attempt)
		}
		if h.Version > 0 {
			version = u(h.Version)
		}
		if h.Error != nil {
			errText = errorText(*h.Error)
		}
		t.row("  "+timestamp(h.Time), h.Action, attempt, version, orDash(h.Actor), orDash(h.Reason), errText)
	}
	return t.flush()
}

func parkedResume(x *invocation, args []string) error {
	sub, typ, id := args[0], args[1], args[2]
	reason, err := x.reason()
	if err != nil {
		return err
	}
	raw, err := x.client.resume(x.ctx, sub, typ, id, reason)
	if err != nil {
		return err
	}
	if x.global.json {
		return x.printJSON(raw)
	}
	fmt.Fprintf(x.stdout, "resumed %s/%s in %s: its held events are delivered again, in order, from the one it stopped at%s\n",
		typ, id, sub, reasonSuffix(reason))
	return nil
}

func parkedSkip(x *invocation, args []string) error {
	sub, typ, id := args[0], args[1], args[2]
	reason, err := x.reason()
	if err != nil {
		return err
	}
	raw, err := x.client.skip(x.ctx, sub, typ, id, x.opts.throughVersion, reason)
	if err != nil {
		return err
	}
	if x.global.json {
		return x.printJSON(raw)
	}
	if v := x.opts.throughVersion; v > 0 {
		fmt.Fprintf(x.stdout, "skipped %s/%s in %s through version %d: later events are delivered in order%s\n",
			typ, id, sub, v, reasonSuffix(reason))
	} else {
		fmt.Fprintf(x.stdout, "skipped %s/%s in %s: every event it held back is skipped and it rejoins live delivery%s\n",
			typ, id, sub, reasonSuffix(reason))
	}
	return nil
}

// reasonSuffix says which reason the record's history keeps.
func reasonSuffix(reason string) string {
	if reason == "" {
		return " (no reason recorded: --reason R keeps one in the record's history)"
	}
	return " (reason: " + reason + ")"
}

func parkedResolved(x *invocation, args []string) error {
	if len(args) > 3 {
		return usagef("want at most SUB TYPE ID, got %d arguments", len(args))
	}
	q := url.Values{"limit": {"1000"}}
	for i, k := range []string{"subscription", "aggregateType", "aggregateId"} {
		if i < len(args) {
			q.Set(k, args[i])
		}
	}
	var all []wire.ResolvedRecord
	for {
		raw, err := x.client.get(x.ctx, apiPath("resolved"), q)
		if err != nil {
			return err
		}
		var page wire.ResolvedPage
		if err := decode(raw, &page); err != nil {
			return err
		}
		if x.global.json {
			for _, r := range page.Records {
				b, err := json.Marshal(r)
				if err != nil {
					return err
				}
				fmt.Fprintf(x.stdout, "%s\n", b)
			}
		}
		all = append(all, page.Records...)
		if page.Next == "" || page.Next == q.Get("after") {
			break
		}
		q.Set("after", page.Next)
	}
	if x.global.json {
		return nil
	}
	if len(all) == 0 {
		fmt.Fprintln(x.stdout, "no resolved records")
		return nil
	}
	t := x.table("SUBSCRIPTION", "AGGREGATE", "RESOLVED", "HOW", "BY", "REASON", "ERROR")
	for _, r := range all {
		how, by, why := "-", "-", "-"
		for i := len(r.History) - 1; i >= 0; i-- {
			if e := r.History[i]; e.Action == "resume" || e.Action == "skip" || e.Action == "resumed" {
				how, by, why = e.Action, orDash(e.Actor), orDash(e.Reason)
				break
			}
		}
		t.row(r.Subscription, r.AggregateType+"/"+r.AggregateID, timestamp(r.ResolvedAt), how, by, why, errorText(r.Error))
	}
	return t.flush()
}
