package berthtest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/wasm/abi"
)

// FakeKV is a projection's key/value read model, in memory. Within a Spec a
// delivery's writes reach it only if the handler succeeds; used directly as
// a berth.KV it applies each write at once. The zero value is ready to use
// and safe for concurrent use.
type FakeKV struct {
	mu       sync.Mutex
	data     map[string][]byte
	failures []error
}

// Fail makes the next calls of the port (Get, Put or Delete) fail with errs,
// one call each.
func (kv *FakeKV) Fail(errs ...error) *FakeKV {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	kv.failures = append(kv.failures, errs...)
	return kv
}

// Set stores a value directly, bypassing scripted failures, to give a test
// its starting state. value is encoded as Event.Payload is; Set panics if it
// does not marshal.
func (kv *FakeKV) Set(key string, value any) *FakeKV {
	b, err := toJSON(value)
	if err != nil {
		panic("berthtest: FakeKV.Set " + key + ": " + err.Error())
	}
	kv.set(key, b)
	return kv
}

// Value returns a copy of the stored value of key.
func (kv *FakeKV) Value(key string) ([]byte, bool) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	v, ok := kv.data[key]
	return clone(v), ok
}

// Keys returns the stored keys in order.
func (kv *FakeKV) Keys() []string {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	keys := make([]string, 0, len(kv.data))
	for k := range kv.data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Get implements berth.KV.
func (kv *FakeKV) Get(key string) ([]byte, bool, error) {
	if err := kv.nextFailure(); err != nil {
		return nil, false, err
	}
	v, ok := kv.Value(key)
	return v, ok, nil
}

// Put implements berth.KV.
func (kv *FakeKV) Put(key string, value []byte) error {
	if err := kv.nextFailure(); err != nil {
		return err
	}
	kv.set(key, value)
	return nil
}

// Delete implements berth.KV; deleting a missing key is no error.
func (kv *FakeKV) Delete(key string) error {
	if err := kv.nextFailure(); err != nil {
		return err
	}
	kv.remove(key)
	return nil
}

func (kv *FakeKV) nextFailure() error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if len(kv.failures) == 0 {
		return nil
	}
	err := kv.failures[0]
	kv.failures = kv.failures[1:]
	return err
}

func (kv *FakeKV) set(key string, value []byte) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if kv.data == nil {
		kv.data = map[string][]byte{}
	}
	if value == nil {
		value = []byte{}
	}
	kv.data[key] = clone(value)
}

func (kv *FakeKV) remove(key string) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	delete(kv.data, key)
}

// FakeCommands is a saga's command port and the command gateway behind it.
// Within a Spec the commands of a delivery reach it only if the handler
// succeeds, and those matching a Reject rule are rejected and delivered to
// the saga's rejection handler; used directly as a berth.CommandSender it
// records each command at once. The zero value is ready to use and safe for
// concurrent use.
type FakeCommands struct {
	mu       sync.Mutex
	failures []error
	sent     []berth.Command
	rules    []rejectRule      // scripted rejections (saga.go)
	rejected []berth.Rejection // rejections so far
}

// Fail makes the next Send calls fail with errs, one call each.
func (c *FakeCommands) Fail(errs ...error) *FakeCommands {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, errs...)
	return c
}

// Send implements berth.CommandSender. Like the host, it refuses a command
// without an aggregate type, an aggregate id or a type (berth.ClassHost).
func (c *FakeCommands) Send(cmd berth.Command) error {
	if err := c.check(cmd); err != nil {
		return err
	}
	c.record(cmd)
	return nil
}

// Sent returns the commands sent so far, in order.
func (c *FakeCommands) Sent() []berth.Command {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.sent)
}

// check validates cmd and takes the next scripted failure.
func (c *FakeCommands) check(cmd berth.Command) error {
	if cmd.AggregateType == "" || cmd.AggregateID == "" || cmd.Type == "" {
		return berth.ClassHost.New(fmt.Sprintf("send command %q: aggregate type, aggregate id and type are required", cmd.Type))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failures) == 0 {
		return nil
	}
	err := c.failures[0]
	c.failures = c.failures[1:]
	return err
}

func (c *FakeCommands) record(cmd berth.Command) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sent = append(c.sent, copyCommand(cmd))
}

