package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

const (
	defaultServer  = "http://127.0.0.1:8080"
	defaultTimeout = 60 * time.Second
)

// clientAnnotation marks the commands that talk to a running host: they
// take the client flags (--server, --json, …) and their help lists them.
const clientAnnotation = "berth.client"

// app is one run of the program: its output, its environment, and the flags
// every operator verb shares.
type app struct {
	args           []string
	stdin          io.Reader
	stdout, stderr io.Writer
	env            func(string) string
	opts           clientFlags
	server         string // the server the verb talks to, once known, for messages
}

// clientFlags are the flags of every operator verb.
type clientFlags struct {
	server    string
	tokenFile string
	json      bool
	wide      bool
	timeout   time.Duration
}

// rootHelp is what `berth --help` says before the list of commands.
const rootHelp = `Berth runs event handlers compiled to WebAssembly, and owns their failures.

"berth serve" runs the host; every other verb is the operator CLI, which talks to a running
host over REST: --server host:port or URL (default $BERTH_SERVER, else ` + defaultServer + `),
token from --token-file FILE or $BERTH_TOKEN (sent as Authorization: Bearer).
--json prints the server's JSON instead of a table; --wide keeps each table row on one line.

Flags may come before or after the arguments.
An argument that starts with "-" (an id such as -1) goes after "--", which ends the flags:
  berth parked resume SUB TYPE --reason R -- -1

Exit codes: 0 done, 1 the server refused or failed, 2 usage error (nothing was sent),
3 cannot reach the server, 4 not found; "berth help exit-codes" says more.`

// usageTemplate is cobra's, with the global flags shown only where they
// apply (the operator verbs) and a footer there on "--" and exit codes; a
// noun shows "berth NOUN [command]" only (it runs only to say a verb is
// missing).
const usageTemplate = `Usage:{{if and .Runnable (not .HasAvailableSubCommands)}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if and .HasAvailableInheritedFlags (index .Annotations "` + clientAnnotation + `")}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasHelpSubCommands}}

Additional help topics:{{range .Commands}}{{if .IsAdditionalHelpTopicCommand}}
  {{rpad .CommandPath .CommandPathPadding}} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}{{if and .HasParent (index .Annotations "` + clientAnnotation + `")}}

An argument that starts with "-" (an id such as -1) goes after "--", which ends the flags.
Exit codes: 0 done, 1 the server refused or failed, 2 usage error, 3 cannot reach the server,
4 not found ("berth help exit-codes").{{end}}
`

// newRoot builds the command tree of one run.
func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:                        "berth",
		Short:                      "Run the Berth host, and operate it",
		Long:                       rootHelp,
		SilenceErrors:              true,
		SilenceUsage:               true,
		SuggestionsMinimumDistance: 2,
		Args:                       a.verbOf,
		RunE:                       a.missingVerb,
		PersistentPreRunE:          a.checkClientFlags,
		Annotations:                map[string]string{clientAnnotation: "yes"},
	}
	root.SetArgs(a.args)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(a.flagError)

	server := a.env("BERTH_SERVER")
	if server == "" {
		server = defaultServer
	}
	pf := root.PersistentFlags()
	pf.StringVar(&a.opts.server, "server", server, "the host, as `HOST:PORT` or an http(s) URL ($BERTH_SERVER)")
	pf.StringVar(&a.opts.tokenFile, "token-file", "", "read the bearer token from `FILE` (default: $BERTH_TOKEN)")
	pf.BoolVar(&a.opts.json, "json", false, "print the server's JSON instead of a table")
	pf.BoolVar(&a.opts.wide, "wide", false, "keep each table row on one line instead of wrapping long cells")
	pf.DurationVar(&a.opts.timeout, "timeout", defaultTimeout, "give up on a request after this long")

	root.AddCommand(a.serveCmd(), a.versionCmd(), a.configCmd(), a.newCmd(),
		a.modulesCmd(), a.eventsCmd(), a.subscriptionsCmd(), a.parkedCmd(), a.jobsCmd(), a.auditCmd(), a.clusterCmd(),
		topic("exit-codes", "What the exit codes mean", exitCodesHelp),
		topic("environment", "The environment variables the CLI reads", environmentHelp))
	root.SetHelpCommand(a.helpCmd(root))
	return root
}

