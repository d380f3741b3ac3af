package ledger

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// PartitionOwner returns the host and epoch of the partition's last claim
// ("", 0 if none).
func (t *KVTx) PartitionOwner(subscription string, partition int) (string, uint64, error) {
	if err := t.checkRead("PartitionOwner"); err != nil {
		return "", 0, err
	}
	if partition < 0 {
		return "", 0, fmt.Errorf("%w: PartitionOwner: partition %d is negative", ErrInvalid, partition)
	}
	return t.owner(subscription, partition)
}

func (t *KVTx) owner(subscription string, partition int) (string, uint64, error) {
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

// ClaimPartition stores host at epoch as the partition's owner, if epoch is
// greater than the stored one.
func (t *KVTx) ClaimPartition(subscription string, partition int, host string, epoch uint64) error {
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

// Fence fails the transaction unless host at epoch owns the partition.
func (t *KVTx) Fence(subscription string, partition int, host string, epoch uint64) error {
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
