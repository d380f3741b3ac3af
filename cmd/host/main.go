// Command berth (built from cmd/host: go build -o berth ./cmd/host) is the
// Berth host: `berth serve` runs it, and the other verbs are the operator
// CLI, which talks to a running host over REST.
//
//	berth serve [--config FILE] [--data DIR] [--listen ADDR]
//	berth modules push|list|show|remove …          berth events append …
//	berth subscriptions list|show|pause|unpause|reset …   berth parked list|show|resume|skip …
//	berth config check FILE    berth version    berth completion bash|zsh|fish
//
// `berth help` lists every command and topic.
package main

import (
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run runs a command line and returns the process exit code (see
// `berth help exit-codes`); env reads the environment.
func run(args []string, stdout, stderr io.Writer, env func(string) string) int {
	a := &app{args: args, stdout: stdout, stderr: stderr, env: env}
	cmd, err := a.newRoot().ExecuteC()
	return a.exit(cmd, err)
}
