// Package hostspec tests the built artifact: it runs a compiled Berth module
// (the .wasm you upload) in the host's own sandbox, with the fakes and the
// expectations of the guest SDK's test kit, berthtest, on the host side.
//
//	spec := hostspec.New(t, wasm) // a *berthtest.Spec
//	spec.Config["notifications-url"] = "http://notifications.test"
//	spec.HTTP.Respond(berthtest.Reply(429, "", "Retry-After", "2"))
//	spec.WhenEvent(shipped).ExpectBackpressure(2 * time.Second)
//
// Each WhenEvent runs the handler once through registry.Call, the call every
// invoker of the host makes, under the handler's Timeout (else the
// processor's, else WithTimeout's), and so sees its outcome as the host
// does: a guest's failure keeps its classes, kind and retry-after; a call
// that ran past its deadline fails with class berth.Timeout (Timeout), a
// crashed guest with berth.Trap (Trap), one over its memory limit with
// berth.MemoryExceeded (MemoryExceeded).
//
// The ports, host side:
//
//   - outbound HTTP goes through the sandbox (every host is allowed unless
//     WithAllowedHosts says otherwise) to a transport that hands each request
//     to spec.HTTP and its answer back. FakeHTTP's refused connection reaches
//     the guest as a refused connection (berth.ConnectionRefused, systemic)
//     and its timeout as a wait that ran out (berth.WaitTimeout,
//     backpressure, but without the retry-after floor, which the sandbox does
//     not pass on). Any other scripted error, FailDenied's included, reaches
//     the guest as a failed request, berth.HostError, with the error's text:
//     the sandbox denies a host by its allowed hosts before any transport;
//   - spec.Config is the module's operator-set configuration (the module is
//     loaded again when it changed since the last call);
//   - a projection's key/value port is spec.KV, its writes buffered and
//     applied only when the call succeeds; a scripted failure of kind
//     backpressure (berthtest.TimedOut) is the sandbox's busy store;
//   - a saga's commands are sent to spec.Commands only when the call
//     succeeded, in order, and a rejected one is delivered to the module's
//     rejection handler, run in the sandbox in the same WhenEvent, as the
//     host does; a command whose payload is not JSON fails the call
//     (berth.InvalidCommand) before any is sent, as in the host. A failure
//     scripted with spec.Commands.Fail fails the call after the handler
//     returned, like a gateway failure, since the guest's command port only
//     queues;
//   - lines the guest logs are recorded in spec.Log, tagged with the
//     invocation key (the message as the guest formatted it, key=value pairs
//     included, with no KV), and written to the test's log, as is what the
//     guest writes to stdout and stderr.
//
// Then.Err is the failure rebuilt as a *berth.Error: ExpectErrorIs and
// ExpectErrorClass match classes by name, so declare the module's classes in
// the test (berth.NewErrorClass("UnknownBuyer", nil)); an error value such as
// the one given to spec.HTTP.Fail does not come back out of the guest.
//
// All specs of a test binary share one sandbox, so each module is compiled
// once; each spec loads its own instances and closes them when the test ends.
package hostspec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/wasm/abi"
)

// Classes of the failures the host itself gives a call, for ExpectErrorClass
// and ExpectErrorIs.
var (
	// Timeout: the call ran past its deadline and was stopped.
	Timeout = berth.NewErrorClass(retry.ClassTimeout, nil)
	// Trap: the guest crashed (a fatal error, a panic in a goroutine, a bad
	// pointer handed to the host).
	Trap = berth.NewErrorClass(retry.ClassTrap, nil)
	// MemoryExceeded: the guest needed more than its memory limit.
	MemoryExceeded = berth.NewErrorClass(retry.ClassMemoryExceeded, nil)
	// InvalidCommand: a saga sent a command whose payload is not JSON.
	InvalidCommand = berth.NewErrorClass(retry.ClassInvalidCommand, nil)
)

// Option configures New.
type Option func(*options)

