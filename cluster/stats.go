package cluster

import "sync/atomic"

// Stats counts what the cluster did since Open, for metrics.
type Stats struct {
	// Renewals counts confirmed writes of this host's membership key.
	Renewals uint64
	// RenewalFailures counts attempts that failed (network, server).
	RenewalFailures uint64
	// LeasesLost counts the times the key was found expired or replaced.
	LeasesLost uint64
	// GiveUps counts the times a term ended with partitions owned, which
	// were then stopped without a release.
	GiveUps uint64
	// Claims counts partitions claimed in the ledger.
	Claims uint64
	// ClaimConflicts counts claims that lost to another host's.
	ClaimConflicts uint64
	// Releases counts partitions released in the ledger.
	Releases uint64
	// Lost counts owned partitions found claimed by another host.
	Lost uint64
	// EngineErrors counts Engine.Own calls that returned an error.
	EngineErrors uint64
	// StaleReads counts renewals refused because the key read back at the
	// last confirmed revision: a node behind the majority answered.
	StaleReads uint64
	// Reconnects counts the NATS reconnects the lease forced after
	// renewals failed for a sixth of the TTL (a renewal's timeout).
	Reconnects uint64
	// HoldDowns counts the times the host stayed out of the deployment
	// after its lease terms ended too often within a minute (a flapping
	// link) while another host was a live member.
	HoldDowns uint64
}

// counters is the live form of Stats.
type counters struct {
	renewals, renewalFailures, leasesLost, giveUps  atomic.Uint64
	claims, claimConflicts, releases, lost          atomic.Uint64
	engineErrors, staleReads, reconnects, holdDowns atomic.Uint64
}

func (c *counters) snapshot() Stats {
	return Stats{
		Renewals: c.renewals.Load(), RenewalFailures: c.renewalFailures.Load(),
		LeasesLost: c.leasesLost.Load(), GiveUps: c.giveUps.Load(),
		Claims: c.claims.Load(), ClaimConflicts: c.claimConflicts.Load(),
		Releases: c.releases.Load(), Lost: c.lost.Load(), EngineErrors: c.engineErrors.Load(),
		StaleReads: c.staleReads.Load(), Reconnects: c.reconnects.Load(), HoldDowns: c.holdDowns.Load(),
	}
}
