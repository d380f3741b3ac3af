package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/subscription"
)

// fullRecord is a ledger record with every field set, its history entries'
// too (TestFullRecordIsFull keeps it so as ledger.Record grows).
func fullRecord() *ledger.Record {
	t0 := time.Date(2026, 12, 3, 8, 30, 0, 123456789, time.UTC)
	e := ledger.ErrorInfo{Classes: []string{"UnknownBuyer", "NotificationFailed"}, Message: "no buyer b-9", Code: "E42",
		Kind: "recoverable", Class: "recoverable", Reason: "classifier rule 1: NotificationFailed", Undeclared: []string{"UnknownBuyer"}, Module: "shipment-notifier v3"}
	return &ledger.Record{Subscription: "ShipmentNotifier.onOrderShipped", AggregateType: "Order", AggregateID: "o/1 %",
		Version: 3, Index: 1, Position: 17, Error: e, Attempts: 5, ParkedRetries: 2,
		FirstFailure: t0, LastFailure: t0.Add(time.Minute), State: ledger.StateWaiting, NextRetry: t0.Add(time.Hour),
		WaitReason: ledger.WaitRetriesSpent, InvocationKey: "ShipmentNotifier.onOrderShipped:Order/o%2F1%20%25@3:1",
		Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		History:     []ledger.Entry{{Time: t0, Action: "skip", Attempt: 5, Version: 3, Error: &e, Actor: "ops", Reason: "why"}}}
}

// The JSON a parked record had in the answers before the API had types of
// its own (the ledger's JSON, which clients decoded), with every field set.
const fullRecordJSON = `{"subscription":"ShipmentNotifier.onOrderShipped","aggregateType":"Order","aggregateId":"o/1 %",` +
	`"version":3,"index":1,"position":17,"error":{"classes":["UnknownBuyer","NotificationFailed"],"message":"no buyer b-9",` +
	`"code":"E42","kind":"recoverable","class":"recoverable","reason":"classifier rule 1: NotificationFailed",` +
	`"undeclared":["UnknownBuyer"],"module":"shipment-notifier v3"},"attempts":5,"parkedRetries":2,"firstFailure":"2026-12-03T08:30:00.123456789Z",` +
	`"lastFailure":"2026-12-03T08:31:00.123456789Z","state":"waiting","nextRetry":"2026-12-03T09:30:00.123456789Z",` +
	`"waitReason":"retries-spent","history":[{"time":"2026-12-03T08:30:00.123456789Z","action":"skip","attempt":5,` +
	`"version":3,"error":{"classes":["UnknownBuyer","NotificationFailed"],"message":"no buyer b-9","code":"E42",` +
	`"kind":"recoverable","class":"recoverable","reason":"classifier rule 1: NotificationFailed","undeclared":["UnknownBuyer"],"module":"shipment-notifier v3"},` +
	`"actor":"ops","reason":"why"}],"invocationKey":"ShipmentNotifier.onOrderShipped:Order/o%2F1%20%25@3:1"}`

// TestFullRecordIsFull: a field added to the ledger's record must be set in
// fullRecord, so that the golden tests below decide whether the API shows it.
func TestFullRecordIsFull(t *testing.T) {
	var check func(v reflect.Value, at string)
	check = func(v reflect.Value, at string) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() {
				t.Errorf("%s is nil in fullRecord", at)
				return
			}
			check(v.Elem(), at)
		case reflect.Struct:
			if v.Type() == reflect.TypeFor[time.Time]() {
				if v.IsZero() {
					t.Errorf("%s is zero in fullRecord", at)
				}
				return
			}
			for i := range v.NumField() {
				check(v.Field(i), at+"."+v.Type().Field(i).Name)
			}
		case reflect.Slice:
			if v.Len() == 0 {
				t.Errorf("%s is empty in fullRecord", at)
			}
			for i := range v.Len() {
				check(v.Index(i), at+"[]")
			}
		default:
			if v.IsZero() {
				t.Errorf("%s is zero in fullRecord", at)
			}
		}
	}
	check(reflect.ValueOf(fullRecord()), "Record")
}

