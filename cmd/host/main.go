// Command host is the Berth host: `host serve` runs it, and the other verbs
// are the operator CLI, which talks to a running host over REST.
//
//	host serve [--config FILE] [--data DIR] [--listen ADDR]
//	host modules push|list|rm …    host events append …
//	host subs list|show …          host parked list|show|resume|skip …
package main

import (
	"fmt"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

// run dispatches a command line and returns the process exit code: 0 on
// success, 1 when the operation failed, 2 for a usage error.
func run(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(os.Stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:])
	case "-h", "--help", "help":
		fmt.Print(usage)
		return 0
	default:
		return cli(args)
	}
}

const usage = `Berth host: runs event handlers compiled to WebAssembly, and owns their failures.

Usage:
  host serve [--config FILE] [--data DIR] [--listen ADDR]   run the host
  host modules push NAME FILE.wasm | list | show NAME | rm NAME
  host events append --type T --id ID [--owner O] [--expected-version N] EVENT_TYPE=JSON ...
  host subs list | show NAME | pause NAME | unpause NAME | reset NAME --position N
  host parked list [--subscription S] [--state retrying|waiting|resuming] | show SUB TYPE ID
  host parked resume SUB TYPE ID [--reason R] | skip SUB TYPE ID [--through-version N] [--reason R]

Operator verbs talk to a running host: --server URL (default $BERTH_SERVER or http://127.0.0.1:8080),
token from $BERTH_TOKEN. --json prints the server's JSON instead of a table.
Exit codes: 0 done, 1 the server refused or failed (its problem is printed), 2 usage error, 3 cannot reach the server.
`
