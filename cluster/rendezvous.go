package cluster

import (
	"cmp"
	"encoding/binary"
	"hash/fnv"
	"slices"
)

// Assign returns the host of every partition 0 to partitions-1 of
// subscription (the index is the partition; nil if hosts is empty), by
// rendezvous (highest-random-weight) hashing with bounded loads.
//
// Every (partition, host) pair has a weight, a hash of the three names;
// going through the pairs from the heaviest, a partition goes to the pair's
// host unless it is taken or that host already holds ceil(partitions/hosts).
// Pure rendezvous (no bound) moves nothing but the partitions of a host that
// leaves or the ones a joining host wins, but splits 16 partitions among 3
// hosts as unevenly as 1/8/7 or 0/5/11 for some subscriptions; the bound
// keeps every host at or under ceil(partitions/hosts) (16 over 3: 4 to 6,
// over 4: exactly 4) at the cost of an occasional extra move when the set
// changes (on average under 1.5 of 16, see TestAssignMovement). Every host
// computing it over the same set gets the same answer without talking to the
// others; the order of hosts does not matter.
func Assign(subscription string, partitions int, hosts []string) []string {
	hosts = slices.Compact(slices.Sorted(slices.Values(hosts)))
	if len(hosts) == 0 || partitions <= 0 {
		return nil
	}
	type pair struct {
		partition int
		host      string
		weight    uint64
	}
	pairs := make([]pair, 0, partitions*len(hosts))
	for p := range partitions {
		for _, h := range hosts {
			pairs = append(pairs, pair{p, h, weight(h, subscription, p)})
		}
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		if c := cmp.Compare(b.weight, a.weight); c != 0 {
			return c
		}
		if c := cmp.Compare(b.host, a.host); c != 0 {
			return c
		}
		return cmp.Compare(a.partition, b.partition)
	})
	limit := (partitions + len(hosts) - 1) / len(hosts)
	load := make(map[string]int, len(hosts))
	out := make([]string, partitions)
	for _, x := range pairs {
		if out[x.partition] != "" || load[x.host] >= limit {
			continue
		}
		out[x.partition] = x.host
		load[x.host]++
	}
	return out
}

// weight hashes (host, subscription, partition) with FNV-1a and spreads the
// result with the MurmurHash3 finalizer: FNV alone leaves inputs that differ
// only in their last bytes (partition 3 and 4) too close for a fair split.
// It is part of the deployment's contract — hosts of different versions
// must agree — so it must never change (TestWeightGolden).
func weight(host, subscription string, partition int) uint64 {
	h := fnv.New64a()
	h.Write([]byte(host))
	h.Write([]byte{0})
	h.Write([]byte(subscription))
	h.Write([]byte{0})
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(partition)))
	x := h.Sum64()
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
