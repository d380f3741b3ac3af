package ledger

import "fmt"

// Checkpoint returns the subscription's checkpoint and whether one is
// stored (0, false if not).
func (t *KVTx) Checkpoint(subscription string) (uint64, bool, error) {
	if err := t.checkRead("Checkpoint"); err != nil {
		return 0, false, err
	}
	v, ok, err := t.getUint64(key(kindCheckpoint, subscription))
	if err != nil {
		return 0, false, fmt.Errorf("ledger: checkpoint of %q: %w", subscription, err)
	}
	return v, ok, nil
}

// SetCheckpoint stores the subscription's checkpoint, replacing any.
func (t *KVTx) SetCheckpoint(subscription string, position uint64) error {
	if err := t.checkWrite("SetCheckpoint"); err != nil {
		return err
	}
	if subscription == "" {
		return fmt.Errorf("%w: SetCheckpoint: subscription is empty", ErrInvalid)
	}
	return t.set("SetCheckpoint", key(kindCheckpoint, subscription), u64(position))
}

// PartitionCheckpoint returns one partition's checkpoint and whether one is
// stored (0, false if not).
func (t *KVTx) PartitionCheckpoint(subscription string, partition int) (uint64, bool, error) {
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

// SetPartitionCheckpoint stores one partition's checkpoint, replacing any.
func (t *KVTx) SetPartitionCheckpoint(subscription string, partition int, position uint64) error {
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

// Meta returns a copy of the value stored for the subscription under key,
// ErrNotFound if there is none.
func (t *KVTx) Meta(subscription, k string) ([]byte, error) {
	if err := t.checkRead("Meta"); err != nil {
		return nil, err
	}
	v, err := t.get(key(kindMeta, subscription, k))
	if err != nil {
		return nil, fmt.Errorf("ledger: meta %q of %q: %w", k, subscription, err)
	}
	return v, nil
}

// SetMeta stores value for the subscription under key, replacing any; nil
// is stored as an empty value.
func (t *KVTx) SetMeta(subscription, k string, value []byte) error {
	if err := t.checkWrite("SetMeta"); err != nil {
		return err
	}
	if subscription == "" || k == "" {
		return fmt.Errorf("%w: SetMeta: subscription or key is empty", ErrInvalid)
	}
	return t.set("SetMeta", key(kindMeta, subscription, k), append([]byte{}, value...))
}

// DeleteMeta removes the subscription's value under key; a missing one is
// no error.
func (t *KVTx) DeleteMeta(subscription, k string) error {
	if err := t.checkWrite("DeleteMeta"); err != nil {
		return err
	}
	if subscription == "" || k == "" {
		return fmt.Errorf("%w: DeleteMeta: subscription or key is empty", ErrInvalid)
	}
	return t.delete("DeleteMeta", key(kindMeta, subscription, k))
}
