package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Claims keeps who may write for what: the owner of each partition of a
// subscription and the holder of each duty (work one host of a deployment
// at a time does: the jobs, the webhooks), each at an epoch. Who should own
// or hold is decided outside the ledger (the cluster's leases); the claims
// make the writes of a host that lost one fail (ErrFenced), on a store
// shared by several hosts too: a claim that commits first makes every later
// commit fenced by the old epoch fail.
type Claims interface {
	// PartitionOwner returns the host that last claimed the partition and
	// the epoch of its claim ("", 0 when none has).
	PartitionOwner(subscription string, partition int) (host string, epoch uint64, err error)
	// ClaimPartition makes host the partition's owner at epoch, which must
	// be greater than the stored epoch (ErrFenced otherwise, failing the
	// transaction: someone claimed it since). A host that takes a partition
	// over claims it before it writes anything for it.
	ClaimPartition(subscription string, partition int, host string, epoch uint64) error
	// Fence fails the transaction with ErrFenced (and fails its commit,
	// even if the closure ignores the error) unless host at epoch is the
	// partition's owner. A host calls it in every transaction it writes
	// for a partition, so that one that lost the partition cannot write for
	// it.
	Fence(subscription string, partition int, host string, epoch uint64) error

	// DutyHolder returns the host that last claimed the duty and the epoch
	// of its claim ("", 0 when none has).
	DutyHolder(duty string) (host string, epoch uint64, err error)
	// ClaimDuty makes host the duty's holder at epoch, which must be
	// greater than the stored epoch (ErrFenced otherwise, failing the
	// transaction). A host that takes a duty over claims it before its work
	// writes anything (TakeDuty).
	ClaimDuty(duty, host string, epoch uint64) error
	// FenceDuty fails the transaction with ErrFenced (and fails its commit,
	// even if the closure ignores the error) unless host at epoch holds the
	// duty: the duty's work calls it (DutyFence.Check) in every transaction
	// it writes, so a host whose duty moved on cannot act for it.
	FenceDuty(duty, host string, epoch uint64) error
}

// PartitionOwner implements [Claims.PartitionOwner].
func (t *kvTx) PartitionOwner(subscription string, partition int) (string, uint64, error) {
	if err := t.checkRead("PartitionOwner"); err != nil {
		return "", 0, err
	}
	if partition < 0 {
		return "", 0, fmt.Errorf("%w: PartitionOwner: partition %d is negative", ErrInvalid, partition)
	}
	return t.owner(subscription, partition)
}

func (t *kvTx) owner(subscription string, partition int) (string, uint64, error) {
	v, err := t.get(ownerKey(subscription, partition))
	switch {
	case errors.Is(err, ErrNotFound):
		return "", 0, nil
	case err != nil:
		return "", 0, fmt.Errorf("ledger: owner of %q partition %d: %w", subscription, partition, err)
	case len(v) < 8:
		return "", 0, fmt.Errorf("ledger: corrupt owner of %q partition %d", subscription, partition)
	}
	return string(v[8:]), binary.BigEndian.Uint64(v), nil
}

// ClaimPartition implements [Claims.ClaimPartition].
func (t *kvTx) ClaimPartition(subscription string, partition int, host string, epoch uint64) error {
	if err := t.checkWrite("ClaimPartition"); err != nil {
		return err
	}
	switch {
	case subscription == "" || host == "":
		return fmt.Errorf("%w: ClaimPartition: subscription or host is empty", ErrInvalid)
	case partition < 0:
		return fmt.Errorf("%w: ClaimPartition: partition %d is negative", ErrInvalid, partition)
	}
	was, at, err := t.owner(subscription, partition)
	if err != nil {
		return t.fail("ClaimPartition", err)
	}
	if epoch <= at {
		return t.fail("ClaimPartition", fmt.Errorf("%w: %q partition %d is at epoch %d (%s), claim at %d",
			ErrFenced, subscription, partition, at, was, epoch))
	}
	v := binary.BigEndian.AppendUint64(nil, epoch)
	return t.set("ClaimPartition", ownerKey(subscription, partition), append(v, host...))
}

// Fence implements [Claims.Fence].
func (t *kvTx) Fence(subscription string, partition int, host string, epoch uint64) error {
	if err := t.checkRead("Fence"); err != nil {
		return err
	}
	if partition < 0 {
		return fmt.Errorf("%w: Fence: partition %d is negative", ErrInvalid, partition)
	}
	was, at, err := t.owner(subscription, partition)
	if err != nil {
		return t.fail("Fence", err)
	}
	if was != host || at != epoch {
		return t.fail("Fence", fmt.Errorf("%w: %q partition %d is owned by %q at epoch %d, not %q at %d",
			ErrFenced, subscription, partition, was, at, host, epoch))
	}
	return nil
}
