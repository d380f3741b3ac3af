package ledger_test

import (
	"testing"

	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/ledger/ledgertest"
)

// testOptions keep Badger small and silent in tests.
func testOptions() ledger.Options {
	return ledger.Options{MemTableSize: 4 << 20, BlockCacheSize: 4 << 20}
}

func openTest(t *testing.T, dir string) *ledger.Badger {
	t.Helper()
	s, err := ledger.Open(dir, testOptions())
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return s
}

func TestBadger(t *testing.T) {
	ledgertest.Run(t, func(t *testing.T, dir string) ledger.Store { return openTest(t, dir) })
}
