package jetstream

// raise records that position pos exists, waking every Wait when that is
// news.
func (l *Log) raise(pos uint64) {
	for {
		cur := l.floor.Load()
		if pos <= cur {
			return
		}
		if l.floor.CompareAndSwap(cur, pos) {
			break
		}
	}
	l.waitMu.Lock()
	close(l.changed)
	l.changed = make(chan struct{})
	l.waitMu.Unlock()
}
