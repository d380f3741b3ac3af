package jetstream

import (
	"context"
	"fmt"

	"github.com/berthhq/berth/eventlog"
)

// decode decodes a stored commit, checking that it is of the aggregate
// asked for (aggregateType "" asks for any): a subject names long names by
// their hash (subject.go), and the commit itself has the last word.
func (l *Log) decode(m stored, aggregateType, aggregateID string) (eventlog.Commit, error) {
	c, err := eventlog.DecodeCommit(m.seq, m.data)
	if err != nil {
		return eventlog.Commit{}, err
	}
	if aggregateType != "" && (c.AggregateType != aggregateType || c.AggregateID != aggregateID) {
		return eventlog.Commit{}, fmt.Errorf("position %d on the subject of %s %q holds a commit of %s %q",
			m.seq, aggregateType, aggregateID, c.AggregateType, c.AggregateID)
	}
	return c, nil
}

// Read returns up to limit commits (eventlog.DefaultReadLimit when limit <=
// 0) with Position >= from, in position order, from batched direct gets.
// What a replica that is behind leaves out of a batch, up to the highest
// position this log knows of, is taken from the stream leader, so a Read
// sees every append this log made or saw (Head, Wait) before it.
func (l *Log) Read(ctx context.Context, from uint64, limit int) ([]eventlog.Commit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.leave()
	cs, err := l.collect(ctx, max(from, 1), eventlog.ReadLimit(limit), allSubjects(l.opts.Prefix), "", "", l.floor.Load())
	if err != nil {
		return nil, l.fail(ctx, "read", err)
	}
	if len(cs) > 0 {
		l.raise(cs[len(cs)-1].Position)
	}
	return cs, nil
}

// ReadAggregate returns up to limit commits (eventlog.DefaultReadLimit when
// limit <= 0) of one aggregate with Version >= fromVersion, in version
// order. The leader names the aggregate's last commit; a binary search over
// sequences finds where fromVersion starts, and batched direct gets read
// from there. An unknown aggregate has no commits (no error).
func (l *Log) ReadAggregate(ctx context.Context, aggregateType, aggregateID string, fromVersion uint64, limit int) ([]eventlog.Commit, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := l.enter(); err != nil {
		return nil, err
	}
	defer l.leave()
	cs, err := l.readAggregate(ctx, aggregateType, aggregateID, max(fromVersion, 1), eventlog.ReadLimit(limit))
	if err != nil {
		return nil, l.fail(ctx, "read aggregate", err)
	}
	return cs, nil
}

func (l *Log) readAggregate(ctx context.Context, aggregateType, aggregateID string, fromVersion uint64, limit int) ([]eventlog.Commit, error) {
	subj := subjectOf(l.opts.Prefix, aggregateType, aggregateID)
	lastSeq, lastVersion, err := l.lastCommit(ctx, subj, aggregateType, aggregateID, true)
	if err != nil || lastVersion < fromVersion {
		return nil, err
	}
	start, err := l.seek(ctx, subj, aggregateType, aggregateID, fromVersion, lastSeq, lastVersion)
	if err != nil {
		return nil, err
	}
	cs, err := l.collect(ctx, start, limit, subj, aggregateType, aggregateID, lastSeq)
	if err != nil {
		return nil, err
	}
	for i, c := range cs {
		if want := fromVersion + uint64(i); c.Version != want {
			return nil, fmt.Errorf("%s %q has version %d at position %d, want %d (the stream was changed behind the log)",
				aggregateType, aggregateID, c.Version, c.Position, want)
		}
	}
	return cs, nil
}

// seek returns the sequence of the aggregate's commit at version (at most
// lastVersion, the one at lastSeq). Versions grow with sequences, so a
// binary search over sequences finds it; each probe asks for the first
// commit of the aggregate at or after a sequence, and one below the version
// moves the search past that commit.
func (l *Log) seek(ctx context.Context, subj, aggregateType, aggregateID string, version, lastSeq, lastVersion uint64) (uint64, error) {
	if version <= 1 {
		return 1, nil
	}
	lo, hi := uint64(1), lastSeq // the commit at version is in [lo, hi]
	if version == lastVersion {
		return lastSeq, nil
	}
	for lo <= hi {
		mid := lo + (hi-lo)/2
		m, ok, err := l.next(ctx, subj, mid, true)
		if err != nil {
			return 0, err
		}
		if !ok {
			break
		}
		c, err := l.decode(m, aggregateType, aggregateID)
		if err != nil {
			return 0, err
		}
		switch {
		case c.Version == version:
			return m.seq, nil
		case c.Version < version:
			lo = m.seq + 1
		default:
			hi = mid - 1
		}
	}
	return 0, fmt.Errorf("%s %q has no commit at version %d below its last, %d (the stream was changed behind the log)",
		aggregateType, aggregateID, version, lastVersion)
}

// collect reads up to limit commits on subj from seq on. A batch that ends
// early while known (the highest sequence that must be there) is not yet
// reached came from a replica behind the leader, or ran out of the server's
// byte budget: the next commit is then taken from the leader and the
// batches go on.
func (l *Log) collect(ctx context.Context, seq uint64, limit int, subj, aggregateType, aggregateID string, known uint64) ([]eventlog.Commit, error) {
	var cs []eventlog.Commit
	add := func(m stored) error {
		c, err := l.decode(m, aggregateType, aggregateID)
		if err != nil {
			return err
		}
		c.Position = m.seq
		cs = append(cs, c)
		seq = m.seq + 1
		return nil
	}
	for len(cs) < limit {
		want := limit - len(cs)
		ms, err := l.batch(ctx, seq, subj, want)
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if err := add(m); err != nil {
				return nil, err
			}
		}
		if len(ms) == want || seq > known {
			break
		}
		m, ok, err := l.next(ctx, subj, seq, true)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if err := add(m); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// Version returns an aggregate's current version (0 if it has none), as the
// stream leader knows it.
func (l *Log) Version(ctx context.Context, aggregateType, aggregateID string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := l.enter(); err != nil {
		return 0, err
	}
	defer l.leave()
	subj := subjectOf(l.opts.Prefix, aggregateType, aggregateID)
	_, v, err := l.lastCommit(ctx, subj, aggregateType, aggregateID, true)
	if err != nil {
		return 0, l.fail(ctx, "version", err)
	}
	return v, nil
}
