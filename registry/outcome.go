package registry

import (
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/sandbox"
)

// FailureOf maps a sandbox outcome to the failure the engine classifies, as
// the registry's invokers do (nil for a success): a guest's own failure
// keeps its classes, kind and retry-after (raised to a Retry-After the
// sandbox saw, and classed berth.ConnectionRefused when the guest gave no
// class but met a refused connection); a timeout, trap, exceeded memory or
// cancellation gets the builtin class. Tools that run modules outside the
// engine (hostspec) use it to see an outcome as the host does.
func FailureOf(o *sandbox.Outcome) *retry.Failure { return failureOf(o) }
