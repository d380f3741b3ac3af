package api

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger"
)

// fullRecord is a ledger record with every field set, its history entries'
// too (TestFullRecordIsFull keeps it so as ledger.Record grows).
func fullRecord() *ledger.Record {
	t0 := time.Date(2026, 12, 3, 8, 30, 0, 123456789, time.UTC)
	e := ledger.ErrorInfo{Classes: []string{"UnknownBuyer", "NotificationFailed"}, Message: "no buyer b-9", Code: "E42",
		Kind: "recoverable", Class: "recoverable", Reason: "classifier rule 1: NotificationFailed", Undeclared: []string{"UnknownBuyer"}}
	return &ledger.Record{Subscription: "ShipmentNotifier.onOrderShipped", AggregateType: "Order", AggregateID: "o/1 %",
		Version: 3, Index: 1, Position: 17, Error: e, Attempts: 5, ParkedRetries: 2,
		FirstFailure: t0, LastFailure: t0.Add(time.Minute), State: ledger.StateWaiting, NextRetry: t0.Add(time.Hour),
		WaitReason: ledger.WaitRetriesSpent, InvocationKey: "ShipmentNotifier.onOrderShipped:Order/o%2F1%20%25@3:1",
		History: []ledger.Entry{{Time: t0, Action: "skip", Attempt: 5, Version: 3, Error: &e, Actor: "ops", Reason: "why"}}}
}

// The JSON a parked record had in the answers before the API had types of
// its own (the ledger's JSON, which clients decoded), with every field set.
const fullRecordJSON = `{"subscription":"ShipmentNotifier.onOrderShipped","aggregateType":"Order","aggregateId":"o/1 %",` +
	`"version":3,"index":1,"position":17,"error":{"classes":["UnknownBuyer","NotificationFailed"],"message":"no buyer b-9",` +
	`"code":"E42","kind":"recoverable","class":"recoverable","reason":"classifier rule 1: NotificationFailed",` +
	`"undeclared":["UnknownBuyer"]},"attempts":5,"parkedRetries":2,"firstFailure":"2026-12-03T08:30:00.123456789Z",` +
	`"lastFailure":"2026-12-03T08:31:00.123456789Z","state":"waiting","nextRetry":"2026-12-03T09:30:00.123456789Z",` +
	`"waitReason":"retries-spent","history":[{"time":"2026-12-03T08:30:00.123456789Z","action":"skip","attempt":5,` +
	`"version":3,"error":{"classes":["UnknownBuyer","NotificationFailed"],"message":"no buyer b-9","code":"E42",` +
	`"kind":"recoverable","class":"recoverable","reason":"classifier rule 1: NotificationFailed","undeclared":["UnknownBuyer"]},` +
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
