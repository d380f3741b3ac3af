package jetstream

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/berthhq/berth/internal/jsapi"
	"github.com/dgraph-io/badger/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/berthhq/berth/internal/lpcodec"
)

// A snapshot is the ledger as of a compaction point M, one object named
// ledger-<M, 20 digits> in the object store <Stream>_SNAPSHOTS; the host
// that wrote it removes the older ones once it has purged the stream. (One
// name for all would let a slow host's older snapshot replace a newer one.)
// Its body is every ledger key with its value, in key order,
// each as lp(key) lp(value) (lp: uvarint length, then the bytes); its
// metadata says at which sequence, of which stream, by which Layout:
const (
	snapshotPrefix   = "ledger-"
	snapshotSeq      = "seq"
	snapshotStream   = "stream"
	snapshotLayout   = "layout"
	snapshotsSuffix  = "_SNAPSHOTS"
	snapshotReadSize = 1 << 20
)

// snapshotBucket is the object store of a stream's snapshots.
func snapshotBucket(stream string) string { return stream + snapshotsSuffix }

// snapshotName is the object name of the snapshot at seq; names sort as
// their sequences.
func snapshotName(seq uint64) string { return fmt.Sprintf("%s%020d", snapshotPrefix, seq) }

// snapshotsBefore lists the names of the snapshots in obs before seq
// (every one when seq is 0) in order.
func snapshotsBefore(ctx context.Context, obs jetstream.ObjectStore, seq uint64) ([]string, error) {
	infos, err := request(ctx, func(ctx context.Context) ([]*jetstream.ObjectInfo, error) { return obs.List(ctx) })
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, info := range infos {
		if strings.HasPrefix(info.Name, snapshotPrefix) && (seq == 0 || info.Name < snapshotName(seq)) {
			names = append(names, info.Name)
		}
	}
	sort.Strings(names)
	return names, nil
}

// snapshotStore returns the object store of the snapshots, creating it if
// it is missing, once its stream has a leader: the first snapshot's put
// to a store just made on an R3 cluster met "no responders" otherwise, and
// every compaction failed alike.
func (s *Store) snapshotStore(ctx context.Context) (jetstream.ObjectStore, error) {
	bucket := snapshotBucket(s.opts.Stream)
	obs, err := jsapi.Ensure(ctx, s.js, "OBJ_"+bucket, jsapi.RequestTimeout, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return s.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
			Bucket:      bucket,
			Description: "snapshots of Berth's failure ledger, at its stream's compaction points",
			Storage:     jetstream.FileStorage,
			Replicas:    s.opts.Replicas,
		})
	})
	if err != nil {
		return nil, fmt.Errorf("ledger/jetstream: the snapshots' object store: %w", err)
	}
	return obs, nil
}

// dropSnapshots removes the snapshots before seq: the stream was purged
// past them.
func (s *Store) dropSnapshots(ctx context.Context, obs jetstream.ObjectStore, seq uint64) error {
	names, err := snapshotsBefore(ctx, obs, seq)
	for _, name := range names {
		err = errors.Join(err, obs.Delete(ctx, name))
	}
	return err
}

// writeSnapshot puts the cache as of seq (a compaction point it has
// applied) in the object store obs.
func (s *Store) writeSnapshot(ctx context.Context, obs jetstream.ObjectStore, seq uint64) error {
	pr, pw := io.Pipe()
	encoded := make(chan struct{})
	go func() {
		defer close(encoded)
		pw.CloseWithError(s.encodeSnapshot(pw, seq))
	}()
	// The encoder reads the cache: it must be done before Close may close it.
	defer func() {
		pr.Close()
		<-encoded
	}()
	_, err := obs.Put(ctx, jetstream.ObjectMeta{
		Name: snapshotName(seq),
		Metadata: map[string]string{
			snapshotSeq:    strconv.FormatUint(seq, 10),
			snapshotStream: s.identity,
			snapshotLayout: strconv.Itoa(Layout),
		},
	}, pr)
	if err != nil {
		return fmt.Errorf("ledger/jetstream: writing the snapshot at %d: %w", seq, err)
	}
	return nil
}

// encodeSnapshot writes every ledger key of the cache as of seq to w.
func (s *Store) encodeSnapshot(w io.Writer, seq uint64) error {
	txn := s.db.NewTransactionAt(seq, false)
	defer txn.Discard()
	it := txn.NewIterator(badger.DefaultIteratorOptions)
	defer it.Close()
	bw := bufio.NewWriterSize(w, snapshotReadSize)
	var b []byte
	for it.Rewind(); it.Valid(); it.Next() {
		item := it.Item()
		if item.Key()[0] == 0 { // the cache's own bookkeeping
			continue
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		b = lpcodec.AppendLP(lpcodec.AppendLP(b[:0], item.Key()), v)
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// snapshotMeta is what a snapshot says of itself.
type snapshotMeta struct {
	seq      uint64
	identity string
}

// errNoSnapshot means the stream has no snapshot this host can restore.
var errNoSnapshot = errors.New("no snapshot")

// openSnapshot opens the stream's latest snapshot: errNoSnapshot when there
// is none (or one of another stream of the same name), ErrLayout when it
// is of a newer layout.
func openSnapshot(ctx context.Context, js jetstream.JetStream, o Options, identity string) (jetstream.ObjectResult, snapshotMeta, error) {
	var meta snapshotMeta
	obs, err := request(ctx, func(ctx context.Context) (jetstream.ObjectStore, error) {
		return js.ObjectStore(ctx, snapshotBucket(o.Stream))
	})
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, meta, errNoSnapshot
	}
	if err != nil {
		return nil, meta, err
	}
	names, err := snapshotsBefore(ctx, obs, 0)
	if err != nil {
		return nil, meta, err
	}
	if len(names) == 0 {
		return nil, meta, errNoSnapshot
	}
	// Asked again while NATS answers "no responders" and the like (a host
	// restoring while a node of an R3 cluster settles), under
	// the caller's own context, which the object's reader keeps using.
	r, err := jsapi.Retry(ctx, jsapi.Policy{Within: jsapi.UntilDone, Attempts: 8}, jsapi.Transient,
		func(ctx context.Context) (jetstream.ObjectResult, error) { return obs.Get(ctx, names[len(names)-1]) })
	if err != nil {
		return nil, meta, err
	}
	info, err := r.Info()
	if err != nil {
		r.Close()
		return nil, meta, err
	}
	md := info.Metadata
	if n, err := strconv.Atoi(md[snapshotLayout]); err != nil || n < 1 || n > Layout {
		r.Close()
		return nil, meta, fmt.Errorf("%w: the snapshot in %s has layout %q, this host reads layouts 1 to %d (upgrade it)",
			ErrLayout, snapshotBucket(o.Stream), md[snapshotLayout], Layout)
	}
	meta.identity = md[snapshotStream]
	meta.seq, err = strconv.ParseUint(md[snapshotSeq], 10, 64)
	if err != nil || meta.identity != identity {
		r.Close()
		return nil, meta, errNoSnapshot
	}
	return r, meta, nil
}

// maxSnapshotItem bounds a key or value a snapshot may hold: one
// transaction's message (at most NATS's largest max payload) holds it.
const maxSnapshotItem = 64 << 20

// readLP reads one lp; io.EOF only when r ends before it.
func readLP(r *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return nil, err
	}
	if n > maxSnapshotItem {
		return nil, fmt.Errorf("%w: an item of %d bytes", errMalformed, n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, errors.Join(errMalformed, err)
	}
	return b, nil
}