type options struct {
	name        string
	timeout     time.Duration
	memoryPages uint32
	allowed     []string
}

// WithTimeout sets the deadline of a call whose handler and processor set no
// Timeout (default: the host's, retry.DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithMemoryLimitPages caps the module's memory in 64 KiB pages, as
// [modules.<name>] memory-limit-pages does (default: the sandbox's, 1024).
func WithMemoryLimitPages(pages uint32) Option {
	return func(o *options) { o.memoryPages = pages }
}

// WithAllowedHosts sets the hosts the module's outbound HTTP may reach, as
// [modules.<name>] allowed-hosts does (default "*": every host). A request
// to another host is denied by the sandbox (berth.OutboundDenied) and never
// reaches spec.HTTP.
func WithAllowedHosts(hosts ...string) Option {
	return func(o *options) { o.allowed = append([]string(nil), hosts...) }
}

// WithModuleName sets the name the module is loaded under, which the
// sandbox's log lines show (default "hostspec").
func WithModuleName(name string) Option { return func(o *options) { o.name = name } }

// New loads the compiled module wasm in the sandbox, reads its processor's
// description from it, and returns a berthtest.Spec whose WhenEvent runs the
// module's handlers there, with the Spec's fakes as the host's ports. It
// fails the test at once if the sandbox refuses the module.
func New(t testing.TB, wasm []byte, opts ...Option) *berthtest.Spec {
	t.Helper()
	o := options{name: "hostspec", timeout: retry.DefaultTimeout, allowed: []string{"*"}}
	for _, opt := range opts {
		opt(&o)
	}
	sb, err := sharedSandbox()
	if err != nil {
		t.Fatalf("hostspec: %v", err)
		return nil
	}
	r := &runner{t: t, sb: sb, wasm: wasm, opts: o}
	if err := r.load(map[string]string{}); err != nil {
		t.Fatalf("hostspec: load the module: %v", err)
		return nil
	}
	t.Cleanup(r.close)
	return berthtest.NewWithRunner(t, r.desc, r)
}

var shared struct {
	once sync.Once
	sb   *sandbox.Sandbox
	err  error
}

// sharedSandbox returns the sandbox every spec of the process uses. Its
// transport and logger find the spec a request or a line belongs to in the
// call's context.
func sharedSandbox() (*sandbox.Sandbox, error) {
	shared.once.Do(func() {
		shared.sb, shared.err = sandbox.New(sandbox.Config{
			HTTPTransport: transport{},
			Logger:        slog.New(logHandler{}),
		})
	})
	return shared.sb, shared.err
}

// runner runs a spec's calls in the sandbox: it is the berthtest.Runner of
// the Spec New returns.
type runner struct {
	t    testing.TB
	sb   *sandbox.Sandbox
	wasm []byte
	opts options

	mu     sync.Mutex // one call at a time; guards the fields below
	mod    *sandbox.Module
	desc   abi.Description
	config map[string]string // what mod was loaded with
}

// load loads the module with the config, replacing the one loaded before.
func (r *runner) load(config map[string]string) error {
	mod, err := r.sb.Load(context.Background(), r.opts.name, r.wasm, sandbox.ModuleConfig{
		MemoryLimitPages: r.opts.memoryPages,
		AllowedHosts:     r.opts.allowed,
		Config:           config,
	})
	if err != nil {
		return err
	}
	if r.mod != nil {
		r.mod.Close(context.Background())
	}
	r.mod, r.desc, r.config = mod, mod.Description(), config
	return nil
}

func (r *runner) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mod != nil {
		r.mod.Close(context.Background())
		r.mod = nil
	}
}

