package main

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/berthhq/berth/api/wire"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func (a *app) modulesCmd() *cobra.Command {
	rm := a.verb("remove NAME", "Remove a module and its subscriptions", 1, nil, modulesRemove)
	rm.Aliases, rm.SuggestFor = []string{"rm"}, []string{"delete", "del"}
	return a.group("modules", []string{"mod", "mods"}, "Deploy, list, show and remove modules",
		a.verb("push NAME FILE.wasm", "Upload a module (create or update)", 2, nil, modulesPush),
		ls(a.verb("list", "List the deployed modules", 0, nil, modulesList)),
		a.verb("show NAME", "Show a module: its processor, handlers and subscriptions", 1, nil, modulesShow),
		a.verb("versions NAME", "List a module's kept versions, oldest first", 1, nil, modulesVersions),
		a.verb("rollback NAME VERSION", "Deploy a kept version of a module again, as its next version", 2, nil, modulesRollback),
		rm)
}

func (a *app) eventsCmd() *cobra.Command {
	return a.group("events", []string{"ev"}, "Append events",
		a.verb("append (--type AGG_TYPE --id AGG_ID EVENT_TYPE[=JSON]... | --file BODY.json)",
			"Append a commit of events to an aggregate", -1, eventsFlags, eventsAppend))
}

// ls gives a list verb its short alias.
func ls(c *cobra.Command) *cobra.Command {
	c.Aliases = append(c.Aliases, "ls")
	return c
}

func eventsFlags(fs *pflag.FlagSet, o *options) {
	fs.StringVar(&o.aggType, "type", "", "aggregate type `AGG_TYPE` (required unless --file)")
	fs.StringVar(&o.aggID, "id", "", "aggregate id `AGG_ID` (required unless --file)")
	fs.StringVar(&o.owner, "owner", "", "owner `O` of the aggregate (ownerId)")
	fs.Var(&o.expectedVersion, "expected-version", "append only if the aggregate is at this version (0: a new aggregate)")
	fs.StringVar(&o.file, "file", "", "send `BODY.json` as the whole POST /v1/events body instead; a batch\n"+
		"({\"appends\": [...]}, a JSON array of commits, or one commit a line) goes to\n"+
		"POST /v1/events/batch, 1000 commits a request, each under shared fsyncs")
}

func modulesPush(x *invocation, args []string) error {
	name, file := args[0], args[1]
	wasm, err := readFile(file)
	if err != nil {
		return err
	}
	raw, created, err := x.client.pushModule(x.ctx, name, wasm)
	if err != nil {
		return err
	}
	if x.global.json {
		return x.printJSON(raw)
	}
	var info wire.ModuleInfo
	if err := decode(raw, &info); err != nil {
		return err
	}
	what := "updated"
	if created {
		what = "created"
	}
	fmt.Fprintf(x.stdout, "%s module %s from %s\n\n", what, info.Name, file)
	return showModule(x, info)
}

func modulesList(x *invocation, _ []string) error {
	raw, err := x.client.modules(x.ctx)
	if err != nil {
		return err
	}
	if x.global.json {
		return x.printJSON(raw)
	}
	var list wire.ModuleList
	if err := decode(raw, &list); err != nil {
		return err
	}
	if len(list.Modules) == 0 {
		fmt.Fprintln(x.stdout, "no modules deployed")
		return nil
	}
	t := x.table("NAME", "PROCESSOR", "KIND", "SUBSCRIPTIONS", "SIZE", "SHA256", "UPLOADED")
	for _, m := range list.Modules {
		t.row(m.Name, orDash(m.Processor), orDash(m.Kind), orDash(strings.Join(m.Subscriptions, ", ")),
			byteSize(m.Size), shortHash(m.SHA256), timestamp(m.Uploaded))
	}
	return t.flush()
}

func modulesShow(x *invocation, args []string) error {
	raw, err := x.client.module(x.ctx, args[0])
	if err != nil {
		return err
	}
	if x.global.json {
		return x.printJSON(raw)
	}
	var info wire.ModuleInfo
	if err := decode(raw, &info); err != nil {
		return err
	}
	return showModule(x, info)
}

func showModule(x *invocation, m wire.ModuleInfo) error {
	kv := newKeyValues(x.stdout)
	kv.add("name", "%s", m.Name)
	kv.add("processor", "%s", orDash(m.Processor))
	kv.add("kind", "%s", orDash(m.Kind))
	kv.add("start", "%s", orDash(m.Start))
	kv.add("sha256", "%s", m.SHA256)
	kv.add("size", "%s (%d bytes)", byteSize(m.Size), m.Size)
	kv.add("uploaded", "%s", timestamp(m.Uploaded))
	kv.add("deadline guard", "%s", orDash(m.DeadlineGuard))
	kv.add("subscriptions", "%s", orDash(strings.Join(m.Subscriptions, ", ")))
	if err := kv.flush(); err != nil {
		return err
	}
	if len(m.Handlers) == 0 {
		return nil
	}
	fmt.Fprintln(x.stdout, "\nhandlers:")
	t := x.table("  HANDLER", "EVENT TYPES", "SUBSCRIPTION")
	for _, h := range m.Handlers {
		t.row("  "+h.Name, orDash(strings.Join(h.EventTypes, ", ")), orDash(h.Subscription))
	}
	return t.flush()
}

