package sandbox

import (
	"fmt"
	"sync"
)

// boundedBuffer keeps the first max bytes written to it and counts the rest,
// so that a chatty or hostile guest cannot grow the host's memory.
type boundedBuffer struct {
	mu      sync.Mutex
	max     int
	buf     []byte
	dropped int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	n := len(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	room := b.max - len(b.buf)
	if room < len(p) {
		b.dropped += len(p) - max(room, 0)
		p = p[:max(room, 0)]
	}
	b.buf = append(b.buf, p...)
	return n, nil
}

// take returns what was written since the last take, with a note of what was
// dropped, and empties the buffer.
func (b *boundedBuffer) take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := string(b.buf)
	if b.dropped > 0 {
		s += fmt.Sprintf("\n… %d bytes dropped", b.dropped)
	}
	b.buf, b.dropped = b.buf[:0], 0
	return s
}
