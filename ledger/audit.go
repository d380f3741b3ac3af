package ledger

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"
)

// AuditEntry is one state-changing call as the audit log keeps it: who did
// what to which target, when and why.
type AuditEntry struct {
	Seq    uint64    `json:"seq"` // assigned by Audit, increasing
	Time   time.Time `json:"time"`
	Actor  string    `json:"actor"`  // the token's name (or "anonymous")
	Action string    `json:"action"` // e.g. "POST /v1/subscriptions/{name}/pause"
	Target string    `json:"target"` // what it acted on, e.g. "ShipmentNotifier.onOrderShipped"
	Reason string    `json:"reason,omitempty"`
	Status int       `json:"status"`           // the HTTP status it answered
	Detail string    `json:"detail,omitempty"` // what came of it, e.g. "version 3", "job 7"
}

func auditKey(seq uint64) []byte { return binary.BigEndian.AppendUint64([]byte{kindAudit}, seq) }
func auditSeqKey() []byte        { return []byte("xaudit-seq") }

// Audit implements [Operations.Audit].
func (t *kvTx) Audit(e AuditEntry) error {
	const op = "Audit"
	if err := t.checkWrite(op); err != nil {
		return err
	}
	if e.Action == "" {
		return fmt.Errorf("%w: Audit: action is empty", ErrInvalid)
	}
	last, _, err := t.getUint64(auditSeqKey())
	if err != nil {
		return t.fail(op, err)
	}
	e.Seq = last + 1
	if e.Time.IsZero() {
		e.Time = time.Now().UTC()
	}
	v, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("%w: Audit: %v", ErrInvalid, err)
	}
	if err := t.set(op, auditKey(e.Seq), v); err != nil {
		return err
	}
	return t.set(op, auditSeqKey(), u64(e.Seq))
}

// AuditLog implements [Operations.AuditLog].
func (t *kvTx) AuditLog(after uint64, limit int) ([]AuditEntry, error) {
	if err := t.checkRead("AuditLog"); err != nil {
		return nil, err
	}
	limit = limitOr(limit)
	if after == ^uint64(0) {
		return nil, nil
	}
	var out []AuditEntry
	err := t.scan([]byte{kindAudit}, auditKey(after+1), func(k, v []byte) (bool, error) {
		var e AuditEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return false, fmt.Errorf("corrupt audit entry %q: %w", k, err)
		}
		out = append(out, e)
		return len(out) < limit, nil
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: AuditLog: %w", err)
	}
	return out, nil
}

// SweepAudit implements [Operations.SweepAudit].
func (t *kvTx) SweepAudit(before time.Time, limit int) (bool, error) {
	const op = "SweepAudit"
	if err := t.checkWrite(op); err != nil {
		return false, err
	}
	limit = limitOr(limit)
	var old [][]byte
	more := false
	err := t.scan([]byte{kindAudit}, nil, func(k, v []byte) (bool, error) {
		var e AuditEntry
		if err := json.Unmarshal(v, &e); err != nil {
			return false, fmt.Errorf("corrupt audit entry %q: %w", k, err)
		}
		if !e.Time.Before(before) {
			return false, nil
		}
		if len(old) == limit {
			more = true
			return false, nil
		}
		old = append(old, append([]byte(nil), k...))
		return true, nil
	})
	if err != nil {
		return false, t.fail(op, err)
	}
	for _, k := range old {
		if err := t.delete(op, k); err != nil {
			return false, err
		}
	}
	return more, nil
}
