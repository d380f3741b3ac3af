// Command berth (built from cmd/host: go build -o berth ./cmd/host) is the
// Berth host: `berth serve` runs it, and the other verbs are the operator
// CLI, which talks to a running host over REST.
//
//	berth serve [--config FILE] [--data DIR] [--listen ADDR]
//	berth modules push|list|show|remove …          berth events append …
//	berth subscriptions list|show|pause|unpause|reset …   berth parked list|show|resume|skip …
//	berth config check FILE    berth version    berth completion bash|zsh|fish
//	berth new reactor|projection|saga NAME --lang go|rust   (a handler module to start from)
//
// `berth help` lists every command and topic.
package main

import (
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(runWith(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv))
}

// run runs a command line with nothing to read on stdin and returns the
// process exit code (see `berth help exit-codes`); env reads the
// environment.
func run(args []string, stdout, stderr io.Writer, env func(string) string) int {
	return runWith(args, strings.NewReader(""), stdout, stderr, env)
}

// runWith is run with stdin, where a confirmation is read.
func runWith(args []string, stdin io.Reader, stdout, stderr io.Writer, env func(string) string) int {
	a := &app{args: args, stdin: stdin, stdout: stdout, stderr: stderr, env: env}
	cmd, err := a.newRoot().ExecuteC()
	return a.exit(cmd, err)
}
