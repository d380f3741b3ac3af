package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/berthhq/berth/api/wire"
	"github.com/spf13/cobra"
)

// Exit codes, as `berth help exit-codes` documents them.
const (
	exitOK          = 0 // done
	exitFailed      = 1 // the server refused or failed (its problem is printed); config check found problems
	exitUsage       = 2 // bad verb, flag or argument; nothing was sent
	exitUnreachable = 3 // no answer from the server
	exitNotFound    = 4 // the server has no such module, subscription or parked aggregate (a 404)
	exitUnavailable = 5 // the server cannot do it now (a 503); the same command may succeed later
)

// exitCodesHelp is the `berth help exit-codes` topic.
const exitCodesHelp = `Exit codes of the operator verbs, version and config check:

  0  done
  1  the server refused the request or failed (its problem document is printed on stderr;
     with --json, the document as sent); config check: the file has problems
  2  usage error: an unknown verb or flag, a missing or extra argument, a bad value;
     nothing was sent
  3  cannot reach the server (down, wrong --server, or no answer within --timeout)
  4  not found: the server has no such module, subscription or parked aggregate (a 404)
  5  unavailable for now: the server could not do it at this moment (a 503: its store or
     NATS did not answer, it is not ready yet, its cluster lease lapsed); nothing was changed,
     and the same command may succeed later (the problem's Retry-After says when to ask)

berth serve exits 0 after a clean shutdown (SIGINT or SIGTERM), 1 when it cannot start
(a bad configuration names the key and its line) or its shutdown did not finish, 2 for a
bad flag.`

// usageError is a command line refused before anything was sent; showUsage
// has the command's whole usage follow the message (a noun without a verb
// shows its verbs).
type usageError struct {
	msg       string
	showUsage bool
}

// Error is what is wrong with the command line.
func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{msg: fmt.Sprintf(format, args...)} }

// runError is an error of a verb that ran: the server's answer, no answer,
// or an answer the CLI cannot read.
type runError struct{ err error }

func (e runError) Error() string { return e.err.Error() }
func (e runError) Unwrap() error { return e.err }

// exitError ends the program with code, its reason already reported (serve
// logs its own failures; config check prints each problem).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// exit reports err on stderr and maps it to an exit code; cmd is the
// command that ran (or the deepest one found).
func (a *app) exit(cmd *cobra.Command, err error) int {
	if err == nil {
		return exitOK
	}
	path := "berth"
	if cmd != nil {
		path = cmd.CommandPath()
	}
	var ee exitError
	var re runError
	var pe *problemError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &re) && errors.As(err, &pe):
		if a.opts.json && json.Valid(pe.Body) {
			fmt.Fprintf(a.stderr, "%s\n", strings.TrimSpace(string(pe.Body)))
		} else {
			fmt.Fprintf(a.stderr, "%s: %v\n", path, pe)
		}
		return exitFor(pe)
	case errors.As(err, &re) && isUnreachable(err):
		fmt.Fprintf(a.stderr, "%s: cannot reach the server at %s: %v\n", path, a.server, err)
		return exitUnreachable
	case errors.As(err, &re):
		fmt.Fprintf(a.stderr, "%s: %v\n", path, err)
		return exitFailed
	}
	// A usage error: ours, or cobra's (an unknown command, a bad flag).
	fmt.Fprintf(a.stderr, "%s: %v\n", path, err)
	var ue usageError
	switch {
	case cmd == nil:
	case errors.As(err, &ue) && ue.showUsage:
		fmt.Fprintf(a.stderr, "\n%s", cmd.UsageString())
	case cmd.HasAvailableSubCommands():
		fmt.Fprintf(a.stderr, "%q lists them\n", cmd.CommandPath()+" --help")
	default:
		fmt.Fprintf(a.stderr, "usage: %s\n%q lists its flags\n", cmd.UseLine(), cmd.CommandPath()+" --help")
	}
	return exitUsage
}

// exitFor is the exit code of a problem answer, chosen by its type's
// status in the API's catalogue (wire.ProblemStatus): what the server meant,
// whatever a proxy on the way did to the status. An answer whose type the
// catalogue does not name (a proxy's, an older server's) goes by its status.
func exitFor(pe *problemError) int {
	status := pe.Status
	if s, ok := wire.ProblemStatus(wire.ProblemName(pe.Problem.Type)); ok {
		status = s
	}
	switch status {
	case http.StatusNotFound:
		return exitNotFound
	case http.StatusServiceUnavailable:
		return exitUnavailable
	}
	return exitFailed
}
