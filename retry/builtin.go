package retry

// ReservedPrefix starts the class names the host and the guest SDK give their own failures (berth.Timeout,
// berth.Panic, berth.HostError, ...; see [Builtins]). They are known without being declared, so a result
// naming one is never recorded as naming an undeclared class. The reserved event type of a rejected
// command (wasm/abi's EventCommandRejected, "berth.CommandRejected") shares the prefix but is no class.
const ReservedPrefix = "berth."

// The builtin class names: the classes the host, the guest SDK, the saga command gateway and the query
// store give their own failures, so that handler lists and classifier rules can name them. [Builtins]
// lists them with their default treatment and meaning; wasm/abi/ABI.md prints that list.
const (
	// ClassTimeout: the attempt ran longer than its timeout and was cancelled (default: recoverable).
	ClassTimeout = "berth.Timeout"
	// ClassTrap: the guest trapped (unreachable, out-of-bounds access, ...) or its result did not decode
	// (default: recoverable).
	ClassTrap = "berth.Trap"
	// ClassMemoryExceeded: the guest went over its memory limit (default: recoverable).
	ClassMemoryExceeded = "berth.MemoryExceeded"
	// ClassCanceled: an attempt cut short by the host, not by the handler: the host shutting down, or an
	// operator's action that stops a subscription's delivery (a reset, a module's removal). It is never
	// counted against an aggregate's budget and never parks one: the engine drops such an attempt and
	// delivers its event again ([IsCanceled]). An attempt that ran past its own timeout is ClassTimeout,
	// never ClassCanceled — unless it ran on the interpreter while its module compiled (sandbox.tier-up):
	// that deadline says nothing of the handler, and the attempt is made again on compiled code
	// ([Failure.Await]).
	ClassCanceled = "berth.Canceled"
	// ClassNoModule: no deployed module serves the subscription (reported systemic: its events wait).
	ClassNoModule = "berth.NoModule"

	// ClassPanic: the guest panicked, or the host panicked while serving it (default: recoverable).
	ClassPanic = "berth.Panic"
	// ClassHostError: a host call failed for a reason of its own (default: recoverable). The guest SDK's
	// host-call classes below are kinds of it.
	ClassHostError = "berth.HostError"
	// ClassConnectionRefused: a host-brokered connection (store, outbound call) was refused
	// (default: systemic).
	ClassConnectionRefused = "berth.ConnectionRefused"
	// ClassOutboundDenied: an outbound request to a host not in the module's allowed-hosts
	// (default: recoverable).
	ClassOutboundDenied = "berth.OutboundDenied"
	// ClassWaitTimeout: a host call's wait ran out, or the host's side was busy (reported backpressure).
	ClassWaitTimeout = "berth.WaitTimeout"
	// ClassUnsupported: a port this host does not offer to the processor (default: recoverable).
	ClassUnsupported = "berth.Unsupported"

	// ClassCommandGateway: a saga's command gateway answered neither accepted, rejected nor busy (a 5xx,
	// another 4xx, a redirect), or the request failed or timed out (default: recoverable; a 429 is
	// reported as backpressure).
	ClassCommandGateway = "berth.CommandGateway"
	// ClassNoCommandGateway: a saga sent a command to an aggregate type without a
	// [commands.<AggregateType>] table (default: recoverable; the operator adds the table, or classifies
	// the class).
	ClassNoCommandGateway = "berth.NoCommandGateway"
	// ClassInvalidCommand: a saga sent a command whose payload is not JSON (default: recoverable).
	ClassInvalidCommand = "berth.InvalidCommand"

	// ClassProjectionBusy is retired: the query store's writes are group-committed and a busy store
	// makes a call wait rather than fail, so the host no longer gives it. It stays a builtin so that
	// classifier rules naming it still load.
	ClassProjectionBusy = "berth.ProjectionBusy"
	// ClassProjectionConflict: keys the call read were changed by another call (another aggregate) before
	// its writes could be applied, on every run of the attempt (reported backpressure).
	ClassProjectionConflict = "berth.ProjectionConflict"
	// ClassProjectionTooBig: the call's writes are more than the store commits in one transaction
	// (default: recoverable).
	ClassProjectionTooBig = "berth.ProjectionTooBig"
	// ClassProjectionStore: the query store failed (reported systemic).
	ClassProjectionStore = "berth.ProjectionStore"
)

// Who gives a builtin class to a failure ([Builtin.GivenBy]).
const (
	GivenByHost    = "host"         // the host, for an attempt it ended or could not start
	GivenBySDK     = "guest SDK"    // the guest SDK, for a panic or a failed host call
	GivenByGateway = "saga gateway" // the host's command gateway, for a saga's command
	GivenByStore   = "query store"  // the host's query store, for a projection's call
)

