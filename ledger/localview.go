package ledger

import "context"

// LocalViewer is a Store each host keeps a copy of (ledger/jetstream), whose
// View first catches up with what the other hosts committed. LocalView
// reads this host's copy as it is, without that round trip: for a read the
// caller checks again inside an Update, where a stale answer costs only
// work done twice (a projection's applied mark, read before its guest is
// called and read again in the transaction that applies the call).
type LocalViewer interface {
	LocalView(ctx context.Context, fn func(Tx) error) error
}

// LocalView runs fn in s's LocalView when s has one, else in its View (a
// Store with one copy, as Badger, has nothing to catch up with).
func LocalView(ctx context.Context, s Store, fn func(Tx) error) error {
	if lv, ok := s.(LocalViewer); ok {
		return lv.LocalView(ctx, fn)
	}
	return s.View(ctx, fn)
}
