// Package syncbuf is a bytes.Buffer that several goroutines may write and
// read at once: the sink of a logger or a child process's output that a
// test reads while the code under test still writes.
package syncbuf

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer behind a mutex; its zero value is empty and
// ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// JSONLines returns the lines written by a slog JSON handler whose msg is
// msg, each decoded; lines that are not JSON objects are left out.
func (b *Buffer) JSONLines(msg string) []map[string]any {
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}
