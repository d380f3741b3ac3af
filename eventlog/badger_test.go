package eventlog_test

import (
	"testing"

	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/eventlog/logtest"
)

// testOptions keep Badger small and silent in tests.
func testOptions() eventlog.Options {
	return eventlog.Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20}
}

func TestBadger(t *testing.T) {
	logtest.Run(t, func(t *testing.T, dir string) eventlog.Log {
		l, err := eventlog.Open(dir, testOptions())
		if err != nil {
			t.Fatalf("open %s: %v", dir, err)
		}
		return l
	})
}