// environmentHelp is the `berth help environment` topic.
const environmentHelp = `The operator verbs read:

  BERTH_SERVER  the host, as host:port or an http(s) URL (--server overrides it;
                default ` + defaultServer + `)
  BERTH_TOKEN   the bearer token (--token-file overrides it)

berth serve reads no environment of its own; [[auth.tokens]] in its configuration can
name variables that hold the tokens (see docs/config.md).`

// topic is a help topic: `berth help NAME` shows it.
func topic(name, short, text string) *cobra.Command {
	return &cobra.Command{Use: name, Short: short, Long: text}
}

// group is a noun whose verbs are its subcommands.
func (a *app) group(use string, aliases []string, short string, verbs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Aliases: aliases, Short: short, Args: a.verbOf, RunE: a.missingVerb,
		SuggestionsMinimumDistance: 2, Annotations: map[string]string{clientAnnotation: "yes"}}
	c.AddCommand(verbs...)
	return c
}

// verbOf refuses an argument where a verb was expected, with the verbs
// closest to it.
func (a *app) verbOf(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	what := "verb"
	if !cmd.HasParent() {
		what = "command"
	}
	msg := fmt.Sprintf("unknown %s %q", what, args[0])
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usageError{msg: msg}
}

// missingVerb is a noun given without its verb.
func (a *app) missingVerb(cmd *cobra.Command, _ []string) error {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	if !cmd.HasParent() {
		return usageError{fmt.Sprintf("missing command, one of: %s", strings.Join(names, ", ")), true}
	}
	return usageError{fmt.Sprintf("missing verb, one of: %s", strings.Join(names, ", ")), true}
}

// flagError makes a bad flag a usage error, with a hint when the flag is a
// long one written with one dash, or an argument that starts with "-".
func (a *app) flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	for _, arg := range a.args {
		if arg == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(arg, "-"), "=")
		if strings.HasPrefix(arg, "-") && !strings.HasPrefix(arg, "--") && len(name) > 1 && cmd.Flags().Lookup(name) != nil {
			return usagef("%s (long flags take two dashes: --%s)", msg, name)
		}
	}
	if strings.HasPrefix(msg, "unknown") && cmd.Args != nil && cmd.Annotations["nargs"] != "0" {
		msg += fmt.Sprintf("\nan argument that starts with \"-\" (an id such as -1) goes after \"--\": %s [flags] -- ARG...", cmd.CommandPath())
	}
	return usageError{msg: msg}
}

// checkClientFlags refuses a client flag given to a command that sends
// nothing (serve, version, config check), rather than ignoring it.
func (a *app) checkClientFlags(cmd *cobra.Command, _ []string) error {
	if cmd.Annotations[clientAnnotation] != "" {
		return nil
	}
	for _, name := range []string{"server", "token-file", "json", "wide", "timeout"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			return usagef("--%s is a flag of the operator verbs; %s does not take it", name, cmd.CommandPath())
		}
	}
	return nil
}

// helpCmd is `berth help [COMMAND|TOPIC]`: cobra's, but an unknown topic is
// a usage error with the nearest names rather than the root's usage.
func (a *app) helpCmd(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:   "help [command|topic]",
		Short: "Help about any command or topic",
		Long:  `"berth help COMMAND" (or "berth COMMAND --help") shows how to use it; "berth help TOPIC" shows the topic.`,
		ValidArgsFunction: func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			cmd, _, err := root.Find(args)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, sub := range cmd.Commands() {
				if (sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand()) && strings.HasPrefix(sub.Name(), toComplete) {
					out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				msg := fmt.Sprintf("no help topic %q", strings.Join(args, " "))
				if err == nil {
					if s := cmd.SuggestionsFor(rest[0]); len(s) > 0 {
						msg += "; did you mean " + strings.Join(s, " or ") + "?"
					}
				}
				return usageError{msg: msg}
			}
			cmd.InitDefaultHelpFlag() // as on COMMAND --help, whose flags list -h
			return cmd.Help()
		},
	}
}
