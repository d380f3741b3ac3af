package retry

import "testing"

// AwaitsHost takes Await only from a berth.Canceled failure: a condition of the host, never the
// handler's (a failure of another class with Await set is the handler's as before).
func TestAwaitsHost(t *testing.T) {
	ready := make(chan struct{})
	for _, tt := range []struct {
		name string
		f    *Failure
		want bool
	}{
		{"nil", nil, false},
		{"canceled", &Failure{Classes: []string{ClassCanceled}}, false},
		{"canceled awaiting the host", &Failure{Classes: []string{ClassCanceled}, Await: ready}, true},
		{"timeout with await", &Failure{Classes: []string{ClassTimeout}, Await: ready}, false},
	} {
		if got := AwaitsHost(tt.f) != nil; got != tt.want {
			t.Errorf("%s: AwaitsHost = %v, want %v", tt.name, got, tt.want)
		}
	}
}
