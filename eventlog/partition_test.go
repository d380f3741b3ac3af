package eventlog_test

import (
	"fmt"
	"testing"

	"github.com/berthhq/berth/eventlog"
)

func TestPartitionOfIsStable(t *testing.T) {
	// FNV-1a over "Order\x00o1" and friends: fixed forever, since hosts and
	// the JetStream log's subjects must agree on them across versions.
	tests := []struct {
		typ, id string
		n, want int
	}{
		{"Order", "o1", 16, 13},
		{"Order", "o1", 256, 173},
		{"", "", 1 << 30, 84696351}, // FNV-1a of a single zero byte, mod 2^30
		{"a", "", 256, 0x44},
	}
	for _, tc := range tests {
		got := eventlog.PartitionOf(tc.typ, tc.id, tc.n)
		if got != tc.want || got < 0 || got >= tc.n {
			t.Errorf("PartitionOf(%q, %q, %d) = %d, want %d", tc.typ, tc.id, tc.n, got, tc.want)
		}
	}
	seen := map[int]bool{}
	for i := range 200 {
		seen[eventlog.PartitionOf("Order", fmt.Sprint(i), 16)] = true
	}
	if len(seen) != 16 {
		t.Fatalf("200 aggregates hit %d of 16 partitions", len(seen))
	}
	// A partition among n is the partition among m mod n when n divides m:
	// a host with n partitions can select its commits by a stored shard.
	for i := range 1000 {
		id := fmt.Sprint(i)
		if eventlog.PartitionOf("Order", id, 256)%16 != eventlog.PartitionOf("Order", id, 16) {
			t.Fatalf("aggregate %s: partition among 256 mod 16 is not its partition among 16", id)
		}
	}
}
