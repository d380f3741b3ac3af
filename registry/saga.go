package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
	"github.com/berthhq/berth/wasm/abi"
)

// Limits of a gateway's answer.
const (
	maxGatewayBody = 64 << 10 // read at most this much of an answer
	maxReason      = 1024     // a rejection's reason is cut to this many bytes
)

// sagaInvoker runs a saga's handler, then sends the commands it queued to
// the command gateways, in order, within the same attempt; a command the
// gateway rejects is handed to the saga's rejection handler at once.
type sagaInvoker struct {
	mod      *sandbox.Module
	stamp    *capsuleStamp // names the module version in its failures' capsules
	handler  string
	rejected string // the rejection handler; "" if the saga has none
	settings func() Settings
	logger   *slog.Logger
	client   *http.Client
}

// sagaInvoker returns the invoker of saga handler h of module d.
func (r *Registry) sagaInvoker(d *deployed, desc abi.Description, h abi.HandlerDesc) sagaInvoker {
	return sagaInvoker{
		mod:      d.mod,
		stamp:    r.stampOf(d),
		handler:  h.Name,
		rejected: rejectionHandler(desc),
		settings: r.opts.Settings,
		logger:   r.opts.Logger.With("module", d.Name),
		// A gateway's redirect is an answer of its own (a failure), not a
		// hop to follow: a POST must not turn into a GET.
		client: &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
	}
}

// rejectionHandler returns the saga's rejection handler: the first handler
// registered for abi.EventCommandRejected ("" if none).
func rejectionHandler(desc abi.Description) string {
	for _, h := range desc.Handlers {
		for _, t := range h.EventTypes {
			if t == abi.EventCommandRejected {
				return h.Name
			}
		}
	}
	return ""
}

// Invoke runs the handler; only when it succeeded are its commands sent.
// The request id of command i is "<invocation key>/<i>", the same on every
// attempt, so the gateway can deduplicate a redelivery.
func (s sagaInvoker) Invoke(ctx context.Context, d subscription.Delivery) *retry.Failure {
	env := envelope(&d, s.handler)
	cmds, f := call(ctx, s.mod, &env, d.Timeout, sandbox.Ports{}, s.stamp, d.Subscription)
	if f != nil {
		return f
	}
	return s.send(ctx, d, &env, cmds, true)
}

// send sends the commands a handler run for env queued (checked by Call:
// every payload is JSON). With deliver, a
// rejected command goes to the rejection handler, whose own commands are
// sent next; without (the rejection handler's own commands), a rejection is
// logged: delivering it again could go round in circles.
func (s sagaInvoker) send(ctx context.Context, d subscription.Delivery, env *abi.Event, cmds []abi.Command, deliver bool) *retry.Failure {
	if len(cmds) == 0 {
		return nil
	}
	cfg := s.settings()
	gateways := make([]Gateway, len(cmds))
	for i, cmd := range cmds {
		gw, ok := cfg.CommandGateway(cmd.AggregateType)
		if !ok {
			// Checked before any command is sent: a missing table is the
			// operator's to add, and nothing half-sent waits meanwhile.
			return &retry.Failure{Classes: []string{retry.ClassNoCommandGateway},
				Message: fmt.Sprintf("command %s %s of %s: no command gateway for aggregate type %s; add a [commands.%s] table with its url to the host's configuration",
					cmd.Type, cmd.AggregateID, env.InvocationKey, cmd.AggregateType, tomlTableName(cmd.AggregateType))}
		}
		gateways[i] = gw
	}
	for i, cmd := range cmds {
		requestID := env.InvocationKey + "/" + strconv.Itoa(i)
		a := s.post(ctx, gateways[i], requestID, &cmd)
		if a.failure != nil {
			return a.failure
		}
		if !a.rejected {
			continue
		}
		rej := abi.Rejection{
			Command: abi.RejectedCommand{AggregateType: cmd.AggregateType, AggregateID: cmd.AggregateID, Type: cmd.Type,
				Payload: commandPayload(cmd.Payload)},
			Reason: a.reason, Status: a.status, EventType: env.Type, RequestID: requestID,
		}
		if !deliver || s.rejected == "" {
			why := "the saga has no rejection handler"
			if !deliver {
				why = "a command of the rejection handler is not delivered to it again"
			}
			s.logger.Warn("command rejected; "+why, "key", env.InvocationKey, "requestId", requestID,
				"command", cmd.Type, "aggregateType", cmd.AggregateType, "aggregateId", cmd.AggregateID,
				"status", a.status, "reason", a.reason)
			continue
		}
		if f := s.onRejected(ctx, d, env, i, &rej); f != nil {
			return f
		}
	}
	return nil
}

// onRejected calls the rejection handler for command i of env, in the same
// attempt, then sends the commands it queued.
func (s sagaInvoker) onRejected(ctx context.Context, d subscription.Delivery, env *abi.Event, i int, rej *abi.Rejection) *retry.Failure {
	payload, err := json.Marshal(rej)
	if err != nil {
		return &retry.Failure{Classes: []string{retry.ClassInvalidCommand}, Message: "encode the rejection: " + err.Error()}
	}
	renv := *env
	renv.Handler = s.rejected
	renv.InvocationKey = env.InvocationKey + ":rejected:" + strconv.Itoa(i)
	renv.Type = abi.EventCommandRejected
	renv.Payload = payload
	renv.DeadlineUnixNano = 0
	// The attempt's deadline (the engine's, on ctx) bounds the rejection
	// handler too: it runs within what is left of the attempt.
	cmds, f := call(ctx, s.mod, &renv, d.Timeout, sandbox.Ports{}, s.stamp, d.Subscription)
	if f != nil {
		f.Message = "rejection handler " + s.rejected + " (" + renv.InvocationKey + "): " + f.Message
		return f
	}
	return s.send(ctx, d, &renv, cmds, false)
}

