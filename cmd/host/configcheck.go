package main

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/berthhq/berth/config"
	"github.com/spf13/cobra"
)

func (a *app) configCmd() *cobra.Command {
	check := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a configuration file offline, as serve and a reload would",
		Long: `Read FILE as berth serve reads its configuration, and print every problem with the file,
the line and the key, e.g.
  berth.toml:7: subscription.retry.initial-backoff: "2 parsecs": unknown unit "parsecs" …
It sends nothing and needs no running host. Exit code 0: the file is valid; 1: it has
problems; 2: FILE cannot be read.`,
		Args: exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error { return a.configCheck(args[0]) },
	}
	c := &cobra.Command{Use: "config", Short: "Work with configuration files", Args: a.verbOf, RunE: a.missingVerb,
		SuggestionsMinimumDistance: 2}
	c.AddCommand(check)
	return c
}

// configCheck loads path with the config package, the one reader of
// configuration files (Load parses and validates, as serve does), and
// prints its problems one a line.
func (a *app) configCheck(path string) error {
	_, err := config.Load(path)
	if err == nil {
		fmt.Fprintf(a.stdout, "%s: valid\n", path)
		return nil
	}
	problems := config.Errors(err)
	if len(problems) == 0 { // not a problem with its content: the file cannot be read
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return usagef("%v", pe) // without config's "config: " in front of "berth config check: "
		}
		return usagef("%v", err)
	}
	for _, p := range problems {
		fmt.Fprintln(a.stderr, p)
	}
	fmt.Fprintf(a.stderr, "%s: %d %s\n", path, len(problems), plural(len(problems), "problem"))
	return exitError{exitFailed}
}
