package main

import (
	"bufio"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func (a *app) jobsCmd() *cobra.Command {
	return a.group("jobs", []string{"job"}, "Resume or skip every parked aggregate a filter matches, as a durable job",
		a.verb("resume", "Resume every parked aggregate the filter matches (a dry run first, then a job at a rate limit)", 0, jobFlags,
			func(x *invocation, _ []string) error { return jobsStart(x, "resume") }),
		a.verb("skip", "Skip the held events of every parked aggregate the filter matches (a dry run first)", 0, jobFlags,
			func(x *invocation, _ []string) error { return jobsStart(x, "skip") }),
		ls(a.verb("list", "List the jobs, newest first", 0, nil, jobsList)),
		a.verb("show ID", "Show a job: its state, counts and failures", 1, waitFlag, jobsShow),
		a.verb("cancel ID", "Cancel a running job (what it did stays done)", 1, nil, jobsCancel))
}

// filterFlags are the parked list's and the jobs' filters.
func filterFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.class, "class", "", "only errors of class `CLASS`, or of a class below it in the module's tree")
	fs.StringVar(&o.message, "message", "", "only errors whose message holds `TEXT` (any case)")
	fs.StringVar(&o.group, "group", "", "only failure group `G` (its fingerprint, as berth parked groups prints it)")
	fs.StringVar(&o.failedAfter, "failed-after", "", "only those that first failed at or after `TIME` (RFC 3339)")
	fs.StringVar(&o.failedBefore, "failed-before", "", "only those that first failed before `TIME` (RFC 3339)")
}

func jobFlags(fs *pflag.FlagSet, o *options) {
	fs.StringArrayVar(&o.subscriptions, "subscription", nil, "only subscription `SUB` (repeat for more; default: all)")
	fs.StringVar(&o.state, "state", "", "only `STATE`: retrying, waiting or resuming")
	fs.StringVar(&o.aggregateType, "aggregate-type", "", "only aggregate type `TYPE`")
	filterFlags(fs, o)
	fs.StringVar(&o.reason, "reason", "", "why, kept in every aggregate's history (required)")
	fs.StringVar(&o.provenBy, "proven-by", "", "with --group, only the aggregates candidate `MODULE:SHA256` handled when the group was replayed against it (berth parked replay --group); it must be deployed")
	fs.Float64Var(&o.rate, "rate", 0, "aggregates a second at most (default: the host's jobs.default-rate)")
	fs.BoolVar(&o.dryRun, "dry-run", false, "only count what would be acted on, and show a sample")
	fs.BoolVarP(&o.yes, "yes", "y", false, "do not ask to confirm the count")
	waitFlag(fs, o)
}

func waitFlag(fs *pflag.FlagSet, o *options) {
	fs.BoolVar(&o.wait, "wait", false, "wait until the job is done or cancelled, showing its progress")
}

// checkTimes refuses a --failed-after/--failed-before that is no RFC 3339 time.
func checkTimes(o *options) error {
	for flag, v := range map[string]string{"--failed-after": o.failedAfter, "--failed-before": o.failedBefore} {
		if v == "" {
			continue
		}
		if _, err := time.Parse(time.RFC3339Nano, v); err != nil {
			return usagef("%s %q is no RFC 3339 time (e.g. 2026-12-03T08:00:00Z)", flag, v)
		}
	}
	return nil
}

func jobFilterOf(o *options) wire.JobFilter {
	f := wire.JobFilter{Subscriptions: o.subscriptions, State: o.state, AggregateType: o.aggregateType, Class: o.class, Message: o.message, Group: o.group}
	if mod, sha, ok := strings.Cut(o.provenBy, ":"); ok {
		f.Proven = &wire.JobProof{Module: mod, SHA256: sha}
	}
	if t, err := time.Parse(time.RFC3339Nano, o.failedAfter); err == nil {
		f.FailedAfter = &t
	}
	if t, err := time.Parse(time.RFC3339Nano, o.failedBefore); err == nil {
		f.FailedBefore = &t
	}
	return f
}

