package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Exit codes of the operator verbs, as the usage text documents them.
const (
	exitOK          = 0 // done
	exitFailed      = 1 // the server refused or failed; its problem is printed
	exitUsage       = 2 // bad verb, flag or argument; nothing was sent
	exitUnreachable = 3 // no answer from the server
)

const (
	defaultServer  = "http://127.0.0.1:8080"
	defaultTimeout = 60 * time.Second
)

// options are the parsed flags of one invocation: the global ones and those
// of its verb.
type options struct {
	server  string
	json    bool
	timeout time.Duration

	// modules, parked
	reason         string
	throughVersion uint64
	subscription   string
	state          string
	aggregateType  string
	after          string
	limit          int
	// subs reset
	position optUint
	// events append
	aggType, aggID, owner string
	expectedVersion       optUint
	file                  string
}

// optUint is a uint64 flag that knows whether it was given.
type optUint struct {
	v   uint64
	set bool
}

// String formats the value for flag's defaults; empty when not given.
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

// command is one operator verb.
type command struct {
	noun, verb string
	synopsis   string // what follows "host NOUN VERB"
	nargs      int    // positional arguments; -1 for any number
	flags      func(fs *flag.FlagSet, o *options)
	run        func(x *invocation, args []string) error
}

// commands is the table of operator verbs.
func commands() []command {
	return []command{
		{"modules", "push", "NAME FILE.wasm", 2, nil, modulesPush},
		{"modules", "list", "", 0, nil, modulesList},
		{"modules", "show", "NAME", 1, nil, modulesShow},
		{"modules", "rm", "NAME", 1, nil, modulesRemove},
		{"events", "append", "--type AGG_TYPE --id AGG_ID [--owner O] [--expected-version N] EVENT_TYPE[=JSON] ... | --file BODY.json", -1, eventsFlags, eventsAppend},
		{"subs", "list", "", 0, nil, subsList},
		{"subs", "show", "NAME", 1, nil, subsShow},
		{"subs", "pause", "NAME", 1, nil, subsPause},
		{"subs", "unpause", "NAME", 1, nil, subsUnpause},
		{"subs", "reset", "NAME --position N", 1, resetFlags, subsReset},
		{"parked", "list", "[--subscription S] [--state retrying|waiting|resuming] [--aggregate-type T] [--limit N] [--after CURSOR]", 0, parkedListFlags, parkedList},
		{"parked", "show", "SUB TYPE ID", 3, nil, parkedShow},
		{"parked", "resume", "SUB TYPE ID [--reason R]", 3, resumeFlags, parkedResume},
		{"parked", "skip", "SUB TYPE ID [--through-version N] [--reason R]", 3, skipFlags, parkedSkip},
	}
}

func eventsFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.aggType, "type", "", "aggregate type (required unless --file)")
	fs.StringVar(&o.aggID, "id", "", "aggregate id (required unless --file)")
	fs.StringVar(&o.owner, "owner", "", "owner of the aggregate (ownerId)")
	fs.Var(&o.expectedVersion, "expected-version", "append only if the aggregate is at this version (0: a new aggregate)")
	fs.StringVar(&o.file, "file", "", "send this file as the whole POST /v1/events body instead")
}

func resetFlags(fs *flag.FlagSet, o *options) {
	fs.Var(&o.position, "position", "position to deliver from next (required; 1 replays from the beginning)")
}

func parkedListFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.subscription, "subscription", "", "only this subscription")
	fs.StringVar(&o.state, "state", "", "only this state: retrying, waiting or resuming")
	fs.StringVar(&o.aggregateType, "aggregate-type", "", "only this aggregate type")
	fs.IntVar(&o.limit, "limit", 0, "read one page of at most N records (default: every page)")
	fs.StringVar(&o.after, "after", "", "read the page after this cursor (from a previous --limit)")
}

func resumeFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.reason, "reason", "", "why, kept in the record's history")
}

func skipFlags(fs *flag.FlagSet, o *options) {
	resumeFlags(fs, o)
	fs.Uint64Var(&o.throughVersion, "through-version", 0, "skip the events up to this version only (default: every held event)")
}

// invocation is one run of an operator verb.
type invocation struct {
	ctx            context.Context
	opts           options
	client         *client
	stdout, stderr io.Writer
	now            time.Time
}

// usageError is a command line the CLI refuses before sending anything.
type usageError struct{ msg string }

