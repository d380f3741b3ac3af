package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// options are the flags of one operator verb (each verb defines its own).
type options struct {
	// parked resume, skip
	reason         string
	throughVersion uint64
	// parked list
	subscription  string
	state         string
	aggregateType string
	after         string
	limit         int
	class         string
	message       string
	group         string
	failedAfter   string
	failedBefore  string
	ndjson        bool
	all           bool // parked list: every page
	// subscriptions pause
	until    string
	pauseFor time.Duration
	// jobs
	subscriptions []string
	rate          float64
	yes, dryRun   bool
	wait          bool
	// subscriptions reset
	position optUint
	// events append
	aggType, aggID, owner string
	expectedVersion       optUint
	file                  string
	// cluster
	partitions bool
	// parked replay
	module, capsule, save string
	maxTime               time.Duration // parked replay's own bound
	parallel              int           // parked replay --group's replays at once
	provenBy              string        // jobs: the sha256 of the candidate a proof names
}

// optUint is a uint64 flag that knows whether it was given.
type optUint struct {
	v   uint64
	set bool
}

// String formats the value for the help's defaults; empty when not given.
func (o *optUint) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatUint(o.v, 10)
}

// Set parses a whole number, 0 or more.
func (o *optUint) Set(s string) error {
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return errors.New("must be a whole number, 0 or more")
	}
	o.v, o.set = v, true
	return nil
}

// Type names the value in the help: --position N.
func (o *optUint) Type() string { return "N" }

// invocation is one run of an operator verb.
type invocation struct {
	ctx            context.Context
	opts           *options
	stdin          io.Reader // a confirmation's answer
	global         clientFlags
	flags          *pflag.FlagSet // the verb's, to tell a flag given empty from one left out
	client         *client
	stdout, stderr io.Writer
	now            time.Time
}

// verb is an operator verb: use is "NAME ARGS…", nargs its number of
// arguments (-1: any), flags defines its own flags on o.
func (a *app) verb(use, short string, nargs int, flags func(fs *pflag.FlagSet, o *options), run func(x *invocation, args []string) error) *cobra.Command {
	o := &options{}
	c := &cobra.Command{
		Use:         use,
		Short:       short,
		Args:        exactArgs(nargs),
		Annotations: map[string]string{clientAnnotation: "yes", "nargs": strconv.Itoa(nargs)},
	}
	if nargs == 0 {
		c.ValidArgsFunction = cobra.NoFileCompletions
	}
	if flags != nil {
		flags(c.Flags(), o)
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		x, err := a.invocation(cmd, o)
		if err != nil {
			return err
		}
		if err := run(x, args); err != nil {
			var ue usageError
			if errors.As(err, &ue) {
				return err
			}
			return runError{err}
		}
		return nil
	}
	return c
}

// exactArgs checks the number of arguments (-1: any number).
func exactArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if n >= 0 && len(args) != n {
			return usagef("want %d argument(s), got %d", n, len(args))
		}
		return nil
	}
}

// invocation checks the client flags and connects the verb to its server.
func (a *app) invocation(cmd *cobra.Command, o *options) (*invocation, error) {
	g := a.opts
	if g.timeout <= 0 {
		return nil, usagef("--timeout must be more than 0")
	}
	token := a.env("BERTH_TOKEN")
	if g.tokenFile != "" {
		b, err := os.ReadFile(g.tokenFile)
		if err != nil {
			return nil, usagef("--token-file: %v", err)
		}
		if token = strings.TrimSpace(string(b)); token == "" || strings.ContainsAny(token, "\r\n") {
			return nil, usagef("--token-file %s must hold one token on one line", g.tokenFile)
		}
	}
	c, err := newClient(g.server, token, g.timeout)
	if err != nil {
		return nil, usageError{msg: err.Error()}
	}
	a.server = c.base
	return &invocation{ctx: context.Background(), opts: o, global: g, flags: cmd.Flags(), client: c,
		stdin: a.stdin, stdout: a.stdout, stderr: a.stderr, now: time.Now()}, nil
}

// decoded takes a verb's answer: an error is returned as is; with --json the
// answer is printed as sent (done); otherwise it is decoded into v.
func (x *invocation) decoded(raw []byte, err error, v any) (done bool, _ error) {
	if err != nil {
		return true, err
	}
	if x.global.json {
		return true, x.printJSON(raw)
	}
	return false, decode(raw, v)
}

// printIndented writes v as indented JSON.
func (x *invocation) printIndented(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return x.printJSON(b)
}

// printJSON writes the server's JSON as is, ending with a newline.
func (x *invocation) printJSON(raw []byte) error {
	raw = []byte(strings.TrimRight(string(raw), "\n"))
	_, err := fmt.Fprintf(x.stdout, "%s\n", raw)
	return err
}

// table starts a table on stdout that wraps long cells unless --wide.
func (x *invocation) table(header ...string) *table {
	t := newTable(x.stdout, header...)
	if !x.global.wide {
		t.wrapAt(wrapWidth)
	}
	return t
}

// decode reads the server's answer into v.
func decode(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("the server's answer is not what this CLI understands: %v", err)
	}
	return nil
}

// readFile reads a file named on the command line; failing to is a usage
// error, since nothing was sent.
func readFile(name string) ([]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, usagef("%v", err)
	}
	return b, nil
}
