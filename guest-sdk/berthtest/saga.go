package berthtest

import (
	"strconv"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/wasm/abi"
)

// rejectRule is one scripted rejection of FakeCommands.
type rejectRule struct {
	match  Command
	status int
	reason string
}

// Reject makes the gateway reject every command matching match (empty
// fields match anything, a non-nil Payload is compared as JSON) with status
// 409 and the reason, as the user's command service would; see RejectWith.
func (c *FakeCommands) Reject(match Command, reason string) *FakeCommands {
	return c.RejectWith(match, 409, reason)
}

// RejectWith makes the gateway reject every command matching match with the
// HTTP status (409 or 422, as the host's gateway classifies) and the
// reason. The first matching rule decides. Within a Spec, a rejected
// command of a succeeded delivery is delivered to the saga's rejection
// handler (berth.Processor.OnRejected) as the host delivers it: in the same
// WhenEvent, with the invocation key "<key>:rejected:<command index>" and
// the request id "<key>/<command index>". A rejection of a command the
// rejection handler sent is recorded but not delivered again, as in the
// host.
func (c *FakeCommands) RejectWith(match Command, status int, reason string) *FakeCommands {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rules = append(c.rules, rejectRule{match: match, status: status, reason: reason})
	return c
}

// Rejected returns the rejections so far, in order.
func (c *FakeCommands) Rejected() []berth.Rejection {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]berth.Rejection, len(c.rejected))
	for i, r := range c.rejected {
		r.Command = copyCommand(r.Command)
		out[i] = r
	}
	return out
}

// verdict returns the status and reason of the first rule rejecting cmd.
func (c *FakeCommands) verdict(cmd berth.Command) (status int, reason string, rejected bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.rules {
		if r.match.matches(cmd) {
			return r.status, r.reason, true
		}
	}
	return 0, "", false
}

func (c *FakeCommands) addRejected(r berth.Rejection) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.Command = copyCommand(r.Command)
	c.rejected = append(c.rejected, r)
}

// sendOutcome is what sending a delivery's commands did.
type sendOutcome struct {
	commands   []berth.Command   // sent, in order, with the rejection handler's
	rejections []berth.Rejection // rejected
	requests   []berth.Request   // HTTP requests the rejection handler made
	failed     bool              // the rejection handler failed: res and err say how
	res        abi.Result
	err        error
}

// send hands the commands of a succeeded delivery of env to the gateway in
// order, as the host does: a rejected one goes to the saga's rejection
// handler at once, whose own commands are sent next; a failure of the
// rejection handler ends the delivery as failed.
func (s *Spec) send(env *abi.Event, cmds []berth.Command) (out sendOutcome) {
	s.t.Helper()
	for i, cmd := range cmds {
		s.Commands.record(cmd)
		out.commands = append(out.commands, copyCommand(cmd))
		status, reason, rejected := s.Commands.verdict(cmd)
		if !rejected {
			continue
		}
		rej := berth.Rejection{Command: copyCommand(cmd), Reason: reason, Status: status, EventType: env.Type,
			RequestID: env.InvocationKey + "/" + strconv.Itoa(i)}
		s.Commands.addRejected(rej)
		out.rejections = append(out.rejections, rej)
		h := s.Processor.HandlerFor(berth.EventCommandRejected)
		if h == nil || env.Type == berth.EventCommandRejected {
			s.t.Logf("berthtest: %s: command %s was rejected (%d: %s) and is not delivered again",
				rej.RequestID, commandString(cmd.AggregateType, cmd.AggregateID, cmd.Type, nil), status, reason)
			continue
		}
		renv := *env
		renv.Handler = h.Name
		renv.InvocationKey = env.InvocationKey + ":rejected:" + strconv.Itoa(i)
		renv.Type = berth.EventCommandRejected
		renv.Payload = berth.EncodeRejection(rej)
		d := &delivery{spec: s, key: renv.InvocationKey}
		res, err := s.dispatch(h, &renv, d)
		out.requests = append(out.requests, d.requestsMade()...)
		if res.Status != abi.StatusOK {
			out.failed, out.res, out.err = true, res, err
			return out
		}
		more := s.send(&renv, d.commit())
		out.commands = append(out.commands, more.commands...)
		out.rejections = append(out.rejections, more.rejections...)
	}
	return out
}

// ExpectRejected checks that the gateway rejected a command of this
// delivery matching want.
func (th *Then) ExpectRejected(want Command) *Then {
	th.t.Helper()
	if th.aborted {
		return th
	}
	for _, r := range th.Rejections {
		if want.matches(r.Command) {
			return th
		}
	}
	th.errorf("want a rejected command %s, but %s", commandString(want.AggregateType, want.AggregateID, want.Type, want.Payload), rejectionList(th.Rejections))
	return th
}

// ExpectNoRejection checks that the gateway rejected no command of this
// delivery.
func (th *Then) ExpectNoRejection() *Then {
	th.t.Helper()
	if !th.aborted && len(th.Rejections) > 0 {
		th.errorf("want no rejected command, but %s", rejectionList(th.Rejections))
	}
	return th
}

func rejectionList(rs []berth.Rejection) string {
	if len(rs) == 0 {
		return "none was rejected"
	}
	cmds := make([]berth.Command, len(rs))
	for i, r := range rs {
		cmds[i] = r.Command
	}
	return "it rejected " + commandList(cmds)
}