// Error is what is wrong with the command line.
func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// cli runs an operator verb against a running host and returns the exit
// code. env reads the environment (BERTH_SERVER, BERTH_TOKEN).
func cli(args []string, stdout, stderr io.Writer, env func(string) string) int {
	lead, noun, verb, rest := splitCommand(args)
	var cmd *command
	var verbs []string
	for _, c := range commands() {
		if c.noun == noun {
			verbs = append(verbs, c.verb)
			if c.verb == verb {
				cmd = &c
			}
		}
	}
	switch {
	case cmd != nil:
	case noun == "":
		fmt.Fprintf(stderr, "host: missing command\n\n%s", usage)
		return exitUsage
	case len(verbs) == 0:
		fmt.Fprintf(stderr, "host: unknown command %q\n\n%s", noun, usage)
		return exitUsage
	case verb == "-h" || verb == "--help" || verb == "help":
		printNounHelp(stdout, noun)
		return exitOK
	case verb == "" || strings.HasPrefix(verb, "-"):
		fmt.Fprintf(stderr, "host %s: missing verb, one of: %s\n", noun, strings.Join(verbs, ", "))
		printNounHelp(stderr, noun)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "host %s: unknown verb %q, one of: %s\n", noun, verb, strings.Join(verbs, ", "))
		printNounHelp(stderr, noun)
		return exitUsage
	}

	fs := flag.NewFlagSet("host "+noun+" "+verb, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	o := options{}
	server := env("BERTH_SERVER")
	if server == "" {
		server = defaultServer
	}
	fs.StringVar(&o.server, "server", server, "URL of the host ($BERTH_SERVER)")
	fs.BoolVar(&o.json, "json", false, "print the server's JSON instead of a table")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "give up on a request after this long")
	if cmd.flags != nil {
		cmd.flags(fs, &o)
	}
	pos, err := parseInterleaved(fs, append(lead, rest...))
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(stdout, fs, cmd)
		return exitOK
	}
	if err != nil { // the flag package has said what is wrong
		if strings.HasPrefix(err.Error(), "flag provided but not defined") && cmd.nargs != 0 {
			fmt.Fprintf(stderr, "an argument that starts with \"-\" (an id such as -1) goes after \"--\": host %s %s [flags] -- ARG...\n", noun, verb)
		}
		fmt.Fprintf(stderr, "usage: host %s %s %s\n", noun, verb, cmd.synopsis)
		return exitUsage
	}
	if cmd.nargs >= 0 && len(pos) != cmd.nargs {
		fmt.Fprintf(stderr, "host %s %s: want %d argument(s), got %d\nusage: host %s %s %s\n",
			noun, verb, cmd.nargs, len(pos), noun, verb, cmd.synopsis)
		return exitUsage
	}
	if o.timeout <= 0 {
		fmt.Fprintf(stderr, "host %s %s: --timeout must be more than 0\n", noun, verb)
		return exitUsage
	}
	c, err := newClient(o.server, env("BERTH_TOKEN"), o.timeout)
	if err != nil {
		fmt.Fprintf(stderr, "host %s %s: %v\n", noun, verb, err)
		return exitUsage
	}
	x := &invocation{ctx: context.Background(), opts: o, client: c, stdout: stdout, stderr: stderr, now: time.Now()}
	return x.exit(cmd, cmd.run(x, pos))
}

// splitCommand finds NOUN and VERB after any leading global flags, so that
// `host --server URL parked list` works too; lead and rest are what is left
// for the flag parser.
func splitCommand(args []string) (lead []string, noun, verb string, rest []string) {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && args[i] != "-" && args[i] != "--" {
		name := strings.TrimLeft(args[i], "-")
		i++
		if !strings.Contains(name, "=") && (name == "server" || name == "timeout") && i < len(args) {
			i++
		}
	}
	lead = slices.Clone(args[:i])
	if i < len(args) {
		noun = args[i]
		i++
	}
	if i < len(args) {
		verb = args[i]
		i++
	}
	return lead, noun, verb, args[i:]
}

// parseInterleaved parses flags anywhere among the positional arguments
// (`parked skip SUB TYPE ID --reason R`); after "--" everything is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func printNounHelp(w io.Writer, noun string) {
	fmt.Fprintln(w, "usage:")
	for _, c := range commands() {
		if c.noun == noun {
			fmt.Fprintf(w, "  host %s %s %s\n", c.noun, c.verb, c.synopsis)
		}
	}
	fmt.Fprintln(w, "global flags: --server URL, --json, --timeout D; see host help")
	fmt.Fprintln(w, `an argument that starts with "-" (an id such as -1) goes after "--", which ends the flags`)
}

func printCommandHelp(w io.Writer, fs *flag.FlagSet, cmd *command) {
	fmt.Fprintf(w, "usage: host %s %s %s\n\nflags:\n", cmd.noun, cmd.verb, cmd.synopsis)
	fs.SetOutput(w)
	fs.PrintDefaults()
	if cmd.nargs != 0 {
		fmt.Fprintf(w, "\nflags go before \"--\"; every argument after it is an argument, one that starts with \"-\" too:\n  host %s %s [flags] -- ARG...\n", cmd.noun, cmd.verb)
	}
	fmt.Fprint(w, "\nexit codes: 0 done, 1 the server refused or failed, 2 usage error, 3 cannot reach the server\n")
}

// exit reports err on stderr and maps it to an exit code.
func (x *invocation) exit(cmd *command, err error) int {
	if err == nil {
		return exitOK
	}
	var ue usageError
	var pe *problemError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintf(x.stderr, "host %s %s: %v\nusage: host %s %s %s\n", cmd.noun, cmd.verb, err, cmd.noun, cmd.verb, cmd.synopsis)
		return exitUsage
	case errors.As(err, &pe):
		if x.opts.json && json.Valid(pe.Body) {
			fmt.Fprintf(x.stderr, "%s\n", strings.TrimSpace(string(pe.Body)))
		} else {
			fmt.Fprintf(x.stderr, "host %s %s: %v\n", cmd.noun, cmd.verb, pe)
		}
		return exitFailed
	case isUnreachable(err):
		fmt.Fprintf(x.stderr, "host %s %s: cannot reach the server at %s: %v\n", cmd.noun, cmd.verb, x.client.base, err)
		return exitUnreachable
	default:
		fmt.Fprintf(x.stderr, "host %s %s: %v\n", cmd.noun, cmd.verb, err)
		return exitFailed
	}
}

// printJSON writes the server's JSON as is, ending with a newline.
func (x *invocation) printJSON(raw []byte) error {
	raw = []byte(strings.TrimRight(string(raw), "\n"))
	_, err := fmt.Fprintf(x.stdout, "%s\n", raw)
	return err
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
