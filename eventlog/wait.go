package eventlog

import "context"

// wake wakes every Wait after an append.
func (b *Badger) wake() {
	b.waitMu.Lock()
	close(b.changed)
	b.changed = make(chan struct{})
	b.waitMu.Unlock()
}

// Wait blocks until Head() > after, or ctx is done (returning ctx's error),
// or the log is closed (returning ErrClosed). It returns nil at once when the
// head is already past after.
func (b *Badger) Wait(ctx context.Context, after uint64) error {
	for {
		// Take the channel before reading the head, so an append between the
		// two closes the channel this Wait is about to block on.
		b.waitMu.Lock()
		changed := b.changed
		b.waitMu.Unlock()
		select {
		case <-b.done:
			return ErrClosed
		default:
		}
		if b.head.Load() > after {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-b.done:
			return ErrClosed
		}
	}
}
