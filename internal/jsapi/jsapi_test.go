package jsapi

import (
	"context"
	"errors"
	"fmt"
	"github.com/berthhq/berth/internal/clock"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/testing/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestTransient(t *testing.T) {
	// What an object store's Get returns when its chunks stop coming: the
	// read of its pipe past its deadline.
	r, w := net.Pipe()
	defer w.Close()
	r.SetReadDeadline(time.Now())
	_, stalled := r.Read(make([]byte, 1))
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"a try's timeout", fmt.Errorf("create: %w", context.DeadlineExceeded), true},
		{"nats timeout", nats.ErrTimeout, true},
		{"disconnected mid-request", fmt.Errorf("append: %w", nats.ErrDisconnected), true},
		{"reconnecting, buffer full", nats.ErrReconnectBufExceeded, true},
		{"no responders", nats.ErrNoResponders, true},
		{"no stream response", jetstream.ErrNoStreamResponse, true},
		{"no peers for placement", &jetstream.APIError{Code: 500, ErrorCode: 10005, Description: "no suitable peers for placement"}, true},
		{"temporarily unavailable", &jetstream.APIError{Code: 503, ErrorCode: 10008}, true},
		{"cluster cannot handle it", &jetstream.APIError{Code: 500, ErrorCode: 10009}, true},
		{"duplicate message id in process", &jetstream.APIError{Code: 409, ErrorCode: 10158}, true},
		{"temporarily unavailable, older API (a KV watch)", &nats.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{"stream not found, older API", nats.ErrStreamNotFound, false},
		{"an object read stalled", fmt.Errorf("modules: current x: %w", stalled), true},
		{"name in use", jetstream.ErrStreamNameAlreadyInUse, false},
		{"stream not found", jetstream.ErrStreamNotFound, false},
		{"jetstream off", jetstream.ErrJetStreamNotEnabled, false},
		{"cancelled", context.Canceled, false},
		{"closed", nats.ErrConnectionClosed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Transient(tc.err); got != tc.want {
				t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// TestRetryAsksAgainWhileTransient: a request the cluster cannot answer yet
// is sent again, each try bounded by its own growing timeout, until it is
// answered; a refusal ends it at once; the caller's deadline ends it with
// the last error and how long it tried.
func TestRetryAsksAgainWhileTransient(t *testing.T) {
	t.Run("answered at the third try", func(t *testing.T) {
		var bounds []time.Duration
		v, err := Retry(t.Context(), Opening(5*time.Second), Transient, func(ctx context.Context) (int, error) {
			d, _ := ctx.Deadline()
			bounds = append(bounds, time.Until(d).Round(100*time.Millisecond))
			if len(bounds) < 3 {
				return 0, nats.ErrNoResponders
			}
			return 7, nil
		})
		if v != 7 || err != nil {
			t.Fatalf("Retry = %d, %v; want 7, nil", v, err)
		}
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}
		for i := range want {
			if bounds[i] != want[i] {
				t.Fatalf("tries bounded by %v, want %v", bounds, want)
			}
		}
	})
	t.Run("refusal", func(t *testing.T) {
		tries := 0
		_, err := Retry(t.Context(), Opening(time.Second), Transient, func(context.Context) (int, error) {
			tries++
			return 0, jetstream.ErrStreamNameAlreadyInUse
		})
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) || tries != 1 {
			t.Fatalf("after %d tries: %v; want one try and the refusal", tries, err)
		}
	})
	t.Run("caller's deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := Retry(ctx, Opening(time.Second), Transient, func(context.Context) (int, error) { return 0, nats.ErrNoResponders })
		if !errors.Is(err, nats.ErrNoResponders) || !strings.Contains(err.Error(), "tried for") {
			t.Fatalf("Retry past the deadline: %v; want no responders, tried for …", err)
		}
	})
}

// TestAskGivesEveryTryTheWholeTime: Ask sends a request again as Retry
// does, but every try — the first too — has the whole perTry (a publish on
// a loaded machine is not cut short and sent twice); past the caller's
// deadline its last error is still Transient, for the caller to answer
// "unavailable, try again".
func TestAskGivesEveryTryTheWholeTime(t *testing.T) {
	var bounds []time.Duration
	v, err := Ask(t.Context(), 3*time.Second, func(ctx context.Context) (int, error) {
		d, _ := ctx.Deadline()
		bounds = append(bounds, time.Until(d).Round(100*time.Millisecond))
		if len(bounds) < 3 {
			return 0, nats.ErrTimeout
		}
		return 7, nil
	})
	if v != 7 || err != nil {
		t.Fatalf("Ask = %d, %v; want 7, nil", v, err)
	}
	for _, b := range bounds {
		if b != 3*time.Second {
			t.Fatalf("tries bounded by %v, want 3s each", bounds)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = Ask(ctx, time.Second, func(ctx context.Context) (int, error) {
		<-ctx.Done()
		return 0, ctx.Err()
	})
	if !Transient(err) || !strings.Contains(err.Error(), "tried for") {
		t.Fatalf("Ask past the deadline: %v; want a transient error, tried for …", err)
	}
}

// TestAwaitLeaderWaitsForAStreamBeingCreated: a stream not known yet (its
// creation not applied by the server asked) is waited for, and the wait
// ends with the stream's leader once it exists.
func TestAwaitLeaderWaitsForAStreamBeingCreated(t *testing.T) {
	c := natstest.RunCluster(t, 3)
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- AwaitLeader(t.Context(), js, "LATE", time.Second) }()
	time.Sleep(300 * time.Millisecond) // the stream comes later than the wait starts
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "LATE", Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("AwaitLeader: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if err := AwaitLeader(ctx, js, "NEVER", time.Second); !errors.Is(err, jetstream.ErrNoStreamResponse) || !strings.Contains(err.Error(), "NEVER") {
		t.Fatalf("AwaitLeader of a stream never made: %v", err)
	}
}

// TestRetryFollowsItsPolicy: the pauses grow from FirstPause to MaxPause,
// on the Policy's Clock; Attempts ends the tries with a GaveUp holding the
// last error; retryable decides what is tried again, not Transient, and
// an error op marks Permanent is returned at once.
func TestRetryFollowsItsPolicy(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	p := Policy{FirstPause: 10 * time.Millisecond, MaxPause: 30 * time.Millisecond, Attempts: 4, Clock: fake}
	errAgain := errors.New("again")
	tries := 0
	done := make(chan error, 1)
	go func() {
		_, err := Retry(t.Context(), p, func(err error) bool { return errors.Is(err, errAgain) }, func(context.Context) (int, error) {
			tries++
			return 0, errAgain
		})
		done <- err
	}()
	// Each pause is a timer on the policy's clock: read it, then let it pass.
	var pauses []time.Duration
	wait, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for range 3 {
		if err := fake.BlockUntil(wait, 1); err != nil {
			t.Fatalf("after %v: no pause on the clock: %v", pauses, err)
		}
		d, _ := fake.NextFire()
		pauses = append(pauses, d)
		fake.Advance(d)
	}
	var err error
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("Retry did not end after its 4 tries")
	}
	var gaveUp *GaveUp
	if !errors.As(err, &gaveUp) || !errors.Is(err, errAgain) || gaveUp.Tries != 4 || tries != 4 {
		t.Fatalf("after %d tries: %v; want 4 tries and a GaveUp with the last error", tries, err)
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond}
	if fmt.Sprint(pauses) != fmt.Sprint(want) {
		t.Fatalf("paused %v, want %v", pauses, want)
	}
	_, err = Retry(t.Context(), p, func(err error) bool { return errors.Is(err, errAgain) }, func(context.Context) (int, error) {
		return 0, nats.ErrNoResponders
	})
	if !errors.Is(err, nats.ErrNoResponders) || errors.As(err, &gaveUp) {
		t.Fatalf("an error the policy does not retry: %v; want it as it is", err)
	}
	tries = 0
	_, err = Retry(t.Context(), p, Always, func(context.Context) (int, error) {
		tries++
		return 0, Permanent(errAgain)
	})
	if err != errAgain || tries != 1 {
		t.Fatalf("a Permanent error after %d tries: %v; want one try and the error unmarked", tries, err)
	}
}
