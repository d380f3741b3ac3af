// Package affinity owns the hint a caller gives the sandbox about which of
// its calls follow one another: calls made under contexts of one key mostly
// run one after another on one goroutine (an engine partition's), so the
// sandbox keeps the instance the last of them used where only they look,
// and two cores calling one module under different keys share no memory
// that either writes on the way in or out.
package affinity

import "context"

type key struct{}

// With returns ctx carrying the affinity key k (k >= 0). Derive it once for
// a long-lived context (it allocates), not per call.
func With(ctx context.Context, k int) context.Context {
	return context.WithValue(ctx, key{}, k)
}

// Of returns ctx's affinity key; -1 when it has none.
func Of(ctx context.Context) int {
	if k, ok := ctx.Value(key{}).(int); ok && k >= 0 {
		return k
	}
	return -1
}