// gatewayAnswer is how a gateway answered one command.
type gatewayAnswer struct {
	rejected bool
	status   int
	reason   string
	failure  *retry.Failure // nil: accepted or rejected
}

// commandRequest is the body POSTed to a gateway.
type commandRequest struct {
	RequestID     string          `json:"requestId"`
	AggregateType string          `json:"aggregateType"`
	AggregateID   string          `json:"aggregateId"`
	Type          string          `json:"type"`
	Payload       json.RawMessage `json:"payload"`
}

// post sends one command and classifies the answer: 2xx accepted, 409 and
// 422 rejected, 429 backpressure, a refused connection systemic, anything
// else a recoverable retry.ClassCommandGateway failure.
func (s sagaInvoker) post(ctx context.Context, gw Gateway, requestID string, cmd *abi.Command) gatewayAnswer {
	what := fmt.Sprintf("command %s %s to %s (request %s)", cmd.Type, cmd.AggregateID, gw.URL, requestID)
	body, err := json.Marshal(commandRequest{RequestID: requestID, AggregateType: cmd.AggregateType,
		AggregateID: cmd.AggregateID, Type: cmd.Type, Payload: commandPayload(cmd.Payload)})
	if err != nil {
		return gatewayAnswer{failure: &retry.Failure{Classes: []string{retry.ClassInvalidCommand}, Message: what + ": " + err.Error()}}
	}
	rctx, cancel := context.WithTimeout(ctx, gw.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, gw.URL, bytes.NewReader(body))
	if err != nil {
		return gatewayAnswer{failure: &retry.Failure{Classes: []string{retry.ClassCommandGateway}, Message: what + ": " + err.Error()}}
	}
	for k, v := range gw.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", requestID)
	// The attempt's span, so that the gateway's trace joins the delivery's.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := s.client.Do(req)
	if err != nil {
		return gatewayAnswer{failure: transportFailure(ctx, rctx, gw, what, err)}
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, maxGatewayBody))
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxGatewayBody)) // let the connection be reused
	switch st := resp.StatusCode; {
	case st >= 200 && st < 300:
		return gatewayAnswer{}
	case st == http.StatusConflict || st == http.StatusUnprocessableEntity:
		return gatewayAnswer{rejected: true, status: st, reason: reasonOf(resp.Header.Get("Content-Type"), text, st)}
	case st == http.StatusTooManyRequests:
		wait := retry.ParseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
		return gatewayAnswer{failure: &retry.Failure{Classes: []string{retry.ClassCommandGateway}, Reported: retry.ReportedBackpressure,
			RetryAfter: wait, HTTP429: true, Code: "429",
			Message: fmt.Sprintf("%s: the gateway is busy (429, Retry-After %q)", what, resp.Header.Get("Retry-After"))}}
	default:
		msg := fmt.Sprintf("%s: the gateway answered %d", what, st)
		if r := reasonOf(resp.Header.Get("Content-Type"), text, 0); r != "" {
			msg += ": " + r
		}
		return gatewayAnswer{failure: &retry.Failure{Classes: []string{retry.ClassCommandGateway}, Code: strconv.Itoa(st), Message: msg}}
	}
}

// transportFailure classifies a request that got no answer.
func transportFailure(ctx, rctx context.Context, gw Gateway, what string, err error) *retry.Failure {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return &retry.Failure{Classes: []string{retry.ClassConnectionRefused}, Message: what + ": connection refused"}
	case errors.Is(ctx.Err(), context.Canceled):
		return &retry.Failure{Classes: []string{retry.ClassCanceled}, Message: what + ": " + ctx.Err().Error()}
	case ctx.Err() != nil:
		// The attempt's own deadline (the engine's) passed while the gateway
		// was asked: the attempt timed out.
		return &retry.Failure{Classes: []string{retry.ClassTimeout}, Message: what + ": the attempt's deadline passed"}
	case rctx.Err() != nil:
		return &retry.Failure{Classes: []string{retry.ClassCommandGateway}, Message: fmt.Sprintf("%s: no answer within %s", what, gw.Timeout)}
	}
	return &retry.Failure{Classes: []string{retry.ClassCommandGateway}, Message: what + ": " + err.Error()}
}

// reasonOf extracts why a gateway refused a command: a problem's (or any
// JSON object's) detail, else its title, else the body as text, else the
// status text; cut to maxReason bytes.
func reasonOf(contentType string, body []byte, status int) string {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/problem+json" || mt == "application/json" || strings.HasSuffix(mt, "+json") {
		var p struct {
			Detail string `json:"detail"`
			Title  string `json:"title"`
		}
		if json.Unmarshal(body, &p) == nil {
			switch {
			case p.Detail != "":
				return boundReason(p.Detail)
			case p.Title != "":
				return boundReason(p.Title)
			}
		}
	}
	if t := strings.TrimSpace(string(body)); t != "" {
		return boundReason(t)
	}
	if status != 0 {
		return http.StatusText(status)
	}
	return ""
}

// boundReason cuts s to maxReason bytes on a rune boundary.
func boundReason(s string) string {
	if len(s) <= maxReason {
		return s
	}
	s = s[:maxReason]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// commandPayload returns a command's payload as JSON: null when empty.
func commandPayload(b []byte) json.RawMessage {
	if len(bytes.TrimSpace(b)) == 0 {
		return json.RawMessage("null")
	}
	return json.RawMessage(b)
}

// tomlTableName quotes a table name when TOML needs it.
func tomlTableName(name string) string {
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return strconv.Quote(name)
		}
	}
	if name == "" {
		return `""`
	}
	return name
}
