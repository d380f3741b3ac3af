package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/ledger"
)

const summarySub = "OrderSummary.onOrder"

// orderSummaryWasm is the order-summary projection sample compiled to wasm,
// built once per test binary.
var orderSummaryWasm = sync.OnceValues(func() ([]byte, error) { return testbuild.Bytes("samples/order-summary") })

// projectionHost is a host running the order-summary projection over two
// buyers' orders, and one value that is not JSON.
func projectionHost(t *testing.T) *testHost {
	t.Helper()
	wasm, err := orderSummaryWasm()
	if err != nil {
		t.Fatal(err)
	}
	h := newHost(t, authTOML)
	hr := newRequest(http.MethodPut, "/v1/modules/order-summary", bytes.NewReader(wasm))
	hr.Header.Set("Content-Type", "application/wasm")
	hr.Header.Set("Authorization", "Bearer "+deployerToken)
	w := httptest.NewRecorder()
	h.api.Handler().ServeHTTP(w, hr)
	if w.Code != http.StatusCreated && w.Code != http.StatusOK {
		t.Fatalf("upload: %d %s", w.Code, w.Body)
	}
	if w := h.upload("shipment-notifier", deployerToken); w.status >= 300 {
		t.Fatalf("upload notifier: %s", w)
	}
	for i, buyer := range []string{"ann", "ann", "bob"} {
		r := h.do(req{method: "POST", path: "/v1/events", token: deployerToken, body: fmt.Sprintf(
			`{"aggregateType":"Order","aggregateId":"o-%d","ownerId":%q,"events":[{"type":"OrderPlaced","data":{"total":100}}]}`, i, buyer)})
		if r.status != http.StatusCreated && r.status != http.StatusOK {
			t.Fatalf("append: %s", r)
		}
	}
	checkfor.Nil(t, 20*time.Second, 10*time.Millisecond, func() error {
		st, err := h.engine.Status(context.Background(), summarySub)
		if err == nil && st.Lag == 0 && st.Checkpoint > 3 {
			return nil
		}
		return fmt.Errorf("the projection did not catch up: %+v, %v", st, err)
	})
	if err := h.ledger.Update(context.Background(), func(tx ledger.Tx) error {
		return tx.ProjectionPut(summarySub, "raw", []byte{0xff, 0x00})
	}); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestProjectionEndpoints(t *testing.T) {
	h := projectionHost(t)
	base := "/v1/projections/" + summarySub
	tests := []struct {
		name        string
		path        string
		token       string
		status      int
		contentType string
		body        string // exact, when not ""
	}{
		{"a JSON value", base + "/buyer%2Fann", readerToken, 200, "application/json", `{"orders":2,"shipped":0,"total":200}`},
		{"another key", base + "/order%2Fo-2", readerToken, 200, "application/json", `{"buyer":"bob","total":100,"shipped":false}`},
		{"a value that is not JSON", base + "/raw", readerToken, 200, "application/octet-stream", "\xff\x00"},
		{"an unknown key", base + "/buyer%2Fcy", readerToken, 404, "application/problem+json", ""},
		// Decoded once: buyer%252Fann is the key buyer%2Fann, not buyer/ann.
		{"a key escaped twice is another key", base + "/buyer%252Fann", readerToken, 404, "application/problem+json", ""},
		{"a key with needless escapes", base + "/%62uyer%2F%61nn", readerToken, 200, "application/json", `{"orders":2,"shipped":0,"total":200}`},
		{"the subscription escaped", "/v1/projections/" + strings.ReplaceAll(summarySub, ".", "%2E") + "/buyer%2Fann", readerToken, 200, "application/json", `{"orders":2,"shipped":0,"total":200}`},
		{"an unknown subscription", "/v1/projections/No.such/k", readerToken, 404, "application/problem+json", ""},
		{"a reactor's subscription", "/v1/projections/" + notifierSub + "/k", readerToken, 404, "application/problem+json", ""},
		{"without a token", base + "/raw", "", 401, "application/problem+json", ""},
		{"a listing by prefix", base + "?prefix=buyer%2F", readerToken, 200, "application/json",
			`{"entries":[{"key":"buyer/ann","value":{"orders":2,"shipped":0,"total":200}},{"key":"buyer/bob","value":{"orders":1,"shipped":0,"total":100}}],"next":""}`},
		{"a first page", base + "?limit=2", readerToken, 200, "application/json",
			`{"entries":[{"key":"buyer/ann","value":{"orders":2,"shipped":0,"total":200}},{"key":"buyer/bob","value":{"orders":1,"shipped":0,"total":100}}],"next":"buyer/bob"}`},
		{"the next page", base + "?limit=3&after=order%2Fo-1", readerToken, 200, "application/json",
			`{"entries":[{"key":"order/o-2","value":{"buyer":"bob","total":100,"shipped":false}},{"key":"raw","base64":"/wA="}],"next":""}`},
		{"nothing with the prefix", base + "?prefix=none", readerToken, 200, "application/json", `{"entries":[],"next":""}`},
		{"a bad limit", base + "?limit=0", readerToken, 400, "application/problem+json", ""},
		{"a listing of an unknown subscription", "/v1/projections/No.such", readerToken, 404, "application/problem+json", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := h.do(req{method: "GET", path: tc.path, token: tc.token})
			if r.status != tc.status {
				t.Fatalf("%s", r)
			}
			if ct := r.header.Get("Content-Type"); ct != tc.contentType && ct != tc.contentType+"; charset=UTF-8" {
				t.Errorf("Content-Type %q, want %s", ct, tc.contentType)
			}
			if got := string(bytes.TrimSpace(r.body)); tc.body != "" && got != tc.body {
				t.Errorf("body\n %s\nwant\n %s", got, tc.body)
			}
		})
	}
}

// Resetting the projection's subscription clears its read model in the
// same step and builds it again from the log.
func TestProjectionResetOverREST(t *testing.T) {
	h := projectionHost(t)
	r := h.do(req{method: "POST", path: "/v1/subscriptions/" + summarySub + "/reset", token: operatorToken, body: `{"position":1}`})
	if r.status != http.StatusOK && r.status != http.StatusAccepted {
		t.Fatalf("reset: %s", r)
	}
	if r := h.do(req{method: "GET", path: "/v1/projections/" + summarySub + "/raw", token: readerToken}); r.status != 404 {
		t.Errorf("a key the events never wrote survived the reset: %s", r)
	}
	// The events are handled again on several partitions at once: ann's
	// summary is read once all of them are, not at its first, partial value.
	checkfor.Nil(t, 20*time.Second, 10*time.Millisecond, func() error {
		st, err := h.engine.Status(context.Background(), summarySub)
		if err == nil && st.Lag == 0 && st.Checkpoint > 3 {
			return nil
		}
		return fmt.Errorf("not rebuilt: %+v, %v", st, err)
	})
	r = h.do(req{method: "GET", path: "/v1/projections/" + summarySub + "/buyer%2Fann", token: readerToken})
	if r.status != 200 || string(r.body) != `{"orders":2,"shipped":0,"total":200}` {
		t.Fatalf("rebuilt %s", r)
	}
}