func describeJobFilter(f wire.JobFilter) string {
	var parts []string
	add := func(k, v string) {
		if v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	add("subscription", strings.Join(f.Subscriptions, ", "))
	add("state", f.State)
	add("type", f.AggregateType)
	add("class", f.Class)
	if f.Message != "" {
		add("message", strconv.Quote(f.Message))
	}
	if f.FailedAfter != nil {
		add("first failed after", timestamp(*f.FailedAfter))
	}
	if f.FailedBefore != nil {
		add("first failed before", timestamp(*f.FailedBefore))
	}
	if len(parts) == 0 {
		return "everything parked"
	}
	return strings.Join(parts, ", ")
}

// jobsStart runs the dry run, asks to confirm its count (unless --yes), and
// creates the job.
func jobsStart(x *invocation, action string) error {
	o := x.opts
	if err := checkTimes(o); err != nil {
		return err
	}
	if !o.dryRun && strings.TrimSpace(o.reason) == "" {
		return usagef("--reason is required: say why (it is kept in every aggregate's history)")
	}
	if x.flags.Changed("rate") && !(o.rate > 0) {
		return usagef("--rate must be more than 0")
	}
	if mod, sha, ok := strings.Cut(o.provenBy, ":"); o.provenBy != "" && (!ok || mod == "" || sha == "" || o.group == "") {
		return usagef("--proven-by wants MODULE:SHA256 (as berth parked replay --group prints it) and --group")
	}
	req := wire.JobRequest{Action: action, Filter: jobFilterOf(o), Reason: strings.TrimSpace(o.reason), DryRun: true}
	if o.yes && !o.dryRun {
		// Nothing to confirm: the job's own count is the one count.
		return jobsCreate(x, req)
	}
	raw, err := x.client.postJSON(x.ctx, apiPath("jobs"), req)
	if err != nil {
		return err
	}
	var dry wire.JobDryRun
	if err := decode(raw, &dry); err != nil {
		return err
	}
	if o.dryRun && x.global.json {
		return x.printJSON(raw)
	}
	fmt.Fprintf(x.stdout, "%d parked aggregate(s) match %s\n", dry.Matched, describeJobFilter(req.Filter))
	if len(dry.Sample) > 0 {
		t := x.table("SUBSCRIPTION", "AGGREGATE", "STATE", "ERROR")
		for _, r := range dry.Sample {
			t.row(r.Subscription, r.AggregateType+"/"+r.AggregateID, r.State, errorText(r.Error))
		}
		if err := t.flush(); err != nil {
			return err
		}
		if dry.Matched > len(dry.Sample) {
			fmt.Fprintf(x.stdout, "… and %d more\n", dry.Matched-len(dry.Sample))
		}
	}
	if o.dryRun {
		return nil
	}
	if dry.Matched == 0 {
		fmt.Fprintln(x.stdout, "nothing to do")
		return nil
	}
	if !o.yes {
		fmt.Fprintf(x.stderr, "%s these %d aggregate(s)? Type %d to confirm: ", action, dry.Matched, dry.Matched)
		answer, _ := bufio.NewReader(x.stdin).ReadString('\n')
		if strings.TrimSpace(answer) != strconv.Itoa(dry.Matched) {
			fmt.Fprintln(x.stderr)
			return usagef("not confirmed: nothing was changed (type the count, or pass --yes)")
		}
	}
	return jobsCreate(x, req)
}

// jobsCreate creates the job req asks for (--rate given, it is sent).
func jobsCreate(x *invocation, req wire.JobRequest) error {
	o := x.opts
	req.DryRun = false
	if x.flags.Changed("rate") {
		req.Rate = &o.rate
	}
	raw, err := x.client.postJSON(x.ctx, apiPath("jobs"), req)
	if err != nil {
		return err
	}
	var j wire.Job
	if err := decode(raw, &j); err != nil {
		return err
	}
	if !o.wait {
		if x.global.json {
			return x.printJSON(raw)
		}
		fmt.Fprintf(x.stdout, "job %d: %s of %d aggregate(s) at %v a second; follow it with: berth jobs show %d --wait\n",
			j.ID, j.Action, j.Matched, j.Rate, j.ID)
		return nil
	}
	return waitJob(x, j.ID)
}

func (c *client) job(x *invocation, id string) ([]byte, wire.Job, error) {
	raw, err := c.get(x.ctx, apiPath("jobs", id), nil)
	if err != nil {
		return nil, wire.Job{}, err
	}
	var j wire.Job
	return raw, j, decode(raw, &j)
}

// waitJob polls the job until it is no longer running, a line of progress
// on stderr each time it moved.
func waitJob(x *invocation, id uint64) error {
	last := -1
	for {
		raw, j, err := x.client.job(x, strconv.FormatUint(id, 10))
		if err != nil {
			return err
		}
		if n := j.Done + j.Failed + j.Gone; n != last {
			fmt.Fprintf(x.stderr, "job %d: %d of %d (%d failed, %d resolved meanwhile)\n", j.ID, n, j.Matched, j.Failed, j.Gone)
			last = n
		}
		if j.State != "running" {
			if x.global.json {
				return x.printJSON(raw)
			}
			return printJob(x, j)
		}
		select {
		case <-x.ctx.Done():
			return x.ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func printJob(x *invocation, j wire.Job) error {
	kv := newKeyValues(x.stdout)
	kv.add("job", "%d", j.ID)
	kv.add("action", "%s", j.Action)
	kv.add("state", "%s", j.State)
	if j.Stopped != "" {
		kv.add("stopped", "by the host: %s", j.Stopped)
	}
	kv.add("filter", "%s", describeJobFilter(j.Filter))
	kv.add("by", "%s: %q", j.Actor, j.Reason)
	kv.add("rate", "%v a second", j.Rate)
	kv.add("progress", "%d of %d matched: %d done, %d failed, %d resolved meanwhile", j.Done+j.Failed+j.Gone, j.Matched, j.Done, j.Failed, j.Gone)
	kv.add("created", "%s (%s)", timestamp(j.Created), relative(j.Created, x.now))
	if !j.Finished.IsZero() {
		kv.add("finished", "%s (%s)", timestamp(j.Finished), relative(j.Finished, x.now))
	}
	for _, f := range j.Failures {
		kv.add("failed", "%s %s/%s: %s", f.Subscription, f.AggregateType, f.AggregateID, f.Error)
	}
	if j.FailuresDropped > 0 {
		kv.add("failed", "… and %d more not kept", j.FailuresDropped)
	}
	return kv.flush()
}

func jobsShow(x *invocation, args []string) error {
	if x.opts.wait {
		id, err := strconv.ParseUint(args[0], 10, 64)
		if err != nil {
			return usagef("job ids are numbers, not %q", args[0])
		}
		return waitJob(x, id)
	}
	raw, j, err := x.client.job(x, args[0])
	if err != nil {
		return err
	}
	if x.global.json {
		return x.printJSON(raw)
	}
	return printJob(x, j)
}

func jobsCancel(x *invocation, args []string) error {
	raw, err := x.client.postJSON(x.ctx, apiPath("jobs", args[0], "cancel"), nil)
	var j wire.Job
	if done, err := x.decoded(raw, err, &j); done || err != nil {
		return err
	}
	fmt.Fprintf(x.stdout, "job %d cancelled after %d of %d\n", j.ID, j.Done+j.Failed+j.Gone, j.Matched)
	return nil
}

func jobsList(x *invocation, _ []string) error {
	raw, err := x.client.get(x.ctx, apiPath("jobs"), url.Values{"limit": {"1000"}})
	var list wire.JobList
	if done, err := x.decoded(raw, err, &list); done || err != nil {
		return err
	}
	if len(list.Jobs) == 0 {
		fmt.Fprintln(x.stdout, "no jobs")
		return nil
	}
	t := x.table("JOB", "ACTION", "STATE", "PROGRESS", "BY", "REASON", "FILTER")
	for _, j := range list.Jobs {
		t.row(strconv.FormatUint(j.ID, 10), j.Action, j.State, fmt.Sprintf("%d/%d", j.Done+j.Failed+j.Gone, j.Matched),
			j.Actor, j.Reason, describeJobFilter(j.Filter))
	}
	return t.flush()
}

func (a *app) auditCmd() *cobra.Command {
	c := a.verb("audit", "Show the audit log: every state-changing call, who made it, when and why", 0, auditFlags, auditList)
	c.Aliases = []string{"log"}
	return c
}

func auditFlags(fs *pflag.FlagSet, o *options) {
	fs.IntVar(&o.limit, "limit", 100, "at most `N` entries")
	fs.StringVar(&o.after, "after", "", "the entries after `SEQ` (from a previous page)")
}

func auditList(x *invocation, _ []string) error {
	if x.opts.limit < 1 {
		return usagef("--limit must be 1 or more")
	}
	q := url.Values{"limit": {strconv.Itoa(x.opts.limit)}}
	if x.opts.after != "" {
		q.Set("after", x.opts.after)
	}
	raw, err := x.client.get(x.ctx, apiPath("audit"), q)
	var page wire.AuditPage
	if done, err := x.decoded(raw, err, &page); done || err != nil {
		return err
	}
	if len(page.Entries) == 0 {
		fmt.Fprintln(x.stdout, "no audit entries")
		return nil
	}
	t := x.table("SEQ", "TIME", "ACTOR", "ACTION", "TARGET", "REASON", "DETAIL")
	for _, e := range page.Entries {
		t.row(strconv.FormatUint(e.Seq, 10), timestamp(e.Time), e.Actor, e.Action, orDash(e.Target), orDash(e.Reason), orDash(e.Detail))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if page.Next != "" {
		fmt.Fprintf(x.stderr, "more entries: berth audit --after %s\n", page.Next)
	}
	return nil
}
