package ledger

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync/atomic"

	"github.com/berthhq/berth/ledger/internal/kvtx"
	lru "github.com/hashicorp/golang-lru/v2"
)

// readCache keeps, for the Badger store's Views, the counters the counts
// read (kindCount and kindTally keys, point reads) and the first key
// under a prefix (the oldest parked), ranges a window's count walks and
// counts of keys (resuming records in a window, of a class and type):
// read once from Badger, they are answered from memory until the next
// write. At 1,000,000 parked a point
// read goes through every level of the LSM tree (bloom filters, a block
// from the cache); at 10,000 it sat in the memtable.
//
// Why it is exact: the store is the only writer of its directory, and
// every write goes through Update, which runs the writer between two
// steps of epoch, counted in active meanwhile. A View that reads the same
// epoch before and after taking its Badger snapshot, and no write active,
// took it while no write ran (Badger's Commit returns once its commit is
// visible to new snapshots), so its snapshot holds exactly the commits of
// the writes before that epoch: an entry read by a View of the same epoch
// is what Badger would answer it. A View whose epoch moved, or that met a
// write running, reads Badger alone. Writes that overlap (a pipelined
// writer) each step the epoch and are counted, so this holds for them
// too. An entry of an older epoch is read again, so a write needs to know
// neither which keys it changed nor its commit timestamp (Badger v4's Txn
// does not tell it), and a failed commit changes nothing here. Update's own reads never go
// through it (they see their pending writes in Badger's transaction).
//
// The price: every write makes every entry stale, so under a steady park
// rate the counts read Badger as before (the cost of a miss is one map
// look-up more). The cache lives in memory only: a store opened again
// starts empty.
type readCache struct {
	epoch   atomic.Uint64
	active  atomic.Int64 // writes running
	entries *lru.Cache[string, cacheEntry]
	ranges  *lru.Cache[string, rangeEntry]
}

// readCacheSize bounds the entries: a count reads a few counters (one per
// state and dimension), a listing's plan a few more. 4,096 entries of
// ~60-byte keys are ~1 MB at most, whatever the number parked.
const readCacheSize = 4096

// rangeCacheSize and rangeCacheKeys bound the ranges kept (a window's
// count reads its whole buckets of one level and its ends at each finer
// one: a dozen ranges) and their keys: a range of more is not kept. At
// ~250 bytes a key and value, 64 × 256 of them are 4 MB at most.
const (
	rangeCacheSize = 64
	rangeCacheKeys = 256
)

// rangeEntry is the keys and values of a range Badger gave a View of
// epoch; tooBig: it had more than rangeCacheKeys.
type rangeEntry struct {
	epoch  uint64
	kvs    [][2][]byte
	tooBig bool
}

// cacheEntry is what Badger answered a View of epoch.
type cacheEntry struct {
	epoch uint64
	value []byte // nil: not found
}

func newReadCache() *readCache {
	c, err := lru.New[string, cacheEntry](readCacheSize)
	if err != nil {
		panic(err) // only for a size ≤ 0
	}
	r, err := lru.New[string, rangeEntry](rangeCacheSize)
	if err != nil {
		panic(err)
	}
	return &readCache{entries: c, ranges: r}
}

// writing marks a write running until the returned func is called.
func (c *readCache) writing() (done func()) {
	c.active.Add(1)
	c.epoch.Add(1)
	return func() {
		c.epoch.Add(1)
		c.active.Add(-1)
	}
}

// view returns txn, a View's transaction taken by take, read through the
// cache when no write ran while it was taken.
func (c *readCache) view(take func() kvtx.Txn) kvtx.Txn {
	e := c.epoch.Load()
	quiet := c.active.Load() == 0
	txn := take()
	if !quiet || c.active.Load() != 0 || c.epoch.Load() != e {
		return txn
	}
	return &cachedTxn{Txn: txn, c: c, epoch: e}
}

// cachedTxn is a View's transaction read through the cache.
type cachedTxn struct {
	kvtx.Txn
	c     *readCache
	epoch uint64
}

// cached reports whether a point read of k is kept: the counters.
func cached(k []byte) bool {
	return len(k) > 0 && (k[0] == kindCount || k[0] == kindTally)
}

