package retry

import "slices"

// ClassCanceled is the builtin class of an attempt cut short by the host, not
// by the handler: the host shutting down, or an operator's action that stops
// a subscription's delivery (a reset, a module's removal). It is never
// counted against an aggregate's budget and never parks one: the engine
// drops such an attempt and delivers its event again. An attempt that ran
// past its own timeout is ClassTimeout, never ClassCanceled.
const ClassCanceled = "berth.Canceled"

// IsCanceled reports whether f names ClassCanceled in its chain.
func IsCanceled(f *Failure) bool { return f != nil && slices.Contains(f.Classes, ClassCanceled) }