func copyCommand(cmd berth.Command) berth.Command {
	cmd.Payload = clone(cmd.Payload)
	return cmd
}

// FakeConfig is the module's configuration, as the operator sets it in
// [modules.<name>] config = { … }.
type FakeConfig map[string]string

// Get implements berth.Config.
func (c FakeConfig) Get(key string) (string, bool) {
	v, ok := c[key]
	return v, ok
}

// LogLine is one line a handler logged.
type LogLine struct {
	Level string // "debug", "info", "warn" or "error"
	Key   string // the invocation key the host tags the line with (empty outside a Spec)
	Msg   string // the message
	KV    []any  // alternating keys and values
}

// String formats the line as the host's log shows its text:
// "msg k1=v1 k2=v2", after the level and the key.
func (l LogLine) String() string {
	var b strings.Builder
	b.WriteString(l.Level)
	if l.Key != "" {
		b.WriteString(" " + l.Key)
	}
	b.WriteString(": " + l.Msg)
	for i := 0; i+1 < len(l.KV); i += 2 {
		fmt.Fprintf(&b, " %v=%v", l.KV[i], l.KV[i+1])
	}
	return b.String()
}

// FakeLog records log lines. The zero value is ready to use and safe for
// concurrent use.
type FakeLog struct {
	mu    sync.Mutex
	lines []LogLine
}

// Lines returns the lines logged so far, in order.
func (l *FakeLog) Lines() []LogLine {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// Debug implements berth.Logger.
func (l *FakeLog) Debug(msg string, kv ...any) { l.add(LogLine{Level: "debug", Msg: msg, KV: kv}) }

// Info implements berth.Logger.
func (l *FakeLog) Info(msg string, kv ...any) { l.add(LogLine{Level: "info", Msg: msg, KV: kv}) }

// Warn implements berth.Logger.
func (l *FakeLog) Warn(msg string, kv ...any) { l.add(LogLine{Level: "warn", Msg: msg, KV: kv}) }

// Error implements berth.Logger.
func (l *FakeLog) Error(msg string, kv ...any) { l.add(LogLine{Level: "error", Msg: msg, KV: kv}) }

func (l *FakeLog) add(line LogLine) {
	line.KV = slices.Clone(line.KV)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, line)
}

// keyedLog is a delivery's logger: it tags lines with the invocation key,
// records them and writes them to the test's log.
type keyedLog struct {
	log *FakeLog
	key string
	t   TB
}

func (k keyedLog) line(level, msg string, kv []any) {
	k.t.Helper()
	line := LogLine{Level: level, Key: k.key, Msg: msg, KV: kv}
	k.log.add(line)
	k.t.Logf("%s", line)
}

func (k keyedLog) Debug(msg string, kv ...any) { k.t.Helper(); k.line("debug", msg, kv) }
func (k keyedLog) Info(msg string, kv ...any)  { k.t.Helper(); k.line("info", msg, kv) }
func (k keyedLog) Warn(msg string, kv ...any)  { k.t.Helper(); k.line("warn", msg, kv) }
func (k keyedLog) Error(msg string, kv ...any) { k.t.Helper(); k.line("error", msg, kv) }

// Refused returns the error the host's ports report for a refused
// connection: class berth.ClassConnectionRefused, systemic. what names the
// call, e.g. "POST http://notifications.test/…".
func Refused(what string) error {
	e := berth.ClassConnectionRefused.New(what + ": connection refused")
	e.Kind = abi.KindSystemic
	return e
}

// Denied returns the error the host's HTTP port reports for a host the
// module may not reach: class berth.ClassOutboundDenied.
func Denied(what string) error {
	return berth.ClassOutboundDenied.New(what + ": host not in the module's allowed-hosts")
}

// TimedOut returns the error the host's ports report for a wait that ran
// out or a busy host: class berth.ClassWaitTimeout, backpressure, not to be
// retried sooner than retryAfter (0: no floor).
func TimedOut(what string, retryAfter time.Duration) error {
	e := berth.ClassWaitTimeout.New(what + ": the wait ran out")
	e.Kind = abi.KindBackpressure
	e.RetryAfter = retryAfter
	return e
}

// Unsupported returns the error the host's ports report for a port the host
// does not offer to the processor: class berth.ClassUnsupported.
func Unsupported(what string) error {
	return berth.ClassUnsupported.New(what)
}