// Builtin is one builtin class: its name, where it sits and what a failure of it is taken for.
type Builtin struct {
	// Name is the class name (ReservedPrefix + ...), e.g. "berth.Timeout".
	Name string
	// Parent is the builtin class it is a kind of, "" for none (the guest SDK's host-call classes are
	// kinds of ClassHostError: their chain is [name, berth.HostError]).
	Parent string
	// Default is what a failure of the class is taken for when the handler's own lists do not name it
	// (and, unless Reported, no classifier rule does).
	Default Class
	// Reported is set for a class whose failures come reported as systemic or backpressure: only the
	// handler's own lists then change the treatment, not a classifier rule (see [Classify]).
	Reported ReportedKind
	// Uncounted marks a class whose attempts are dropped and delivered again, never counted against a
	// budget nor classified (only ClassCanceled); Default does not apply.
	Uncounted bool
	// GivenBy says who gives the class: GivenByHost, GivenBySDK, GivenByGateway or GivenByStore.
	GivenBy string
	// Meaning says in one line when a failure has the class.
	Meaning string
}

// Treatment returns Default as written in TOML ("recoverable", "systemic", ...), with " (reported)" for a
// Reported class, or "not counted" for an Uncounted one.
func (b Builtin) Treatment() string {
	switch {
	case b.Uncounted:
		return "not counted"
	case b.Reported != ReportedUnspecified:
		return b.Default.String() + " (reported)"
	}
	return b.Default.String()
}

// Builtins returns every builtin class, host classes first, in a fresh slice the caller may change. It is
// the one list of them: wasm/abi/ABI.md's table is generated from it, and the guest SDK's class names are
// checked against it.
func Builtins() []Builtin {
	const host, sdk, gw, store = GivenByHost, GivenBySDK, GivenByGateway, GivenByStore
	return []Builtin{
		{Name: ClassTimeout, Default: Recoverable, GivenBy: host,
			Meaning: "the attempt ran past its timeout and was cut off"},
		{Name: ClassTrap, Default: Recoverable, GivenBy: host,
			Meaning: "the guest crashed (a runtime fatal error, a bad pointer, `proc_exit`) or its result did not decode"},
		{Name: ClassMemoryExceeded, Default: Recoverable, GivenBy: host,
			Meaning: "the guest needed more linear memory than its module's `memory-limit`"},
		{Name: ClassCanceled, Uncounted: true, GivenBy: host,
			Meaning: "the host stopped the call before its deadline (shutdown, reset, removal), or the call ran past its deadline on the interpreter while its module compiled (`sandbox.tier-up`); the event is delivered again (in the second case on compiled code)"},
		{Name: ClassNoModule, Default: Systemic, Reported: ReportedSystemic, GivenBy: host,
			Meaning: "no deployed module serves the subscription; its events wait until one is deployed"},
		{Name: ClassConnectionRefused, Parent: ClassHostError, Default: Systemic, Reported: ReportedSystemic, GivenBy: sdk,
			Meaning: "an outbound or store connection was refused (the host gives it too, unreported, to a failure with no class of its own after a refused connection: systemic by a builtin rule)"},
		{Name: ClassPanic, Default: Recoverable, GivenBy: sdk,
			Meaning: "the handler panicked"},
		{Name: ClassHostError, Default: Recoverable, GivenBy: sdk,
			Meaning: "a host call failed for a reason of its own"},
		{Name: ClassOutboundDenied, Parent: ClassHostError, Default: Recoverable, GivenBy: sdk,
			Meaning: "an outbound request to a host not in the module's `allowed-hosts`"},
		{Name: ClassWaitTimeout, Parent: ClassHostError, Default: Backpressure, Reported: ReportedBackpressure, GivenBy: sdk,
			Meaning: "a host call's wait ran out, or the host's side was busy"},
		{Name: ClassUnsupported, Parent: ClassHostError, Default: Recoverable, GivenBy: sdk,
			Meaning: "a port this host does not offer to the processor"},
		{Name: ClassCommandGateway, Default: Recoverable, GivenBy: gw,
			Meaning: "the command gateway answered neither accepted, rejected nor busy, or did not answer in time (its 429 is reported as backpressure)"},
		{Name: ClassNoCommandGateway, Default: Recoverable, GivenBy: gw,
			Meaning: "a command to an aggregate type without a `[commands.<AggregateType>]` table"},
		{Name: ClassInvalidCommand, Default: Recoverable, GivenBy: gw,
			Meaning: "a command whose payload is not JSON"},
		{Name: ClassProjectionBusy, Default: Backpressure, Reported: ReportedBackpressure, GivenBy: store,
			Meaning: "retired: no longer given (a busy query store makes a call wait for its group commit); kept so that rules naming it still load"},
		{Name: ClassProjectionConflict, Default: Backpressure, Reported: ReportedBackpressure, GivenBy: store,
			Meaning: "keys the call read were changed by another aggregate's call on every run of the attempt"},
		{Name: ClassProjectionTooBig, Default: Recoverable, GivenBy: store,
			Meaning: "the call's writes are more than the store commits in one transaction"},
		{Name: ClassProjectionStore, Default: Systemic, Reported: ReportedSystemic, GivenBy: store,
			Meaning: "the query store failed"},
	}
}

// IsBuiltin reports whether name is one of the [Builtins].
func IsBuiltin(name string) bool {
	for _, b := range Builtins() {
		if b.Name == name {
			return true
		}
	}
	return false
}
