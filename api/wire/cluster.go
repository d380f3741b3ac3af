package wire

import "time"

// Cluster is the answer of GET /v1/cluster: the hosts of the deployment and
// which of them owns each partition of each subscription, as the answering
// host sees them.
type Cluster struct {
	// Mode is ClusterModeCluster (store.backend "jetstream": the hosts on
	// one JetStream share the partitions) or ClusterModeSingle (this host
	// alone owns every partition).
	Mode string `json:"mode"`
	// Host is the answering host's id (in single mode, its machine's name).
	Host string `json:"host"`
	// LeaseTTL is cluster.lease-ttl, a Go duration ("15s"): a host whose
	// lease is older than it has left. Absent in single mode.
	LeaseTTL string `json:"leaseTTL,omitempty"`
	// Partitions is the number of partitions of every subscription.
	Partitions int `json:"partitions"`
	// Hosts are the live hosts by id (in single mode, this one).
	Hosts []ClusterHost `json:"hosts"`
	// Subscriptions are the subscriptions shared out, by name, with the
	// owner of each partition.
	Subscriptions []ClusterSubscription `json:"subscriptions"`
	// Unowned counts the partitions of every subscription that no live host
	// owns now (ClusterSubscription.Unowned, added up).
	Unowned int `json:"unowned"`
	// Stats are the answering host's cluster counters since it joined;
	// absent in single mode.
	Stats *ClusterStats `json:"stats,omitempty"`
}

// The words of Cluster.Mode.
const (
	// ClusterModeCluster: several hosts share the partitions.
	ClusterModeCluster = "cluster"
	// ClusterModeSingle: one host, which owns every partition.
	ClusterModeSingle = "single"
)

// ClusterHost is one live host of the deployment.
type ClusterHost struct {
	ID string `json:"id"` // cluster.host-id
	// Address is where its REST API is reached (cluster.address).
	Address string `json:"address,omitempty"`
	Version string `json:"version,omitempty"` // its build version
	// Joined is when it joined the deployment (started), by its clock.
	Joined time.Time `json:"joined,omitzero"`
	// LastRenewal is when the answering host last saw its lease renewed,
	// by the answering host's clock; LeaseAge is how long ago that was, a
	// Go duration ("3.2s"). A lease renews every third of the TTL. Both
	// absent in single mode, which has no lease.
	LastRenewal time.Time `json:"lastRenewal,omitzero"`
	LeaseAge    string    `json:"leaseAge,omitempty"`
	// Self marks the answering host.
	Self bool `json:"self"`
	// Owned counts the partitions it owns, over every subscription.
	Owned int `json:"owned"`
}

// ClusterSubscription is the ownership of one subscription's partitions.
type ClusterSubscription struct {
	Name string `json:"name"`
	// Partitions are every partition, by index.
	Partitions []PartitionOwner `json:"partitions"`
	// Unowned are the indexes of the partitions whose State is not
	// PartitionOwned: no live host works on them now. Never nil.
	Unowned []int `json:"unowned"`
}

// PartitionOwner is who owns one partition of a subscription.
type PartitionOwner struct {
	Index int `json:"index"`
	// State is PartitionOwned, PartitionReleased, PartitionOrphaned or
	// PartitionUnclaimed.
	State string `json:"state"`
	// Owner is the host of its last claim in the ledger (for a released
	// partition, the host that let it go); absent if never claimed.
	Owner string `json:"owner,omitempty"`
	// Epoch is its last claim's epoch; every claim raises it by one (0:
	// never claimed, and always on a single host).
	Epoch uint64 `json:"epoch"`
	// Assigned is the live host rendezvous hashing gives it to; it differs
	// from Owner while the partition moves.
	Assigned string `json:"assigned,omitempty"`
}

// The words of PartitionOwner.State.
const (
	// PartitionOwned: a live host holds its claim and works on it.
	PartitionOwned = "owned"
	// PartitionReleased: its owner let it go (it left, or the partition was
	// assigned elsewhere) and the next owner has not claimed it yet.
	PartitionReleased = "released"
	// PartitionOrphaned: its owner's lease is gone (the host died or lost
	// NATS) and no other host has claimed it yet.
	PartitionOrphaned = "orphaned"
	// PartitionUnclaimed: no host has ever claimed it.
	PartitionUnclaimed = "unclaimed"
)

// PartitionStates returns the words of PartitionOwner.State, in the order
// openapi.json lists them.
func PartitionStates() []string {
	return []string{PartitionOwned, PartitionReleased, PartitionOrphaned, PartitionUnclaimed}
}

// ClusterStats are a host's cluster counters since it joined.
type ClusterStats struct {
	Renewals        uint64 `json:"renewals"`        // confirmed lease renewals
	RenewalFailures uint64 `json:"renewalFailures"` // renewal attempts that failed
	LeasesLost      uint64 `json:"leasesLost"`      // times its lease was found expired
	GiveUps         uint64 `json:"giveUps"`         // lease terms that ended with partitions owned
	Claims          uint64 `json:"claims"`          // partitions claimed
	ClaimConflicts  uint64 `json:"claimConflicts"`  // claims another host's won
	Releases        uint64 `json:"releases"`        // partitions released
	Lost            uint64 `json:"lost"`            // owned partitions found claimed by another host
	EngineErrors    uint64 `json:"engineErrors"`    // partitions the engine could not start
}
