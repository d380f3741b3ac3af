// Package cluster decides which Berth host of a deployment owns each
// (subscription, partition): membership by leases in a NATS JetStream KV
// bucket, assignment by rendezvous hashing over the live hosts, ownership by
// claims in the shared ledger, whose epochs fence a host that lost a
// partition (ledger.Tx.ClaimPartition and Tx.Fence). No NATS type leaves it.
//
// # Membership
//
// Every host keeps one key in the membership bucket (its id → address,
// version, start time), renewed every TTL/3 by compare-and-set on the key's
// revision. The bucket's TTL is the lease TTL, enforced by the server: a key
// not renewed within it expires, and the bucket's limit markers tell every
// watcher. Each host's watcher keeps the live set.
//
// # Why the old owner stops before a new one starts
//
// Let sent be the time, on host A's monotonic clock, at which A sent the
// renewal that the server last confirmed (if an ack was lost and a retry
// found the write, the first of those attempts). The server stored that
// write no earlier than sent, so it expires A's key no earlier than
// sent + TTL (by the server's clock, which runs at the rate of A's, give or
// take the drift Margin must absorb). A ends its term at sent + TTL - Margin
// by its own clock — unless a later confirmed renewal extended it. The
// engine knows that time (Engine.SetLease, told with every renewal of the
// term it works in) and starts no handler call from then on, for every
// partition at once and whatever else is blocked: a process woken from a
// pause sees the time passed on its monotonic clock before it calls. Then
// the Cluster has the engine stop every partition (Engine.Own without them,
// every subscription at once): the term's end cancels any ledger or NATS
// call in flight, since those may be what failed. A term begun after an
// ended one is told to the engine only once the old one's partitions were
// given up.
//
// Another host B claims one of A's partitions only after the server no
// longer has A's key — B sees the expiry marker and then asks the server
// directly, since its own watcher may lag — or after A released it. So B's
// claim comes after sent + TTL, and A stopped calling by sent + TTL - Margin;
// Margin covers the clocks' drift and a call that had just started. Renewals
// are Updates on the last confirmed revision: one succeeds only if the key
// did not expire since (an expiry writes a marker, a new revision), so a
// term is never extended across a gap in which another host could have
// claimed. An Update refused for its revision counts as confirmed only when
// a read shows this incarnation at a later revision: a node cut off from
// the majority answers reads with what it last had.
//
// Should the timing fail anyway (a clock that jumped, an engine slower than
// Margin), the ledger still stops the stale owner: B's claim raises the
// partition's epoch, and every write A makes for it carries A's epoch and
// fails with ledger.ErrFenced once B's claim committed.
//
// # Assignment and handover
//
// Assign gives every partition to one of the live hosts, the same answer on
// every host with the same view. A host claims a partition assigned to it
// in the ledger at the stored epoch + 1 (reading the owner in the same
// transaction) when it is free: never claimed, released, its own from an
// earlier term or run, or its owner's lease is gone. A partition assigned
// away from a live owner — a host joined, a view changed — is first stopped
// by that owner's engine, then released: the owner claims it for
// "released:<host>" at the next epoch, which both fences its own late writes
// and tells the next owner it may claim at once; a renewal right after tells
// the others to look. Close stops and releases everything, then deletes the
// key, so a graceful stop hands over at once; a kill hands over once the key
// expires, at most a TTL after the kill (its last renewal came before it)
// plus the server's expiry sweep and the claims.
//
// Hosts whose views differ for a moment may both try to claim a partition:
// the ledger lets one claim per epoch win, and once the views agree, a host
// holding a partition assigned elsewhere releases it.
//
// # Duties
//
// Some work must run on one host of the deployment at a time: the jobs
// runner and the webhook dispatcher. Cluster.Duty stands this host for such
// a duty, held by whichever host owns the key "duty.<name>" in the
// membership bucket, by the same lease as a membership. The
// members' watcher watches one-token keys only, so a duty's key is never
// taken for a host. Each term of a duty's lease starts with a claim in the
// ledger at the next epoch (ledger.Tx.ClaimDuty), and the duty's work
// fences every ledger write with it (ledger.DutyFence), as the engine
// fences a partition's: a host whose duty moved on cannot act for it.
package cluster