// Run implements berthtest.Runner: one call in the sandbox, its outcome seen
// as the host sees it, a saga's commands handed to the delivery's command
// port after a success.
func (r *runner) Run(ev *abi.Event, ports berth.Ports) abi.Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mod == nil {
		return failed(abi.Failure{Classes: berth.ClassHost.Chain(), Message: "hostspec: the test has ended; the module is closed"})
	}
	if cfg, ok := ports.Config.(berthtest.FakeConfig); ok && !maps.Equal(cfg, r.config) {
		if err := r.load(maps.Clone(map[string]string(cfg))); err != nil {
			return failed(abi.Failure{Classes: berth.ClassHost.Chain(), Message: "hostspec: load the module with the spec's config: " + err.Error()})
		}
	}
	var sp sandbox.Ports
	if r.desc.Kind == abi.KindProjection && ports.KV != nil {
		sp.KV = kvPort{ports.KV}
	}
	c := &call{ports: ports, t: r.t}
	leave := enter(ev.InvocationKey, c)
	ev.DeadlineUnixNano = 0 // the sandbox sets it from the timeout
	cmds, f := registry.Call(context.WithValue(context.Background(), callKey{}, c), r.mod, ev, r.timeout(ev.Handler), sp)
	leave()
	if f != nil {
		return failed(failureOf(f))
	}
	return sendCommands(cmds, ports.Commands)
}

// timeout is the call's deadline as the host resolves it: the handler's
// Timeout over the processor's over the option's (the host's default).
func (r *runner) timeout(handler string) time.Duration {
	processor, own := registry.DeclaredRetry(r.desc, handler)
	return retry.Resolve(
		retry.Layer{Source: retry.SourceDefault, Settings: retry.Settings{Timeout: r.opts.timeout}},
		retry.Layer{Source: retry.SourceProcessor, Settings: processor},
		retry.Layer{Source: retry.SourceHandler, Settings: own},
	).Timeout
}

// sendCommands hands a succeeded call's commands, checked by registry.Call
// as the host checks them, to the delivery's command port, which sends them
// once the call is over.
func sendCommands(cmds []abi.Command, port berth.CommandSender) abi.Result {
	for _, c := range cmds {
		err := port.Send(berth.Command{AggregateType: c.AggregateType, AggregateID: c.AggregateID, Type: c.Type, Payload: c.Payload})
		if err != nil {
			return resultOf(err)
		}
	}
	return abi.Result{Status: abi.StatusOK}
}

func failed(f abi.Failure) abi.Result { return abi.Result{Status: abi.StatusFailed, Failure: f} }

// failureOf is the ABI form of a failure the host classifies.
func failureOf(f *retry.Failure) abi.Failure {
	out := abi.Failure{Classes: f.Classes, Message: f.Message, Code: f.Code}
	switch f.Reported {
	case retry.ReportedSystemic:
		out.Kind = abi.KindSystemic
	case retry.ReportedBackpressure:
		out.Kind = abi.KindBackpressure
	}
	if f.RetryAfter > 0 {
		out.RetryAfterMillis = uint64((f.RetryAfter + time.Millisecond - 1) / time.Millisecond)
	}
	return out
}

// resultOf is the result a handler returning err gives, as the SDK builds it.
func resultOf(err error) abi.Result {
	p := &berth.Processor{Name: "hostspec"}
	p.On("fail", "Fail", func(*berth.Context) error { return err })
	return p.Dispatch(&abi.Event{Handler: "fail"}, berth.Ports{})
}

// kvPort is a projection's key/value port in the sandbox over the
// delivery's: a scripted failure of kind backpressure is the busy store.
type kvPort struct{ kv berth.KV }

func (k kvPort) Get(key string) ([]byte, bool, error) {
	v, ok, err := k.kv.Get(key)
	return v, ok, busy(err)
}

func (k kvPort) Put(key string, value []byte) error { return busy(k.kv.Put(key, value)) }

func (k kvPort) Delete(key string) error { return busy(k.kv.Delete(key)) }

func busy(err error) error {
	var e *berth.Error
	if errors.As(err, &e) && e.Kind == abi.KindBackpressure {
		return fmt.Errorf("%w: %v", sandbox.ErrBusy, err)
	}
	return err
}
