package jetstream

import (
	"bytes"
	"sort"

	"github.com/berthhq/berth/ledger/internal/kvtx"
)

// recorder is the kvtx.Txn an Update's closure runs on: reads and writes go
// to a Badger transaction at the local snapshot (so the closure sees its own
// writes, and Badger's size limit applies), and recorder keeps what the
// transaction read (keys, and the key ranges its iterators walked) and what
// it wrote, which is what its message on the stream carries.
type recorder struct {
	inner kvtx.Txn
	// recent answers point reads of keys written lately, as of snapshot
	// (the inner transaction's), without Badger; nil: Badger answers all.
	recent   *recentWrites
	snapshot uint64
	reads    map[string]struct{}
	ranges   []keyRange
	writes   map[string]write
}

// keyRange is [start, end) in byte order; a nil end is no bound.
type keyRange struct{ start, end []byte }

// write is a set of value, or a delete when del.
type write struct {
	value []byte
	del   bool
}

var _ kvtx.Txn = (*recorder)(nil)

func newRecorder(inner kvtx.Txn, recent *recentWrites, snapshot uint64) *recorder {
	return &recorder{inner: inner, recent: recent, snapshot: snapshot, reads: map[string]struct{}{}, writes: map[string]write{}}
}

func (r *recorder) Get(key []byte) ([]byte, error) {
	r.reads[string(key)] = struct{}{}
	if _, own := r.writes[string(key)]; !own && r.recent != nil {
		if v, del, ok := r.recent.get(key, r.snapshot); ok {
			if del {
				return nil, kvtx.ErrNotFound
			}
			return v, nil
		}
	}
	return r.inner.Get(key)
}

func (r *recorder) Set(key, value []byte) error {
	if err := r.inner.Set(key, value); err != nil {
		return err
	}
	r.writes[string(key)] = write{value: value}
	return nil
}

func (r *recorder) Delete(key []byte) error {
	if err := r.inner.Delete(key); err != nil {
		return err
	}
	r.writes[string(key)] = write{del: true}
	return nil
}

func (r *recorder) Iterate(prefix []byte, values bool) kvtx.Iterator {
	return &recIter{inner: r.inner.Iterate(prefix, values), r: r, prefix: bytes.Clone(prefix)}
}

// readKeys returns the keys read, sorted (so that a message is the same
// for the same transaction).
func (r *recorder) readKeys() []string { return sortedKeys(r.reads) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// recIter records the range each walk from a Seek covered: from the key
// sought to the key it stopped at (inclusive), or to the end of the prefix
// when it ran off it. What the caller did not look at is in it too: a
// range too wide can only abort a transaction that need not have been, a
// range too narrow would let a conflict through.
type recIter struct {
	inner   kvtx.Iterator
	r       *recorder
	prefix  []byte
	start   []byte
	walking bool
}

func (i *recIter) Seek(key []byte) {
	i.flush()
	i.start = bytes.Clone(key)
	if bytes.Compare(i.start, i.prefix) < 0 {
		i.start = bytes.Clone(i.prefix)
	}
	i.walking = true
	i.inner.Seek(key)
}

func (i *recIter) Valid() bool            { return i.inner.Valid() }
func (i *recIter) Next()                  { i.inner.Next() }
func (i *recIter) Key() []byte            { return i.inner.Key() }
func (i *recIter) Value() ([]byte, error) { return i.inner.Value() }

func (i *recIter) Close() {
	i.flush()
	i.inner.Close()
}

// flush records the walk since the last Seek.
func (i *recIter) flush() {
	if !i.walking {
		return
	}
	i.walking = false
	end := kvtx.PrefixEnd(i.prefix)
	if i.inner.Valid() {
		end = append(bytes.Clone(i.inner.Key()), 0) // just past the key it is at
	}
	i.r.ranges = append(i.r.ranges, keyRange{start: i.start, end: end})
}
