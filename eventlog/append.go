package eventlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// maxGroup bounds the commits that one Badger transaction (one write and,
// with SyncWrites, one fsync) takes from the queue of waiting appends. It
// holds two of the API's largest batches (1000 commits), so that a client
// streaming batches pays about one fsync a batch; a group too large for
// one transaction is split (write).
const maxGroup = 2048

// pendingAppend is one Append in the group-commit queue; write records its
// outcome in it.
type pendingAppend struct {
	ctx context.Context
	req *AppendRequest
	c   Commit
	err error
}

// errNotWritten is a pending append's outcome until its group is written.
var errNotWritten = errors.New("eventlog: append: not written (the append that wrote its group failed)")

// Append validates req, checks the aggregate's version and writes the commit
// at the next position. The returned commit is what Read will return: Time
// is req.Time (now when zero) in UTC, and empty payloads read as null. Its
// Events slice is new; the payloads share memory with req's. While the
// Options' Space guard refuses writes, Append fails with its
// *diskspace.Error (wrapped) and writes nothing.
//
// Appends that arrive while one is being written are written together, in
// the order they arrived, in one transaction: with SyncWrites they share
// one fsync (group commit), so many clients cost little more than one.
// Each is checked against the versions the ones before it in its group
// wrote, and fails or succeeds on its own. Once queued, an append is
// written or refused by its group: it is not abandoned when ctx ends,
// which is checked just before it is written.
func (b *Badger) Append(ctx context.Context, req AppendRequest) (Commit, error) {
	if err := ctx.Err(); err != nil {
		return Commit{}, err
	}
	c, err := NewCommit(req)
	if err != nil {
		return Commit{}, err
	}
	if err := b.enter(); err != nil {
		return Commit{}, err
	}
	defer b.life.RUnlock()
	p := &pendingAppend{ctx: ctx, req: &req, c: c, err: errNotWritten}
	b.appends.Do(p, b.write)
	if p.err != nil {
		return Commit{}, p.err
	}
	return p.c, nil
}

// AppendMany appends reqs as Append does, queued together in the
// group-commit queue: they are written in as few groups (transactions, and
// with SyncWrites fsyncs) as maxGroup allows, beside the appends of other
// callers, each checked and written or refused on its own.
func (b *Badger) AppendMany(ctx context.Context, reqs []AppendRequest) []AppendOutcome {
	out := make([]AppendOutcome, len(reqs))
	if err := ctx.Err(); err != nil {
		return failAll(out, err)
	}
	if err := b.enter(); err != nil {
		return failAll(out, err)
	}
	defer b.life.RUnlock()
	ps := make([]*pendingAppend, 0, len(reqs))
	idx := make([]int, 0, len(reqs)) // ps[i] is reqs[idx[i]]
	for i := range reqs {
		c, err := NewCommit(reqs[i])
		if err != nil {
			out[i].Err = err
			continue
		}
		ps = append(ps, &pendingAppend{ctx: ctx, req: &reqs[i], c: c, err: errNotWritten})
		idx = append(idx, i)
	}
	b.appends.DoAll(ps, b.write)
	for i, p := range ps {
		if p.err != nil {
			out[idx[i]].Err = p.err
		} else {
			out[idx[i]].Commit = p.c
		}
	}
	return out
}

// failAll sets err as the outcome of every request of out.
func failAll(out []AppendOutcome, err error) []AppendOutcome {
	for i := range out {
		out[i].Err = err
	}
	return out
}

// write writes group in as few transactions as Badger takes (one, unless
// they are too large together) and records each append's outcome.
func (b *Badger) write(group []*pendingAppend) {
	head := b.head.Load()
	txn := b.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	var written []*pendingAppend // set in txn, not yet committed
	var wrote int64
	commit := func() {
		err := txn.Commit()
		if err != nil {
			err = fmt.Errorf("eventlog: append: %w", err)
		}
		for _, p := range written {
			p.err = err
		}
		if err == nil && len(written) > 0 {
			b.space.Wrote(wrote)
			head = written[len(written)-1].c.Position
			b.head.Store(head)
			b.wake()
		} else {
			head = b.head.Load()
		}
		written, wrote = written[:0], 0
		txn.Discard()
		txn = b.db.NewTransaction(true)
	}
	for _, p := range group {
		if err := p.ctx.Err(); err != nil {
			p.err = err
			continue
		}
		if err := b.space.Check(); err != nil {
			p.err = fmt.Errorf("eventlog: append refused: %w", err)
			continue
		}
		n, dirty, err := b.set(txn, p, head+1)
		if dirty {
			// A Set refused after others for p: start again without p.
			txn = b.replay(txn, written)
		}
		if errors.Is(err, badger.ErrTxnTooBig) && len(written) > 0 {
			// Too large beside the others: write those, then p alone.
			commit()
			if n, dirty, err = b.set(txn, p, head+1); dirty {
				txn = b.replay(txn, written)
			}
		}
		switch {
		case errors.Is(err, badger.ErrTxnTooBig):
			p.err = fmt.Errorf("%w: commit of %d events is too large for one transaction (raise MemTableSize)", ErrInvalid, len(p.c.Events))
		case err != nil:
			p.err = err
		default:
			written = append(written, p)
			wrote += n
			head = p.c.Position
		}
	}
	if len(written) > 0 {
		commit()
	}
}

// set checks p's expected version against txn (which sees the group's
// writes before it) and sets p's commit at position pos, returning the
// bytes set. A version conflict or an invalid request sets nothing; dirty
// says that a Set failed after others for p had been made.
func (b *Badger) set(txn *badger.Txn, p *pendingAppend, pos uint64) (n int64, dirty bool, err error) {
	vkey := versionKey(p.req.AggregateType, p.req.AggregateID)
	current, err := readVersion(txn, vkey)
	if err != nil {
		return 0, false, fmt.Errorf("eventlog: append: %w", err)
	}
	if err := CheckVersion(p.req, current); err != nil {
		return 0, false, err
	}
	p.c.Version = current + 1
	p.c.Position = pos
	value := AppendCommit(make([]byte, 0, EncodedSize(&p.c)), &p.c)
	pkey, akey := positionKey(p.c.Position), aggregateKey(p.c.AggregateType, p.c.AggregateID, p.c.Version)
	for i, kv := range [][2][]byte{
		{pkey, value},
		{akey, binary.BigEndian.AppendUint64(nil, p.c.Position)},
		{vkey, binary.BigEndian.AppendUint64(nil, p.c.Version)},
	} {
		if err := txn.Set(kv[0], kv[1]); err != nil {
			return 0, i > 0, err
		}
	}
	return int64(len(pkey) + len(value) + len(akey) + len(vkey) + 16), false, nil
}

// replay discards txn and returns a new one holding the commits written,
// which fitted in it before.
func (b *Badger) replay(txn *badger.Txn, written []*pendingAppend) *badger.Txn {
	txn.Discard()
	txn = b.db.NewTransaction(true)
	for _, q := range written {
		if _, _, err := b.set(txn, q, q.c.Position); err != nil {
			// Unreachable: they fitted in the transaction before.
			panic(fmt.Sprintf("eventlog: commits that fitted no longer fit: %v", err))
		}
	}
	return txn
}

// readVersion returns the version stored under vkey, 0 if none.
func readVersion(txn *badger.Txn, vkey []byte) (uint64, error) {
	item, err := txn.Get(vkey)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var v uint64
	err = item.Value(func(b []byte) error {
		if len(b) != 8 {
			return fmt.Errorf("%w: version key holds %d bytes", errCorrupt, len(b))
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	return v, err
}
