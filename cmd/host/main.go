// Command host is the Berth host: `host serve` runs it, and the other verbs
// are the operator CLI, which talks to a running host over REST.
//
//	host serve [--config FILE] [--data DIR] [--listen ADDR]
//	host modules push|list|show|rm …            host events append …
//	host subs list|show|pause|unpause|reset …   host parked list|show|resume|skip …
package main

import (
	"fmt"
	"io"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// run dispatches a command line and returns the process exit code (see the
// usage text); env reads the environment.
func run(args []string, stdout, stderr io.Writer, env func(string) string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "serve":
		return serve(args[1:])
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		return cli(args, stdout, stderr, env)
	}
}

const usage = `Berth host: runs event handlers compiled to WebAssembly, and owns their failures.

Usage:
  host serve [--config FILE] [--data DIR] [--listen ADDR]   run the host
  host modules push NAME FILE.wasm | list | show NAME | rm NAME
  host events append --type AGG_TYPE --id AGG_ID [--owner O] [--expected-version N] EVENT_TYPE=JSON ...
  host events append --file BODY.json                        the whole POST /v1/events body
  host subs list | show NAME | pause NAME | unpause NAME | reset NAME --position N
  host parked list [--subscription S] [--state retrying|waiting|resuming] [--aggregate-type T]
                   [--limit N] [--after CURSOR]              (every page unless --limit or --after)
  host parked show SUB TYPE ID
  host parked resume SUB TYPE ID [--reason R] | skip SUB TYPE ID [--through-version N] [--reason R]

Operator verbs talk to a running host: --server URL (default $BERTH_SERVER or http://127.0.0.1:8080),
token from $BERTH_TOKEN (sent as Authorization: Bearer), --timeout D per request (default 60s).
--json prints the server's JSON instead of a table (on failure, its problem document goes to stderr).
Flags may come before or after the arguments; "host NOUN VERB -h" lists a verb's flags.
An argument that starts with "-" (an aggregate id such as -1) goes after "--", which ends the flags:
  host parked resume SUB TYPE --reason R -- -1      (flags after "--" are arguments too)
Exit codes: 0 done, 1 the server refused or failed (its problem is printed), 2 usage error (nothing
was sent), 3 cannot reach the server.
`
