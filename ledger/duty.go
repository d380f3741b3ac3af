package ledger

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
)

// A duty is work one host of a deployment at a time does (the jobs, the
// webhooks). Who holds it is decided outside the ledger (a lease); the
// ledger keeps the holder's claim, at an epoch, so that the writes of a
// host whose duty moved on are fenced as a partition's are: the new holder
// claims at the next epoch before it writes anything for the duty, and
// every write the work makes checks its own claim (DutyFence.Check).

// DutyFence is a duty's claim as its holder made it (Tx.ClaimDuty). The
// zero DutyFence holds always: work no other host shares (a single host)
// is not fenced.
type DutyFence struct {
	Duty  string
	Host  string
	Epoch uint64
}

// Check fails tx with ErrFenced unless f is still the duty's claim (see
// Tx.FenceDuty); the zero DutyFence passes.
func (f DutyFence) Check(tx Tx) error {
	if f.Duty == "" {
		return nil
	}
	return tx.FenceDuty(f.Duty, f.Host, f.Epoch)
}

// Fenced tells whether f fences anything (it is not the zero DutyFence).
func (f DutyFence) Fenced() bool { return f.Duty != "" }

func dutyKey(duty string) []byte { return key(kindDuty, duty) }

// DutyHolder implements [Claims.DutyHolder].
func (t *kvTx) DutyHolder(duty string) (string, uint64, error) {
	if err := t.checkRead("DutyHolder"); err != nil {
		return "", 0, err
	}
	return t.dutyHolder(duty)
}

func (t *kvTx) dutyHolder(duty string) (string, uint64, error) {
	v, err := t.get(dutyKey(duty))
	switch {
	case errors.Is(err, ErrNotFound):
		return "", 0, nil
	case err != nil:
		return "", 0, fmt.Errorf("ledger: holder of duty %q: %w", duty, err)
	case len(v) < 8:
		return "", 0, fmt.Errorf("ledger: corrupt holder of duty %q", duty)
	}
	return string(v[8:]), binary.BigEndian.Uint64(v), nil
}

// ClaimDuty implements [Claims.ClaimDuty].
func (t *kvTx) ClaimDuty(duty, host string, epoch uint64) error {
	if err := t.checkWrite("ClaimDuty"); err != nil {
		return err
	}
	if duty == "" || host == "" {
		return fmt.Errorf("%w: ClaimDuty: duty or host is empty", ErrInvalid)
	}
	was, at, err := t.dutyHolder(duty)
	if err != nil {
		return t.fail("ClaimDuty", err)
	}
	if epoch <= at {
		return t.fail("ClaimDuty", fmt.Errorf("%w: duty %q is at epoch %d (%s), claim at %d",
			ErrFenced, duty, at, was, epoch))
	}
	v := binary.BigEndian.AppendUint64(nil, epoch)
	return t.set("ClaimDuty", dutyKey(duty), append(v, host...))
}

// FenceDuty implements [Claims.FenceDuty].
func (t *kvTx) FenceDuty(duty, host string, epoch uint64) error {
	if err := t.checkRead("FenceDuty"); err != nil {
		return err
	}
	was, at, err := t.dutyHolder(duty)
	if err != nil {
		return t.fail("FenceDuty", err)
	}
	if was != host || at != epoch {
		return t.fail("FenceDuty", fmt.Errorf("%w: duty %q is held by %q at epoch %d, not %q at %d",
			ErrFenced, duty, was, at, host, epoch))
	}
	return nil
}

// TakeDuty claims duty for host in st at the epoch after the stored claim's,
// in one transaction, whoever held it: a host takes a duty once it holds
// its lease, which the previous holder's has ended. It returns the claim,
// for the work to check, and the host that held it before ("" if none).
func TakeDuty(ctx context.Context, st Store, duty, host string) (DutyFence, string, error) {
	var f DutyFence
	var was string
	err := st.Update(ctx, func(tx Tx) error {
		h, e, err := tx.DutyHolder(duty)
		if err != nil {
			return err
		}
		was, f = h, DutyFence{Duty: duty, Host: host, Epoch: e + 1}
		return tx.ClaimDuty(f.Duty, f.Host, f.Epoch)
	})
	if err != nil {
		return DutyFence{}, "", err
	}
	return f, was, nil
}
