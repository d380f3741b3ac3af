package affinity_test

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/affinity"
)

// TestOf: a key set is found through derived contexts; none, or a negative
// one, reads as -1.
func TestOf(t *testing.T) {
	ctx := context.Background()
	if got := affinity.Of(ctx); got != -1 {
		t.Errorf("no key: %d, want -1", got)
	}
	child, cancel := context.WithCancel(affinity.With(ctx, 3))
	defer cancel()
	if got := affinity.Of(child); got != 3 {
		t.Errorf("derived context: %d, want 3", got)
	}
	if got := affinity.Of(affinity.With(ctx, -2)); got != -1 {
		t.Errorf("negative key: %d, want -1", got)
	}
}
