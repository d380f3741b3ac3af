package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berthhq/berth/subscription"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Errors of the Forwarder beyond the engine's own (which come back from
// another host as the same sentinels).
var (
	// ErrUnreachable: the host that owns the aggregate's partition did not
	// answer — it is down (its partitions move to another host within twice
	// the lease TTL) or did not answer in time, in which case the call may
	// have taken effect there.
	ErrUnreachable = errors.New("cluster: owner unreachable")
	// ErrUnconfirmed: a call that concerns every host was not confirmed by
	// every host that owns a partition of the subscription in time. A
	// pause, unpause or pause until is stored and in force on every host
	// that confirmed (a host that cannot be reached loses its lease, and the
	// partitions' next owner starts from the stored state); a reset changed
	// nothing.
	ErrUnconfirmed = errors.New("cluster: not confirmed by every host")
)

// Operator-call subjects: S_OPS.<host-id> asks one host, S_OPS.all every
// host (S being the deployment's stream name).
const (
	opsSuffix   = "_OPS"
	opsAll      = "all"
	headerHost  = "Berth-Host" // on every reply: the host answering
	headerFrom  = "Berth-From" // on a broadcast: the host asking
	serviceName = "berth_ops"
)

// The operator calls one host makes on another.
const (
	opResume       = "resume"
	opSkip         = "skip"
	opRefreshPause = "refresh-pause" // read the stored pause state and apply it
	opHold         = "hold"          // stop the subscription for a reset
	opUnhold       = "unhold"
)

// opCall is one call, as JSON on the wire.
type opCall struct {
	Op            string `json:"op"`
	Subscription  string `json:"subscription"`
	AggregateType string `json:"aggregateType,omitempty"`
	AggregateID   string `json:"aggregateId,omitempty"`
	Through       uint64 `json:"throughVersion,omitempty"`
	Actor         string `json:"actor,omitempty"`
	Reason        string `json:"reason,omitempty"`
	// Hold is a reset's hold id (hold, unhold).
	Hold string `json:"hold,omitempty"`
	// WaitMS is how long the callee may take: what remains of the caller's
	// deadline, less a margin for the answer to travel back. For a hold,
	// how long it lasts unless lifted sooner.
	WaitMS int64 `json:"waitMs"`
}

func (c opCall) wait() time.Duration { return time.Duration(c.WaitMS) * time.Millisecond }

// errorCodes are the engine's errors as they travel between hosts (the
// micro error-code header); the answer's description is the error's
// message, so the caller sees what it would have seen on the owner.
var errorCodes = []struct {
	code string
	err  error
}{
	{"unknown-subscription", subscription.ErrUnknownSubscription},
	{"not-parked", subscription.ErrNotParked},
	{"bad-version", subscription.ErrBadVersion},
	{"bad-position", subscription.ErrBadPosition},
	{"bad-until", subscription.ErrBadUntil},
	{"busy", subscription.ErrBusy},
	{"closed", subscription.ErrClosed},
	{"not-owned", subscription.ErrNotOwned},
}

// codeOf is the code an error travels as ("error" for one of no sentinel).
func codeOf(err error) string {
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return "error"
}

// remoteError is an error another host answered with: its message, and the
// sentinel its code names (nil for none).
type remoteError struct {
	host, msg string
	sentinel  error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// replyError reads an answer: nil for a success, else the remoteError.
func replyError(m *nats.Msg) error {
	code := m.Header.Get(micro.ErrorCodeHeader)
	if code == "" {
		return nil
	}
	e := &remoteError{host: m.Header.Get(headerHost), msg: m.Header.Get(micro.ErrorHeader)}
	for _, c := range errorCodes {
		if c.code == code {
			e.sentinel = c.err
		}
	}
	if e.sentinel == nil {
		e.msg = fmt.Sprintf("host %s: %s", e.host, e.msg)
	}
	return e
}

func encodeCall(c opCall) []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // strings and numbers only
	}
	return b
}
