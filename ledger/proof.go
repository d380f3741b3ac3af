package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// A proof is what a candidate module did with the capsules of a failure
// group when they were replayed against it (`berth parked replay --group
// … --module FIX.wasm`): which of the group's aggregates it handled. A
// job that resumes the group "proven" by that module resumes only those.
//
//	'f' lp(sub) lp(group) lp(sha256)                   -> Proof as JSON
//	'F' lp(sub) lp(group) lp(sha256) lp(type) lp(id)   -> "" (it handled that aggregate)
const (
	kindProof        = 'f'
	kindProofHandled = 'F'
)

// Proof is a candidate module's verdict on a failure group.
type Proof struct {
	Subscription string `json:"subscription"`
	Group        string `json:"group"`
	// Module is the candidate's module name, SHA256 the hex SHA-256 of its
	// bytes: a proof holds for exactly those bytes.
	Module string `json:"module"`
	SHA256 string `json:"sha256"`
	// Replayed, Handled, StillFailing and Departed count the capsules
	// replayed and what came of them: handled (the candidate succeeded),
	// still failing, or departed from the recording (it made host calls
	// the recording could not answer; not taken for handled).
	Replayed     int       `json:"replayed"`
	Handled      int       `json:"handled"`
	StillFailing int       `json:"stillFailing"`
	Departed     int       `json:"departed"`
	Actor        string    `json:"actor,omitempty"`
	Created      time.Time `json:"created"`
}

// ProofKey names one aggregate a proof's candidate handled.
type ProofKey struct {
	AggregateType string `json:"aggregateType"`
	AggregateID   string `json:"aggregateId"`
}

func proofKey(sub, group, sha string) []byte { return key(kindProof, sub, group, sha) }

func proofHandledKey(sub, group, sha, aggType, aggID string) []byte {
	return key(kindProofHandled, sub, group, sha, aggType, aggID)
}

// PutProof implements [ParkedRecords.PutProof].
func (t *kvTx) PutProof(p Proof, handled []ProofKey) error {
	const op = "PutProof"
	if err := t.checkWrite(op); err != nil {
		return err
	}
	switch {
	case p.Subscription == "" || p.Group == "" || p.SHA256 == "":
		return fmt.Errorf("%w: %s: subscription, group and sha256 are required", ErrInvalid, op)
	}
	for _, k := range handled {
		if k.AggregateType == "" || k.AggregateID == "" {
			return fmt.Errorf("%w: %s: a handled aggregate without type or id", ErrInvalid, op)
		}
	}
	v, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, op, err)
	}
	if err := t.set(op, proofKey(p.Subscription, p.Group, p.SHA256), v); err != nil {
		return err
	}
	for _, k := range handled {
		if err := t.set(op, proofHandledKey(p.Subscription, p.Group, p.SHA256, k.AggregateType, k.AggregateID), nil); err != nil {
			return err
		}
	}
	return nil
}

// Proof implements [ParkedRecords.Proof].
func (t *kvTx) Proof(subscription, group, sha256 string) (*Proof, error) {
	if err := t.checkRead("Proof"); err != nil {
		return nil, err
	}
	v, err := t.get(proofKey(subscription, group, sha256))
	if err != nil {
		return nil, fmt.Errorf("ledger: proof of %s on group %s: %w", sha256, group, err)
	}
	p := new(Proof)
	if err := json.Unmarshal(v, p); err != nil {
		return nil, fmt.Errorf("ledger: corrupt proof: %w", err)
	}
	return p, nil
}

// proven reports whether the proof of sha256 on group handled the
// aggregate.
func (t *kvTx) proven(sub, group, sha, aggType, aggID string) (bool, error) {
	_, err := t.get(proofHandledKey(sub, group, sha, aggType, aggID))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}
