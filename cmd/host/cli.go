package main

import (
	"fmt"
	"os"
)

// cli runs an operator verb against a running host.
func cli(args []string) int {
	fmt.Fprintf(os.Stderr, "host: unknown command %q\n\n%s", args[0], usage)
	return 2
}
