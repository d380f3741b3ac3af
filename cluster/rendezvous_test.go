package cluster

import (
	"fmt"
	"slices"
	"testing"
)

// TestWeightGolden pins the hash: hosts of different versions must agree on
// every assignment, so a change here would split a deployment mid-upgrade.
func TestWeightGolden(t *testing.T) {
	for _, c := range []struct {
		host, sub string
		part      int
		want      uint64
	}{
		{"h1", "orders", 0, 0xc13084ba495e846e},
		{"h2", "orders", 7, 0xaef1364d95d98aa9},
		{"host-a", "mailer", 15, 0xeb020ff9e04b5ac4},
	} {
		if got := weight(c.host, c.sub, c.part); got != c.want {
			t.Errorf("weight(%q, %q, %d) = %#x, want %#x", c.host, c.sub, c.part, got, c.want)
		}
	}
}

func TestAssignEdges(t *testing.T) {
	for _, c := range []struct {
		name       string
		partitions int
		hosts      []string
		want       []string
	}{
		{"no hosts", 4, nil, nil},
		{"no partitions", 0, []string{"a"}, nil},
		{"one host", 3, []string{"a"}, []string{"a", "a", "a"}},
		{"a host twice counts once", 2, []string{"a", "a"}, []string{"a", "a"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Assign("s", c.partitions, c.hosts); !slices.Equal(got, c.want) {
				t.Fatalf("Assign = %v, want %v", got, c.want)
			}
		})
	}
}

// TestAssignStable: the answer depends on the set of hosts, not on the
// order it is given in.
func TestAssignStable(t *testing.T) {
	want := Assign("orders", 16, []string{"h1", "h2", "h3"})
	for _, perm := range [][]string{{"h3", "h2", "h1"}, {"h2", "h3", "h1"}, {"h1", "h3", "h2"}} {
		if got := Assign("orders", 16, perm); !slices.Equal(got, want) {
			t.Fatalf("order %v: %v, want %v", perm, got, want)
		}
	}
}

func loads(assigned []string) map[string]int {
	n := make(map[string]int)
	for _, h := range assigned {
		n[h]++
	}
	return n
}

// TestAssignBalanced: every host gets at most ceil(partitions/hosts), so
// none gets fewer than partitions - (hosts-1)*ceil — for 3 hosts and 16
// partitions 4 to 6, for 4 hosts exactly 4 — for every subscription.
func TestAssignBalanced(t *testing.T) {
	for _, c := range []struct {
		hosts    []string
		min, max int
	}{
		{[]string{"h1", "h2", "h3"}, 4, 6},
		{[]string{"h1", "h2", "h3", "h4"}, 4, 4},
		{[]string{"berth-0", "berth-1", "berth-2"}, 4, 6},
		{[]string{"a", "b"}, 8, 8},
	} {
		for i := range 500 {
			sub := fmt.Sprintf("sub-%d", i)
			got := Assign(sub, 16, c.hosts)
			n := loads(got)
			for _, h := range c.hosts {
				if n[h] < c.min || n[h] > c.max {
					t.Fatalf("%s over %v: %s has %d partitions, want %d to %d (%v)", sub, c.hosts, h, n[h], c.min, c.max, got)
				}
			}
		}
	}
}

// TestAssignMovement: when a host leaves, all of its partitions move and few
// others do; when one joins, it takes its share and few others move among the
// rest. "Extra" moves are those not forced by the change; pure rendezvous has
// none, the load bound costs a few. The bounds are what 1000 subscriptions
// show, asserted so that a change to the hash or the bound that moved more
// partitions shows up here.
func TestAssignMovement(t *testing.T) {
	for _, c := range []struct {
		name     string
		before   []string
		after    []string
		maxExtra int     // in any one subscription
		avgExtra float64 // over all
	}{
		{"one of 3 leaves", []string{"h1", "h2", "h3"}, []string{"h1", "h2"}, 3, 0.5},
		{"a 3rd joins", []string{"h1", "h2"}, []string{"h1", "h2", "h3"}, 3, 0.5},
		{"one of 4 leaves", []string{"h1", "h2", "h3", "h4"}, []string{"h1", "h2", "h4"}, 4, 1.5},
		{"a 4th joins", []string{"h1", "h2", "h3"}, []string{"h1", "h2", "h3", "h4"}, 4, 1.5},
	} {
		t.Run(c.name, func(t *testing.T) {
			changed := symmetricDifference(c.before, c.after)
			total := 0
			for i := range 1000 {
				sub := fmt.Sprintf("sub-%d", i)
				a, b := Assign(sub, 16, c.before), Assign(sub, 16, c.after)
				extra := 0
				for p := range a {
					if a[p] != b[p] && !slices.Contains(changed, a[p]) && !slices.Contains(changed, b[p]) {
						extra++
					}
					if slices.Contains(changed, a[p]) && a[p] == b[p] {
						t.Fatalf("%s partition %d stays on %s, which left", sub, p, a[p])
					}
				}
				if extra > c.maxExtra {
					t.Fatalf("%s: %d partitions moved between hosts that stayed, want at most %d:\n%v\n%v", sub, extra, c.maxExtra, a, b)
				}
				total += extra
			}
			if avg := float64(total) / 1000; avg > c.avgExtra {
				t.Fatalf("%.2f extra moves per subscription, want at most %.2f", avg, c.avgExtra)
			}
		})
	}
}

func symmetricDifference(a, b []string) []string {
	var out []string
	for _, h := range a {
		if !slices.Contains(b, h) {
			out = append(out, h)
		}
	}
	for _, h := range b {
		if !slices.Contains(a, h) {
			out = append(out, h)
		}
	}
	return out
}
