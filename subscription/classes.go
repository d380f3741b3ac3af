package subscription

import (
	"slices"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/retry"
)

// classifiedChain is the class chain the ledger keeps for a failure: the
// one it was classified by (the module's declared ancestors of its nearest
// declared class, see retry.ClassTree.Resolve), else the chain as sent.
func classifiedChain(f *retry.Failure, d retry.Decision) []string {
	if d.Chain != nil {
		return slices.Clone(d.Chain)
	}
	return slices.Clone(f.Classes)
}

// parkedUnrecoverable reports whether a record was parked for an
// unrecoverable failure (records written before ErrorInfo.Class was kept
// say so by their kind).
func parkedUnrecoverable(rec *ledger.Record) bool {
	if rec.Error.Class != "" {
		return rec.Error.Class == retry.Unrecoverable.String()
	}
	return rec.Error.Kind == retry.Unrecoverable.String()
}
