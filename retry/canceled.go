package retry

import "slices"

// IsCanceled reports whether f names [ClassCanceled] in its chain: an attempt
// the host cut short, which the engine drops and delivers again without
// counting it.
func IsCanceled(f *Failure) bool { return f != nil && slices.Contains(f.Classes, ClassCanceled) }
