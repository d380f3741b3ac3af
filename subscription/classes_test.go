package subscription

import (
	"slices"
	"testing"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// A failure is classified by the module's declared tree: FatalLeaf, sent
// alone, is a Fatal, which is unrecoverable, so it parks after 1 attempt and
// its record keeps the chain it was classified by. A class the module does
// not declare is classified by the chain as sent and recorded as undeclared.
func TestClassifiedByDeclaredTree(t *testing.T) {
	clock := clock.NewFake(t0)
	rec := newRecorder(clock, func(d Delivery, n int) *retry.Failure {
		switch d.Commit.AggregateID {
		case "leaf":
			return &retry.Failure{Classes: []string{"FatalLeaf"}, Message: "fatal leaf"}
		case "stranger":
			return &retry.Failure{Classes: []string{"Stranger", "Fatal"}, Message: "stranger"}
		}
		return nil
	})
	s := spec(sub, rec)
	s.HandlerRetry = retry.Settings{Unrecoverable: []string{"Fatal"}}
	s.Classes = retry.NewClassTree(map[string]string{"Fatal": "", "FatalLeaf": "Fatal"})
	e := newEnv(t, Options{}, s)
	e.clock = clock
	e.start()
	e.append("Order", "leaf")
	e.append("Order", "stranger")
	for _, tt := range []struct {
		id              string
		classes, undecl []string
		reason          string
	}{
		{"leaf", []string{"FatalLeaf", "Fatal"}, nil, "handler unrecoverable: Fatal"},
		{"stranger", []string{"Stranger", "Fatal"}, []string{"Stranger"}, "handler unrecoverable: Fatal"},
	} {
		r := e.waitRecord(sub, "Order", tt.id, func(*ledger.Record) bool { return true })
		if r.Attempts != 1 || r.Error.Class != "unrecoverable" || r.Error.Reason != tt.reason ||
			!slices.Equal(r.Error.Classes, tt.classes) || !slices.Equal(r.Error.Undeclared, tt.undecl) {
			t.Errorf("%s: record %+v; want parked after 1 attempt with classes %v, undeclared %v", tt.id, r, tt.classes, tt.undecl)
		}
		if n := len(rec.of(tt.id)); n != 1 {
			t.Errorf("%s called %d times, want 1", tt.id, n)
		}
	}
}