// TestWireRecordGolden: a parked record answers with the JSON it always had
// — the same names, the same fields left out when empty, the same times —
// whatever the ledger's own encoding becomes.
func TestWireRecordGolden(t *testing.T) {
	full := fullRecord()
	sparse := &ledger.Record{Subscription: "P.h", AggregateType: "Order", AggregateID: "o-1", Version: 1,
		Error: ledger.ErrorInfo{Message: "boom", Kind: "trap"}, Attempts: 1, State: ledger.StateRetrying,
		FirstFailure: time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", 3600)),
		History:      []ledger.Entry{{Action: "parked"}}}
	noHistory := &ledger.Record{Subscription: "P.h", AggregateType: "Order", AggregateID: "o-2", State: ledger.StateResuming}
	tests := []struct {
		name string
		rec  *ledger.Record
		want string
	}{
		{"every field", full, fullRecordJSON},
		{"empty fields left out", sparse, `{"subscription":"P.h","aggregateType":"Order","aggregateId":"o-1","version":1,"index":0,` +
			`"position":0,"error":{"message":"boom","kind":"trap"},"attempts":1,"parkedRetries":0,` +
			`"firstFailure":"2026-01-02T03:04:05+01:00","lastFailure":"0001-01-01T00:00:00Z","state":"retrying",` +
			`"history":[{"time":"0001-01-01T00:00:00Z","action":"parked"}]}`},
		{"no history is null", noHistory, `{"subscription":"P.h","aggregateType":"Order","aggregateId":"o-2","version":0,"index":0,` +
			`"position":0,"error":{"message":"","kind":""},"attempts":0,"parkedRetries":0,"firstFailure":"0001-01-01T00:00:00Z",` +
			`"lastFailure":"0001-01-01T00:00:00Z","state":"resuming","history":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(toWireRecord(tt.rec))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("wire JSON\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestWireSubscriptionGolden: a subscription's status answers with the JSON
// it always had; the list leaves out the partitions running idle.
func TestWireSubscriptionGolden(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 30, 0, 0, time.UTC)
	src := map[string]retry.Source{}
	for _, k := range []string{retry.KeyMaxAttempts, retry.KeyInitialBackoff, retry.KeyMaxBackoff, retry.KeyTimeout,
		retry.KeyUnrecoverable, retry.KeyRecoverable, retry.KeyBackpressureAttempts} {
		src[k] = retry.SourceDefault
	}
	src[retry.KeyMaxAttempts] = retry.SourceOverride
	st := subscription.Status{Name: "P.h", State: subscription.StateRunning, Checkpoint: 5, DurableCheckpoint: 4, Head: 9, Lag: 5,
		Parked: map[ledger.State]int{ledger.StateWaiting: 2},
		Partitions: []subscription.PartitionStatus{
			{Index: 0, State: subscription.StateRunning, Concurrency: 4, MaxConcurrency: 4},
			{Index: 1, State: subscription.StateSystemicPaused, PausedSince: t0, PauseReason: "outage", NextProbe: t0.Add(time.Minute),
				FailedProbes: 2, Concurrency: 1, MaxConcurrency: 4, Active: 1, Waiting: 3, Held: 1},
		},
		Policy: retry.Policy{MaxAttempts: 3, InitialBackoff: time.Second, MaxBackoff: time.Minute, Timeout: 5 * time.Second,
			Recoverable: []string{"Flaky"}, BackpressureAttempts: 7, Sources: src},
		ParkedSettings: retry.ParkedSettings{MaxRetries: 10, FirstDelay: 3 * time.Minute, MaxDelay: time.Hour, Timeout: 2 * time.Minute,
			RetryUnrecoverable: retry.SwitchOn}}
	const head = `{"name":"P.h","module":"notifier","state":"running","checkpoint":5,"durableCheckpoint":4,"head":9,"lag":5,` +
		`"parked":{"waiting":2},"partitions":[`
	const idle = `{"index":0,"state":"running","concurrency":4,"active":0,"held":0},`
	const paused = `{"index":1,"state":"systemic-paused","pauseReason":"outage","pausedSince":"2026-12-03T08:30:00Z",` +
		`"nextProbe":"2026-12-03T08:31:00Z","failedProbes":2,"concurrency":1,"active":1,"held":1}`
	const tail = `],"retry":{"backpressure-attempts":{"value":7,"source":"default"},"initial-backoff":{"value":"1s","source":"default"},` +
		`"max-attempts":{"value":3,"source":"override"},"max-backoff":{"value":"1m0s","source":"default"},` +
		`"recoverable":{"value":["Flaky"],"source":"default"},"timeout":{"value":"5s","source":"default"},` +
		`"unrecoverable":{"value":[],"source":"default"}},"parkedRetries":{"maxRetries":10,"firstDelay":"3m0s",` +
		`"maxDelay":"1h0m0s","timeout":"2m0s","retryUnrecoverable":true}}`
	for _, tt := range []struct {
		detail bool
		want   string
	}{{true, head + idle + paused + tail}, {false, head + paused + tail}} {
		got, err := json.Marshal(toWireSubscription(st, "notifier", tt.detail))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("detail %v:\n got %s\nwant %s", tt.detail, got, tt.want)
		}
	}
	// No parked aggregates is {} (not null), no module and no partitions are left out.
	got, _ := json.Marshal(toWireSubscription(subscription.Status{Name: "P.h", State: subscription.StatePaused}, "", true))
	if want := `{"name":"P.h","state":"paused","checkpoint":0,"durableCheckpoint":0,"head":0,"lag":0,"parked":{},"retry":`; !strings.HasPrefix(string(got), want) {
		t.Errorf("empty status:\n got %s\nwant %s…", got, want)
	}
}

// TestWireModuleGolden: a module answers with the JSON it always had.
func TestWireModuleGolden(t *testing.T) {
	info := registry.Info{Name: "m", Version: 3, RolledBackFrom: 1, SHA256: strings.Repeat("ab", 32), Size: 1234, Uploaded: time.Date(2026, 12, 3, 8, 30, 0, 5, time.UTC),
		Processor: "P", Kind: "saga", Start: "end", Subscriptions: []string{"P.h"}, DeadlineGuard: "loopguard",
		Handlers: []registry.HandlerInfo{{Name: "h", EventTypes: []string{"A", "B"}, Subscription: "P.h"}, {Name: "onRejected"}}}
	want := `{"name":"m","version":3,"rolledBackFrom":1,"sha256":"` + strings.Repeat("ab", 32) + `","size":1234,"uploaded":"2026-12-03T08:30:00.000000005Z",` +
		`"processor":"P","kind":"saga","start":"end","handlers":[{"name":"h","eventTypes":["A","B"],"subscription":"P.h"},` +
		`{"name":"onRejected","eventTypes":null}],"subscriptions":["P.h"],"deadlineGuard":"loopguard"}`
	got, err := json.Marshal(toWireModule(info))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("\n got %s\nwant %s", got, want)
	}
}

// TestWireStatesFromLedger: each state and wait reason the ledger stores
// becomes the API's value of the same meaning.
func TestWireStatesFromLedger(t *testing.T) {
	tests := []struct {
		state       ledger.State
		wait        string
		wantState   string
		wantWaiting string
	}{
		{ledger.StateRetrying, "", wire.StateRetrying, ""},
		{ledger.StateWaiting, ledger.WaitUnrecoverable, wire.StateWaiting, wire.WaitUnrecoverable},
		{ledger.StateWaiting, ledger.WaitRetriesSpent, wire.StateWaiting, wire.WaitRetriesSpent},
		{ledger.StateWaiting, ledger.WaitNoRetries, wire.StateWaiting, wire.WaitNoRetries},
		{ledger.StateResuming, "", wire.StateResuming, ""},
	}
	for _, tt := range tests {
		got := toWireRecord(&ledger.Record{State: tt.state, WaitReason: tt.wait})
		if got.State != tt.wantState || got.WaitReason != tt.wantWaiting {
			t.Errorf("ledger %s/%s: wire %s/%s, want %s/%s", tt.state, tt.wait, got.State, got.WaitReason, tt.wantState, tt.wantWaiting)
		}
	}
}

// TestHistoryInOrder: a record's history reaches the API oldest first,
// although the ledger keeps a first park's entry ahead of its attempts.
func TestHistoryInOrder(t *testing.T) {
	e := func(action string) ledger.Entry { return ledger.Entry{Action: action} }
	actions := func(h []ledger.Entry) string {
		var s []string
		for _, x := range h {
			s = append(s, x.Action)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct{ stored, want string }{
		{"", ""},
		{"parked", "parked"},
		{"parked,attempt,attempt,attempt", "attempt,attempt,attempt,parked"},
		{"parked,attempt,attempt,retry,retries-spent,resume,resumed", "attempt,attempt,parked,retry,retries-spent,resume,resumed"},
		// Truncated (the first attempts dropped): the park is the oldest left.
		{"parked,retry,retry", "parked,retry,retry"},
		// A record parked again after a resume appended in order already.
		{"parked,attempt,resume,attempt,parked", "attempt,parked,resume,attempt,parked"},
		{"attempt,parked", "attempt,parked"},
	} {
		var stored []ledger.Entry
		if tc.stored != "" {
			for _, a := range strings.Split(tc.stored, ",") {
				stored = append(stored, e(a))
			}
		}
		if got := actions(inOrder(stored)); got != tc.want {
			t.Errorf("inOrder(%s) = %s, want %s", tc.stored, got, tc.want)
		}
		if got := actions(stored); got != tc.stored {
			t.Errorf("inOrder changed what it was given: %s", got)
		}
	}
}