func modulesRemove(x *invocation, args []string) error {
	if err := x.client.deleteModule(x.ctx, args[0]); err != nil {
		return err
	}
	if !x.global.json { // the server answers 204 with no body: nothing to print for --json
		fmt.Fprintf(x.stdout, "removed module %s\n", args[0])
	}
	return nil
}

func eventsAppend(x *invocation, args []string) error {
	o := x.opts
	var body []byte
	if o.file != "" {
		if o.aggType != "" || o.aggID != "" || o.owner != "" || o.expectedVersion.set || len(args) > 0 {
			return usagef("--file holds the whole request: give it alone, without --type, --id, --owner, --expected-version or events")
		}
		b, err := readFile(o.file)
		if err != nil {
			return err
		}
		appends, batch, err := fileAppends(b)
		if err != nil {
			return err
		}
		if batch {
			return appendBatches(x, appends)
		}
		body = b
	} else {
		req, err := appendRequestFrom(o, args)
		if err != nil {
			return err
		}
		if body, err = json.Marshal(req); err != nil {
			return err
		}
	}
	raw, err := x.client.appendEvents(x.ctx, body)
	if err != nil {
		return err
	}
	if x.global.json {
		return x.printJSON(raw)
	}
	var res wire.AppendResult
	if err := decode(raw, &res); err != nil {
		return err
	}
	fmt.Fprintf(x.stdout, "appended to %s/%s: now at version %d, commit at position %d\n",
		res.AggregateType, res.AggregateID, res.Version, res.Position)
	return nil
}

// appendRequestFrom builds the request from the flags and EVENT_TYPE[=JSON]
// arguments (no JSON: null data).
func appendRequestFrom(o *options, args []string) (wire.AppendRequest, error) {
	req := wire.AppendRequest{AggregateType: o.aggType, AggregateID: o.aggID, OwnerID: o.owner}
	if o.aggType == "" || o.aggID == "" {
		return req, usagef("--type and --id are required (or --file with the whole request)")
	}
	if len(args) == 0 {
		return req, usagef("give at least one event as EVENT_TYPE=JSON")
	}
	if o.expectedVersion.set {
		if o.expectedVersion.v > math.MaxInt64 {
			return req, usagef("--expected-version %d is out of range: at most %d", o.expectedVersion.v, int64(math.MaxInt64))
		}
		v := int64(o.expectedVersion.v)
		req.ExpectedVersion = &v
	}
	for i, a := range args {
		typ, data, _ := strings.Cut(a, "=")
		if typ == "" {
			return req, usagef("event %d (%q): the event type is empty; write EVENT_TYPE=JSON", i+1, a)
		}
		if strings.TrimSpace(data) == "" {
			data = "null"
		}
		if !json.Valid([]byte(data)) {
			return req, usagef("event %d (%s): the data is not valid JSON: %s", i+1, typ, truncate(data, 60))
		}
		req.Events = append(req.Events, wire.EventInput{Type: typ, Data: json.RawMessage(data)})
	}
	return req, nil
}

func modulesVersions(x *invocation, args []string) error {
	raw, err := x.client.get(x.ctx, apiPath("modules", args[0], "versions"), nil)
	var list wire.ModuleVersionList
	if done, err := x.decoded(raw, err, &list); done || err != nil {
		return err
	}
	t := x.table("VERSION", "UPLOADED", "SHA256", "SIZE", "")
	for _, v := range list.Versions {
		note := ""
		if v.Current {
			note = "current"
		}
		if v.RolledBackFrom > 0 {
			note = strings.TrimSpace(note + fmt.Sprintf(" (rollback to v%d)", v.RolledBackFrom))
		}
		t.row(fmt.Sprintf("v%d", v.Version), timestamp(v.Uploaded), v.SHA256[:min(12, len(v.SHA256))], fmt.Sprint(v.Size), note)
	}
	return t.flush()
}

func modulesRollback(x *invocation, args []string) error {
	v, err := strconv.Atoi(strings.TrimPrefix(args[1], "v"))
	if err != nil || v < 1 {
		return usagef("VERSION must be a version number such as 3 (or v3), not %q", args[1])
	}
	raw, err := x.client.postJSON(x.ctx, apiPath("modules", args[0], "rollback"), wire.RollbackRequest{Version: &v})
	var info wire.ModuleInfo
	if done, err := x.decoded(raw, err, &info); done || err != nil {
		return err
	}
	fmt.Fprintf(x.stdout, "module %s v%d runs the code of v%d (sha256 %s)\n", info.Name, info.Version, info.RolledBackFrom, info.SHA256)
	return nil
}
