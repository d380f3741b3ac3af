package eventlog

// PartitionOf returns the partition of an aggregate among n (n > 0): FNV-1a
// (32 bit) over the type, a zero byte and the id, mod n. It is part of
// Berth's stored formats and of the agreement between hosts: the
// subscription engine partitions its work with it, and the JetStream log puts
// it into every commit's subject, so it must never change.
func PartitionOf(aggregateType, aggregateID string, n int) int {
	const offset, prime = 2166136261, 16777619
	h := uint32(offset)
	for i := 0; i < len(aggregateType); i++ {
		h ^= uint32(aggregateType[i])
		h *= prime
	}
	h ^= 0
	h *= prime
	for i := 0; i < len(aggregateID); i++ {
		h ^= uint32(aggregateID[i])
		h *= prime
	}
	return int(h % uint32(n))
}
