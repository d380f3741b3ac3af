package logstorm

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"github.com/berthhq/berth/internal/testing/syncbuf"
)

// TestStorm: 1,000 parks in a window log the burst and, when the window
// ends, one line counting the rest with the last one's attributes; other
// kinds keep their own burst; the next window logs again.
func TestStorm(t *testing.T) {
	var buf syncbuf.Buffer
	c := clock.NewFake(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), c, 3, 10*time.Second)
	for i := range 1000 {
		l.Log(slog.LevelInfo, "aggregate parked", "aggregate", i)
	}
	l.Log(slog.LevelWarn, "other", "n", 1)
	lines := func() []string { return strings.Split(strings.TrimSpace(buf.String()), "\n") }
	if got := lines(); len(got) != 4 || !strings.Contains(got[2], "aggregate=2") || !strings.Contains(got[3], "msg=other") {
		t.Fatalf("before the window ends: %q", got)
	}
	c.Advance(10 * time.Second)
	checkfor.Nil(t, 5*time.Second, 5*time.Millisecond, func() error {
		if got := lines(); len(got) != 5 || !strings.Contains(got[4], `"left out"=997`) || !strings.Contains(got[4], "aggregate=999") {
			return fmt.Errorf("no summary yet: %q", got)
		}
		return nil
	})
	l.Log(slog.LevelInfo, "aggregate parked", "aggregate", 1000)
	if got := lines(); len(got) != 6 || !strings.Contains(got[5], "aggregate=1000") {
		t.Fatalf("the next window: %q", got)
	}
}

// TestStopSummarizes: Stop logs what a window left out at once.
func TestStopSummarizes(t *testing.T) {
	var buf syncbuf.Buffer
	c := clock.NewFake(time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC))
	l := New(slog.New(slog.NewTextHandler(&buf, nil)), c, 1, time.Minute)
	l.Log(slog.LevelInfo, "x", "i", 0)
	l.Log(slog.LevelInfo, "x", "i", 1)
	l.Stop()
	if s := buf.String(); !strings.Contains(s, `"left out"=1`) {
		t.Fatalf("after Stop: %q", s)
	}
}
