package ledger

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"
)

// Outbox is the queue of Notifications about parked aggregates: written
// in the transaction that makes the change they tell of, so one exists if
// and only if its change committed, and read and acknowledged by whoever
// delivers them (package webhook).
type Outbox interface {
	// Notify queues n under the next Seq: the last one assigned plus one,
	// kept in the store so it keeps increasing across restarts and acks.
	// n.Seq is ignored; a zero n.Time is set to now; the Type must not be
	// empty.
	Notify(n Notification) error
	// Notifications returns up to limit (DefaultLimit when 0 or less)
	// queued notifications with Seq above after, in Seq order.
	Notifications(after uint64, limit int) ([]Notification, error)
	// AckNotifications removes the queued notifications with Seq at or
	// below through. Each one removed is a write of this transaction:
	// acking very many at once can fail with ErrTooBig, so ack in batches
	// of at most some ten thousand.
	AckNotifications(through uint64) error
}

// Notify implements [Outbox.Notify].
func (t *kvTx) Notify(n Notification) error {
	const op = "Notify"
	if err := t.checkWrite(op); err != nil {
		return err
	}
	if n.Type == "" {
		return fmt.Errorf("%w: Notify: type is empty", ErrInvalid)
	}
	last, _, err := t.getUint64(notifySeqKey())
	if err != nil {
		return t.fail(op, err)
	}
	n.Seq = last + 1
	if n.Time.IsZero() {
		n.Time = time.Now().UTC()
	}
	v, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("%w: Notify: %v", ErrInvalid, err)
	}
	if err := t.set(op, noticeKey(n.Seq), v); err != nil {
		return err
	}
	return t.set(op, notifySeqKey(), u64(n.Seq))
}

// Notifications implements [Outbox.Notifications].
func (t *kvTx) Notifications(after uint64, limit int) ([]Notification, error) {
	if err := t.checkRead("Notifications"); err != nil {
		return nil, err
	}
	limit = limitOr(limit)
	if after == ^uint64(0) {
		return nil, nil
	}
	var out []Notification
	it := t.txn.Iterate([]byte{kindNotice}, true)
	defer it.Close()
	for it.Seek(noticeKey(after + 1)); it.Valid() && len(out) < limit; it.Next() {
		var n Notification
		v, err := it.Value()
		if err == nil {
			err = json.Unmarshal(v, &n)
		}
		if err != nil {
			return nil, fmt.Errorf("ledger: Notifications: corrupt notification %q: %w", it.Key(), err)
		}
		out = append(out, n)
	}
	return out, nil
}

// AckNotifications implements [Outbox.AckNotifications].
func (t *kvTx) AckNotifications(through uint64) error {
	const op = "AckNotifications"
	if err := t.checkWrite(op); err != nil {
		return err
	}
	var keys [][]byte
	prefix := []byte{kindNotice}
	it := t.txn.Iterate(prefix, false)
	for it.Seek(prefix); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 9 || binary.BigEndian.Uint64(k[1:]) > through {
			break
		}
		keys = append(keys, append([]byte(nil), k...))
	}
	it.Close()
	for _, k := range keys {
		if err := t.delete(op, k); err != nil {
			return err
		}
	}
	return nil
}
