package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/api/wire"
)

// TestParkedShowWire: parked show reads the answer as package wire defines
// it, every field the operator needs included — the failure's class, what
// classified it, its undeclared classes, why it waits and its invocation key.
func TestParkedShowWire(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 8, 30, 0, 0, time.UTC)
	e := wire.ErrorInfo{Classes: []string{"UnknownBuyer", "NotificationFailed"}, Message: "no buyer b-9", Code: "E42",
		Kind: "unrecoverable", Class: "unrecoverable", Reason: "handler unrecoverable: UnknownBuyer", Undeclared: []string{"UnknownBuyer"}}
	detail := wire.ParkedRecordDetail{
		ParkedRecord: wire.ParkedRecord{Subscription: "P.h", AggregateType: "Order", AggregateID: "o-7", Version: 3, Index: 1,
			Position: 17, Error: e, Attempts: 5, ParkedRetries: 2, FirstFailure: t0, LastFailure: t0.Add(time.Minute),
			State: wire.StateWaiting, WaitReason: wire.WaitUnrecoverable, InvocationKey: "P.h:Order/o-7@3:1",
			History: []wire.HistoryEntry{
				{Time: t0.Add(2 * time.Minute), Action: "skip-later", Actor: "ops", Reason: "looked at it"},
				{Time: t0, Action: "parked", Attempt: 5, Version: 3, Error: &e},
			}},
		Event:       &wire.Event{Type: "OrderShipped", Data: json.RawMessage(`{"carrier":"dhl"}`)},
		HeldCommits: 4,
	}
	body, err := json.Marshal(detail)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.EscapedPath() != "/v1/subscriptions/P.h/parked/Order/o-7" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	defer srv.Close()
	s := step{args: []string{"parked", "show", "P.h", "Order", "o-7"}, stdout: []string{
		"Order/o-7", "version 3 (event 1 of that commit, position 17)", "invocation key:", "P.h:Order/o-7@3:1",
		`OrderShipped {"carrier":"dhl"}`, "4 later commit(s)", "waiting", "the failure is unrecoverable",
		"attempts:", "5", "parked retries:", "2", "no buyer b-9", "taken for:", "unrecoverable (handler unrecoverable: UnknownBuyer)",
		"UnknownBuyer < NotificationFailed", "undeclared classes:", "E42", "history:", "parked", "skip-later", "ops", "looked at it",
	}, check: func(t *testing.T, stdout, _ string) {
		// The history is printed oldest first, whatever order it came in.
		_, history, _ := strings.Cut(stdout, "history:\n")
		rows := strings.Split(strings.TrimSpace(history), "\n")
		if len(rows) != 3 || !strings.Contains(rows[1], "parked") || !strings.Contains(rows[2], "skip-later") {
			t.Errorf("history rows %q, want the header, then parked, then skip-later", rows)
		}
	}}
	s.run(t, srv.URL)
}
