package ledger

import "fmt"

// SubscriptionState is where each subscription stands: the position it
// has handled up to, as a whole and per partition, and the small named
// values its engine keeps beside them (paused, partition count, retry
// budgets; the webhooks keep their cursors under a pseudo-subscription).
type SubscriptionState interface {
	// Checkpoint returns the subscription's checkpoint: every commit below
	// it was handled (or held for a parked aggregate). 0, false when none
	// is stored.
	Checkpoint(subscription string) (uint64, bool, error)
	// SetCheckpoint stores the subscription's checkpoint, replacing any.
	// The subscription must not be empty.
	SetCheckpoint(subscription string, position uint64) error
	// PartitionCheckpoint returns the checkpoint of one partition of the
	// subscription (partition from 0, never negative): every commit of
	// that partition below it was handled or held. Partitions move between
	// hosts, so each keeps its own; the subscription's Checkpoint is kept
	// beside them. 0, false when none is stored.
	PartitionCheckpoint(subscription string, partition int) (uint64, bool, error)
	// SetPartitionCheckpoint stores one partition's checkpoint, replacing
	// any. The subscription must not be empty nor the partition negative.
	SetPartitionCheckpoint(subscription string, partition int, position uint64) error

	// Meta returns a copy of the value stored for the subscription under
	// key, ErrNotFound if there is none.
	Meta(subscription, key string) ([]byte, error)
	// SetMeta stores value for the subscription under key, replacing any;
	// nil is stored as an empty value. Neither may be empty.
	SetMeta(subscription, key string, value []byte) error
	// DeleteMeta removes the subscription's value under key; removing what
	// is not there is no error. Neither may be empty.
	DeleteMeta(subscription, key string) error
}

// Checkpoint implements [SubscriptionState.Checkpoint].
func (t *kvTx) Checkpoint(subscription string) (uint64, bool, error) {
	if err := t.checkRead("Checkpoint"); err != nil {
		return 0, false, err
	}
	v, ok, err := t.getUint64(key(kindCheckpoint, subscription))
	if err != nil {
		return 0, false, fmt.Errorf("ledger: checkpoint of %q: %w", subscription, err)
	}
	return v, ok, nil
}

// SetCheckpoint implements [SubscriptionState.SetCheckpoint].
func (t *kvTx) SetCheckpoint(subscription string, position uint64) error {
	if err := t.checkWrite("SetCheckpoint"); err != nil {
		return err
	}
	if subscription == "" {
		return fmt.Errorf("%w: SetCheckpoint: subscription is empty", ErrInvalid)
	}
	return t.set("SetCheckpoint", key(kindCheckpoint, subscription), u64(position))
}

// PartitionCheckpoint implements [SubscriptionState.PartitionCheckpoint].
func (t *kvTx) PartitionCheckpoint(subscription string, partition int) (uint64, bool, error) {
	if err := t.checkRead("PartitionCheckpoint"); err != nil {
		return 0, false, err
	}
	if partition < 0 {
		return 0, false, fmt.Errorf("%w: PartitionCheckpoint: partition %d is negative", ErrInvalid, partition)
	}
	v, ok, err := t.getUint64(partitionKey(subscription, partition))
	if err != nil {
		return 0, false, fmt.Errorf("ledger: checkpoint of %q partition %d: %w", subscription, partition, err)
	}
	return v, ok, nil
}

// SetPartitionCheckpoint implements [SubscriptionState.SetPartitionCheckpoint].
func (t *kvTx) SetPartitionCheckpoint(subscription string, partition int, position uint64) error {
	if err := t.checkWrite("SetPartitionCheckpoint"); err != nil {
		return err
	}
	switch {
	case subscription == "":
		return fmt.Errorf("%w: SetPartitionCheckpoint: subscription is empty", ErrInvalid)
	case partition < 0:
		return fmt.Errorf("%w: SetPartitionCheckpoint: partition %d is negative", ErrInvalid, partition)
	}
	return t.set("SetPartitionCheckpoint", partitionKey(subscription, partition), u64(position))
}

// Meta implements [SubscriptionState.Meta].
func (t *kvTx) Meta(subscription, k string) ([]byte, error) {
	if err := t.checkRead("Meta"); err != nil {
		return nil, err
	}
	v, err := t.get(key(kindMeta, subscription, k))
	if err != nil {
		return nil, fmt.Errorf("ledger: meta %q of %q: %w", k, subscription, err)
	}
	return v, nil
}

// SetMeta implements [SubscriptionState.SetMeta].
func (t *kvTx) SetMeta(subscription, k string, value []byte) error {
	if err := t.checkWrite("SetMeta"); err != nil {
		return err
	}
	if subscription == "" || k == "" {
		return fmt.Errorf("%w: SetMeta: subscription or key is empty", ErrInvalid)
	}
	return t.set("SetMeta", key(kindMeta, subscription, k), append([]byte{}, value...))
}

// DeleteMeta implements [SubscriptionState.DeleteMeta].
func (t *kvTx) DeleteMeta(subscription, k string) error {
	if err := t.checkWrite("DeleteMeta"); err != nil {
		return err
	}
	if subscription == "" || k == "" {
		return fmt.Errorf("%w: DeleteMeta: subscription or key is empty", ErrInvalid)
	}
	return t.delete("DeleteMeta", key(kindMeta, subscription, k))
}