// Get reads a counter from the cache, any other key from Badger.
func (t *cachedTxn) Get(k []byte) ([]byte, error) {
	if !cached(k) {
		return t.Txn.Get(k)
	}
	ck := "g" + string(k)
	if e, ok := t.c.entries.Get(ck); ok && e.epoch == t.epoch {
		if e.value == nil {
			return nil, kvtx.ErrNotFound
		}
		return e.value, nil
	}
	v, err := t.Txn.Get(k)
	switch {
	case err == nil:
		t.c.entries.Add(ck, cacheEntry{epoch: t.epoch, value: v})
	case errors.Is(err, kvtx.ErrNotFound):
		t.c.entries.Add(ck, cacheEntry{epoch: t.epoch})
	}
	return v, err
}

// firstKey returns a copy of the first key under prefix, from the cache.
func (t *cachedTxn) firstKey(prefix []byte) ([]byte, bool) {
	ck := "f" + string(prefix)
	if e, ok := t.c.entries.Get(ck); ok && e.epoch == t.epoch {
		return bytes.Clone(e.value), e.value != nil
	}
	k, ok := firstKeyOf(t.Txn, prefix)
	t.c.entries.Add(ck, cacheEntry{epoch: t.epoch, value: bytes.Clone(k)})
	return k, ok
}

// firstKeyer is a transaction that answers the first key under a prefix
// itself (cachedTxn).
type firstKeyer interface {
	firstKey(prefix []byte) ([]byte, bool)
}

// firstKeyOf returns a copy of the first key under prefix in txn.
func firstKeyOf(txn kvtx.Txn, prefix []byte) ([]byte, bool) {
	if f, ok := txn.(firstKeyer); ok {
		return f.firstKey(prefix)
	}
	it := txn.Iterate(prefix, false)
	defer it.Close()
	it.Seek(prefix)
	if !it.Valid() {
		return nil, false
	}
	return bytes.Clone(it.Key()), true
}

// rangeOf returns the keys and values under prefix in [start, end), from
// the cache; false when the range holds more than rangeCacheKeys (then
// the caller walks it itself).
func (t *cachedTxn) rangeOf(prefix, start, end []byte) ([][2][]byte, bool, error) {
	ck := string(appendLP(appendLP(appendLP(nil, string(prefix)), string(start)), string(end)))
	if e, ok := t.c.ranges.Get(ck); ok && e.epoch == t.epoch {
		return e.kvs, !e.tooBig, nil
	}
	e := rangeEntry{epoch: t.epoch}
	it := t.Txn.Iterate(prefix, false)
	defer it.Close()
	for it.Seek(start); it.Valid() && bytes.Compare(it.Key(), end) < 0; it.Next() {
		if len(e.kvs) == rangeCacheKeys {
			e.kvs, e.tooBig = nil, true
			break
		}
		v, err := it.Value()
		if err != nil {
			return nil, false, err
		}
		e.kvs = append(e.kvs, [2][]byte{bytes.Clone(it.Key()), v})
	}
	t.c.ranges.Add(ck, e)
	return e.kvs, !e.tooBig, nil
}

// rangeReader is a transaction that answers a bounded range itself
// (cachedTxn).
type rangeReader interface {
	rangeOf(prefix, start, end []byte) ([][2][]byte, bool, error)
}

// keysIn counts the keys under prefix in [start, end) (end nil: to the
// prefix's end), from the cache.
func (t *cachedTxn) keysIn(prefix, start, end []byte) int {
	ck := "n" + string(appendLP(appendLP(appendLP(nil, string(prefix)), string(start)), string(end)))
	if e, ok := t.c.entries.Get(ck); ok && e.epoch == t.epoch {
		return int(binary.BigEndian.Uint64(e.value))
	}
	n := countKeys(t.Txn, prefix, start, end)
	t.c.entries.Add(ck, cacheEntry{epoch: t.epoch, value: u64(uint64(n))})
	return n
}

// keyCounter is a transaction that counts keys itself (cachedTxn).
type keyCounter interface {
	keysIn(prefix, start, end []byte) int
}

// countKeys counts the keys under prefix in [start, end) in txn (end nil:
// to the prefix's end), from a View's cache when it keeps them.
func countKeys(txn kvtx.Txn, prefix, start, end []byte) int {
	if c, ok := txn.(keyCounter); ok {
		return c.keysIn(prefix, start, end)
	}
	n := 0
	it := txn.Iterate(prefix, false)
	defer it.Close()
	for it.Seek(start); it.Valid() && (end == nil || bytes.Compare(it.Key(), end) < 0); it.Next() {
		n++
	}
	return n
}
