package subscription

import (
	"errors"
	"strconv"

	"github.com/berthhq/berth/ledger"
)

// metaPartitions is the Meta key of the partition count the subscription's
// partition checkpoints were written for.
const metaPartitions = "partitions"

// partStart is where a run starts one partition it owns: its checkpoint,
// and the epoch it owns the partition at (0 on a single host).
type partStart struct {
	from  uint64
	epoch uint64
}

// startPoints is what a run starts from.
type startPoints struct {
	parts map[int]partStart // the partitions owned
	sub   uint64            // the subscription's checkpoint
	// repartitioned is the partition count the checkpoints were written for
	// when it differs from the run's (0 when it does not).
	repartitioned int
}

// loadStartPoints reads, in tx, where each partition of owned (partition →
// epoch) starts; head is the log's head, for a new subscription that starts
// at the end.
//
// A new subscription gets its checkpoint (the beginning, or head+1). A
// partition with no checkpoint of its own — every partition of a ledger
// written before partitions kept one — starts from the subscription's. The
// partition count the checkpoints were written for is kept in Meta: started
// with another count, an aggregate's partition changes, so no stored
// partition checkpoint says what was handled of it, and every partition
// starts from the lowest of the stored ones (events between are delivered
// again, none is lost); they are written so at once, with the new count.
func (s *subscription) loadStartPoints(tx ledger.SubscriptionState, head uint64, owned map[int]uint64) (startPoints, error) {
	sp := startPoints{parts: map[int]partStart{}}
	n := s.e.opts.Partitions
	cp, ok, err := tx.Checkpoint(s.name)
	if err != nil {
		return sp, err
	}
	if !ok {
		cp = 1
		if s.cur.Load().spec.Start == StartEnd {
			cp = head + 1
		}
		if err := tx.SetCheckpoint(s.name, cp); err != nil {
			return sp, err
		}
	}
	cp = max(cp, 1)
	stored, err := storedPartitions(tx, s.name)
	if err != nil {
		return sp, err
	}
	if stored != n {
		if stored != 0 {
			var low uint64
			for i := range stored {
				pc, err := partitionCheckpoint(tx, s.name, i, cp)
				if err != nil {
					return sp, err
				}
				if i == 0 || pc < low {
					low = pc
				}
			}
			low = max(low, 1)
			if err := setEveryCheckpoint(tx, s.name, n, low); err != nil {
				return sp, err
			}
			cp, sp.repartitioned = low, stored
		}
		if err := tx.SetMeta(s.name, metaPartitions, []byte(strconv.Itoa(n))); err != nil {
			return sp, err
		}
	}
	sp.sub = cp
	for i, epoch := range owned {
		pc, err := partitionCheckpoint(tx, s.name, i, cp)
		if err != nil {
			return sp, err
		}
		sp.parts[i] = partStart{from: max(pc, 1), epoch: epoch}
	}
	return sp, nil
}

// storedPartitions returns the partition count the subscription's
// checkpoints were written for; 0 when none is stored.
func storedPartitions(tx ledger.SubscriptionState, sub string) (int, error) {
	v, err := tx.Meta(sub, metaPartitions)
	if errors.Is(err, ledger.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 {
		return 0, nil // unreadable: as if none were stored, every partition from the subscription's
	}
	return n, nil
}

// partitionCheckpoint returns a partition's checkpoint, or fallback (the
// subscription's) when it has none of its own.
func partitionCheckpoint(tx ledger.SubscriptionState, sub string, partition int, fallback uint64) (uint64, error) {
	pc, ok, err := tx.PartitionCheckpoint(sub, partition)
	if err != nil || !ok {
		return fallback, err
	}
	return pc, nil
}

// setEveryCheckpoint sets the subscription's checkpoint and that of each of
// its n partitions to pos.
func setEveryCheckpoint(tx ledger.SubscriptionState, sub string, n int, pos uint64) error {
	for i := range n {
		if err := tx.SetPartitionCheckpoint(sub, i, pos); err != nil {
			return err
		}
	}
	return tx.SetCheckpoint(sub, pos)
}
