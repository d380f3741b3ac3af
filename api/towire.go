package api

import (
	"encoding/json"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/subscription"
)

// The one place where the host's own types become the API's (package wire):
// the ledger's records as stored, the registry's modules, the log's commits
// and the engine's status. A change on either side is made here, so the disk
// format can change without a client noticing, and the other way round. The
// converters keep nil apart from empty: a nil list is sent as null, an empty
// one as [], as the answers always were.

func toWireModule(in registry.Info) wire.ModuleInfo {
	out := wire.ModuleInfo{Name: in.Name, Version: in.Version, RolledBackFrom: in.RolledBackFrom, SHA256: in.SHA256, Size: in.Size, Uploaded: in.Uploaded,
		Processor: in.Processor, Kind: in.Kind, Start: in.Start, Subscriptions: in.Subscriptions,
		DeadlineGuard: in.DeadlineGuard}
	out.Handlers = mapSlice(in.Handlers, func(h registry.HandlerInfo) wire.HandlerInfo {
		return wire.HandlerInfo{Name: h.Name, EventTypes: h.EventTypes, Subscription: h.Subscription}
	})
	return out
}

func toWireVersion(v registry.VersionInfo) wire.ModuleVersion {
	return wire.ModuleVersion{Version: v.Version, SHA256: v.SHA256, Size: v.Size, Uploaded: v.Uploaded,
		RolledBackFrom: v.RolledBackFrom, Current: v.Current}
}

func toWireCommit(c eventlog.Commit) wire.Commit {
	out := wire.Commit{Position: c.Position, AggregateType: c.AggregateType, AggregateID: c.AggregateID,
		Version: c.Version, OwnerID: c.OwnerID, Time: c.Time, Events: make([]wire.Event, len(c.Events))}
	for i, e := range c.Events {
		data := json.RawMessage(e.Payload)
		if len(data) == 0 {
			data = json.RawMessage("null")
		}
		out.Events[i] = wire.Event{Type: e.Type, Data: data}
	}
	return out
}

func toWireRecord(r *ledger.Record) wire.ParkedRecord {
	return wire.ParkedRecord{Subscription: r.Subscription, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
		Version: r.Version, Index: r.Index, Position: r.Position, Error: toWireError(r.Error),
		Attempts: r.Attempts, ParkedRetries: r.ParkedRetries, FirstFailure: r.FirstFailure, LastFailure: r.LastFailure,
		State: string(r.State), NextRetry: r.NextRetry, WaitReason: r.WaitReason,
		History: mapSlice(inOrder(r.History), toWireEntry), InvocationKey: r.InvocationKey}
}

// inOrder returns a record's history oldest first. The ledger stores a first
// park's entry before the attempts that led to it (its first entry is the one
// it never drops, ledger.Record.AddHistory), so that entry moves behind the
// attempts that follow it; everything after is in the order it happened.
func inOrder(h []ledger.Entry) []ledger.Entry {
	if len(h) < 2 || h[0].Action != "parked" {
		return h
	}
	j := 1
	for j < len(h) && h[j].Action == "attempt" {
		j++
	}
	out := make([]ledger.Entry, 0, len(h))
	out = append(out, h[1:j]...)
	out = append(out, h[0])
	return append(out, h[j:]...)
}

func toWireError(e ledger.ErrorInfo) wire.ErrorInfo {
	return wire.ErrorInfo{Classes: e.Classes, Message: e.Message, Code: e.Code, Kind: e.Kind,
		Class: e.Class, Reason: e.Reason, Undeclared: e.Undeclared, Module: e.Module}
}

func toWireEntry(e ledger.Entry) wire.HistoryEntry {
	out := wire.HistoryEntry{Time: e.Time, Action: e.Action, Attempt: e.Attempt, Version: e.Version,
		Actor: e.Actor, Reason: e.Reason}
	if e.Error != nil {
		we := toWireError(*e.Error)
		out.Error = &we
	}
	return out
}

// toWireSubscription is a subscription's status as the API shows it, served
// by module. Without detail, the partitions running idle are left out.
func toWireSubscription(st subscription.Status, module string, detail bool) wire.Subscription {
	p := st.Policy
	setting := func(key string, v any) wire.RetrySetting {
		return wire.RetrySetting{Value: v, Source: string(p.Sources[key])}
	}
	out := wire.Subscription{
		Name: st.Name, Module: module, State: st.State, StartError: st.StartError, PausedUntil: st.PausedUntil, Checkpoint: st.Checkpoint,
		DurableCheckpoint: st.DurableCheckpoint, Parked: wire.ParkedCounts{}, Unread: st.Unread,
		Retry: wire.RetrySettings{
			retry.KeyMaxAttempts:          setting(retry.KeyMaxAttempts, p.MaxAttempts),
			retry.KeyInitialBackoff:       setting(retry.KeyInitialBackoff, p.InitialBackoff.String()),
			retry.KeyMaxBackoff:           setting(retry.KeyMaxBackoff, p.MaxBackoff.String()),
			retry.KeyTimeout:              setting(retry.KeyTimeout, p.Timeout.String()),
			retry.KeyUnrecoverable:        setting(retry.KeyUnrecoverable, nonNil(p.Unrecoverable)),
			retry.KeyRecoverable:          setting(retry.KeyRecoverable, nonNil(p.Recoverable)),
			retry.KeyBackpressureAttempts: setting(retry.KeyBackpressureAttempts, p.BackpressureAttempts),
		},
		ParkedRetries: wire.ParkedSettings{MaxRetries: st.ParkedSettings.MaxRetries, FirstDelay: st.ParkedSettings.FirstDelay.String(),
			MaxDelay: st.ParkedSettings.MaxDelay.String(), Timeout: st.ParkedSettings.Timeout.String(),
			RetryUnrecoverable: st.ParkedSettings.RetriesUnrecoverable()},
	}
	if st.Unread == "" {
		out.Head, out.Lag = &st.Head, &st.Lag
	}
	for state, n := range st.Parked {
		out.Parked[string(state)] = n
	}
	for _, ps := range st.Partitions {
		if !detail && ps.State == subscription.StateRunning && ps.Active == 0 && ps.Held == 0 {
			continue
		}
		out.Partitions = append(out.Partitions, wire.Partition{Index: ps.Index, State: ps.State, PauseReason: ps.PauseReason,
			PausedSince: ps.PausedSince, NextProbe: ps.NextProbe, FailedProbes: ps.FailedProbes,
			Concurrency: ps.Concurrency, Active: ps.Active, Held: ps.Held})
	}
	return out
}

func nonNil(ss []string) []string {
	if ss == nil {
		return []string{}
	}
	return ss
}

// mapSlice converts each element; nil stays nil (null in JSON), empty stays
// empty ([]).
func mapSlice[T, U any](in []T, f func(T) U) []U {
	if in == nil {
		return nil
	}
	out := make([]U, len(in))
	for i, v := range in {
		out[i] = f(v)
	}
	return out
}
