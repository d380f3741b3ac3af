package retry

import "slices"

// IsCanceled reports whether f names [ClassCanceled] in its chain: an attempt
// the host cut short, which the engine drops and delivers again without
// counting it.
func IsCanceled(f *Failure) bool { return f != nil && slices.Contains(f.Classes, ClassCanceled) }

// AwaitsHost returns, for an attempt the host cut short for a condition of its own ([Failure.Await]),
// the channel closed when the condition has ended; nil for any other failure.
func AwaitsHost(f *Failure) <-chan struct{} {
	if IsCanceled(f) {
		return f.Await
	}
	return nil
}
