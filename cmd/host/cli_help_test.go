package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// commandPaths lists every command a user can run or ask help for, the
// help topics included, as argument lists: [serve], [parked skip], …
func commandPaths(t *testing.T) [][]string {
	t.Helper()
	a := &app{env: func(string) string { return "" }, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}
	root := a.newRoot()
	root.InitDefaultCompletionCmd()
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			if !sub.IsAvailableCommand() && !sub.IsAdditionalHelpTopicCommand() {
				continue
			}
			p := append(append([]string{}, path...), sub.Name())
			paths = append(paths, p)
			walk(sub, p)
		}
	}
	walk(root, nil)
	return paths
}

// TestHelpOnEveryVerb: every command, serve and the topics included,
// answers --help and `help PATH` the same way, on stdout with exit 0, in
// one format; the operator verbs list the client flags with two dashes,
// the others do not list them.
func TestHelpOnEveryVerb(t *testing.T) {
	paths := commandPaths(t)
	seen := map[string]bool{}
	for _, p := range paths {
		seen[strings.Join(p, " ")] = true
	}
	for _, want := range []string{"serve", "version", "config check", "completion bash", "modules push", "events append",
		"subscriptions reset", "parked skip", "exit-codes", "environment"} {
		if !seen[want] {
			t.Errorf("no command %q in %q", want, paths)
		}
	}
	for _, p := range paths {
		name := strings.Join(p, " ")
		t.Run(name, func(t *testing.T) {
			code, flagHelp, errOut := runCLI("", append(p, "--help")...)
			if code != exitOK || errOut != "" {
				t.Fatalf("berth %s --help: exit %d, stderr %q", name, code, errOut)
			}
			code, topicHelp, errOut := runCLI("", append([]string{"help"}, p...)...)
			if code != exitOK || errOut != "" || topicHelp != flagHelp {
				t.Errorf("berth help %s: exit %d, stderr %q, and not the same as --help:\n%s\n---\n%s", name, code, errOut, topicHelp, flagHelp)
			}
			topic := p[0] == "exit-codes" || p[0] == "environment"
			if !topic && !strings.Contains(flagHelp, "Usage:\n  berth "+name) {
				t.Errorf("berth %s --help has no usage line naming berth %s:\n%s", name, name, flagHelp)
			}
			client := p[0] == "modules" || p[0] == "events" || p[0] == "subscriptions" || p[0] == "parked" || p[0] == "jobs" || p[0] == "audit" || p[0] == "cluster"
			if got := strings.Contains(flagHelp, "Global Flags:\n") && strings.Contains(flagHelp, "      --server HOST:PORT"); got != client {
				t.Errorf("berth %s --help lists the client flags: %v, want %v:\n%s", name, got, client, flagHelp)
			}
		})
	}
	// The root's help says what every command is for, and the exit codes.
	code, out, _ := runCLI("", "--help")
	for _, want := range []string{"Usage:\n  berth [command]", "serve", "subscriptions", "exit-codes", "3 cannot reach the server", "4 not found"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("berth --help: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
}

// TestDidYouMean: an unknown command, verb or help topic is a usage error
// (exit 2) naming the nearest ones, a misspelt long flag with one dash too;
// nothing is sent.
func TestDidYouMean(t *testing.T) {
	tests := []step{
		{name: "command", args: []string{"parkd", "list"}, code: exitUsage, stderr: []string{`berth: unknown command "parkd"; did you mean parked?`}},
		{name: "command far from any", args: []string{"frobnicate"}, code: exitUsage, stderr: []string{`unknown command "frobnicate"`, `"berth --help" lists them`}},
		{name: "alias", args: []string{"subs", "shwo", "X"}, code: exitUsage, stderr: []string{`berth subscriptions: unknown verb "shwo"; did you mean show?`}},
		{name: "another word for remove", args: []string{"modules", "delete", "m"}, code: exitUsage, stderr: []string{`unknown verb "delete"; did you mean remove?`}},
		{name: "config verb", args: []string{"config", "chek", "f.toml"}, code: exitUsage, stderr: []string{`berth config: unknown verb "chek"; did you mean check?`}},
		{name: "help topic", args: []string{"help", "parked", "skp"}, code: exitUsage, stderr: []string{`no help topic "parked skp"; did you mean skip?`}},
		{name: "help of nothing", args: []string{"help", "nothing"}, code: exitUsage, stderr: []string{`no help topic "nothing"`}},
		{name: "one dash", args: []string{"parked", "list", "-json"}, code: exitUsage, stderr: []string{"long flags take two dashes: --json"}},
		{name: "one dash on serve", args: []string{"serve", "-listen", "127.0.0.1:0"}, code: exitUsage, stderr: []string{"long flags take two dashes: --listen"}},
		{name: "client flag on serve", args: []string{"serve", "--server", "h:1"}, code: exitUsage, stderr: []string{"--server is a flag of the operator verbs; berth serve does not take it"}},
		{name: "client flag on version", args: []string{"version", "--json"}, code: exitUsage, stderr: []string{"--json is a flag of the operator verbs"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.run(t, "") })
	}
}

// TestCompletion: cobra's completion scripts, for berth, in every shell
// it knows; the operator verbs are completed.
func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		t.Run(shell, func(t *testing.T) {
			code, out, errOut := runCLI("", "completion", shell)
			if code != exitOK || len(out) < 500 || !strings.Contains(out, "berth") {
				t.Errorf("completion %s: exit %d, %d bytes, stderr %q", shell, code, len(out), errOut)
			}
		})
	}
	code, out, _ := runCLI("", "__complete", "subscriptions", "")
	for _, want := range []string{"list", "pause", "reset"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("completing berth subscriptions: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
}
