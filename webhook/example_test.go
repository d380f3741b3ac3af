package webhook_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/berthhq/berth/webhook"
)

// A receiver checks the signature and the timestamp, then deduplicates on
// the payload's id, as a delivery may come more than once.
func ExampleVerifyRequest() {
	const secret = "s3cret"
	seen := map[string]bool{}
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := webhook.VerifyRequest(r, secret, time.Now(), 5*time.Minute)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if !seen[p.ID] {
			seen[p.ID] = true
			fmt.Printf("%s: %s %s/%s in %s\n", p.Hook, p.Type, p.AggregateType, p.AggregateID, p.Subscription)
		}
		w.WriteHeader(http.StatusNoContent)
	})

	// What the dispatcher sends, twice.
	body := []byte(`{"id":"7","hook":"ops","seq":7,"type":"parked","subscription":"ShipmentNotifier.onOrderShipped","aggregateType":"order","aggregateId":"o-1","version":3}`)
	for range 2 {
		ts := time.Now().Unix()
		r := httptest.NewRequest(http.MethodPost, "/hooks/berth", bytes.NewReader(body))
		r.Header.Set(webhook.HeaderTimestamp, strconv.FormatInt(ts, 10))
		r.Header.Set(webhook.HeaderSignature, webhook.Sign(secret, ts, body))
		w := httptest.NewRecorder()
		receiver.ServeHTTP(w, r)
		fmt.Println(w.Code)
	}
	// Output:
	// ops: parked order/o-1 in ShipmentNotifier.onOrderShipped
	// 204
	// 204
}
