package jetstream

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
)

// Layout is the version of what this package writes and reads: the
// stream's transaction messages, the cache's keys, the snapshots of
// compaction. Every host applies the stream alike only while each reads
// every message as the others do, so a host refuses a stream (and a
// cache) of a layout newer than its own rather than guess at it; an older
// cache is rebuilt from the stream. A change that old hosts could misread
// raises Layout.
const Layout = 1

// layoutMetadataKey is the stream's metadata entry that holds its layout.
// A stream without one was created before layouts were recorded, with
// layout 1's messages.
const layoutMetadataKey = "berth-ledger-layout"

// ErrLayout means the stream or the cache was written by a layout this host
// does not read (a newer Berth, most likely); nothing is changed.
var ErrLayout = errors.New("ledger/jetstream: unknown layout")

// streamLayout checks the stream's recorded layout: unknown (newer, or
// not a layout at all) is an error naming it.
func streamLayout(stream, v string) error {
	if n, err := strconv.Atoi(v); err != nil || n < 1 || n > Layout {
		return fmt.Errorf("%w: stream %s has layout %q, this host reads layouts 1 to %d (upgrade it)", ErrLayout, stream, v, Layout)
	}
	return nil
}

// createStream creates the stream, or updates its config, trying again
// while the cluster has too few peers for the replicas, until ctx ends. A
// stream of an unknown layout is refused and left as it is; one without a
// layout is given this one.
func createStream(ctx context.Context, js jetstream.JetStream, o Options) (jetstream.Stream, error) {
	cfg := jetstream.StreamConfig{
		Name:        o.Stream,
		Description: "Berth's failure ledger: one message per transaction",
		Subjects:    []string{o.Subject},
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		Retention:   jetstream.LimitsPolicy, // and no limits: only compaction removes a transaction
		Metadata:    map[string]string{layoutMetadataKey: strconv.Itoa(Layout)},
	}
	existing, err := request(ctx, func(ctx context.Context) (jetstream.Stream, error) { return js.Stream(ctx, o.Stream) })
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
	case err != nil:
		return nil, fmt.Errorf("ledger/jetstream: stream %s: %w", o.Stream, err)
	default:
		old := existing.CachedInfo().Config.Metadata
		if v, ok := old[layoutMetadataKey]; ok {
			if err := streamLayout(o.Stream, v); err != nil {
				return nil, err
			}
		}
		// Keep what others (the server, an operator) put in the metadata.
		meta := maps.Clone(old)
		if meta == nil {
			meta = map[string]string{}
		}
		maps.Copy(meta, cfg.Metadata)
		cfg.Metadata = meta
	}
	stream, err := request(ctx, func(ctx context.Context) (jetstream.Stream, error) {
		return js.CreateOrUpdateStream(ctx, cfg)
	})
	if err != nil {
		return nil, fmt.Errorf("ledger/jetstream: stream %s: %w", o.Stream, err)
	}
	return stream, nil
}

// checkCacheLayout says what to do with a cache whose recorded layout is v
// ("" : none, a cache from before layouts were recorded): nil to keep it,
// rebuild (non-nil) to build it again from the stream (older, or not a
// layout at all: it is only derived from the stream), or a refusal (a
// newer layout: this host might not even read the stream it came from).
func checkCacheLayout(dir, v string) (rebuild, refuse error) {
	n, err := strconv.Atoi(v)
	switch {
	case v == "":
		return errors.New("no recorded layout"), nil
	case err != nil:
		return fmt.Errorf("layout %q is no layout", v), nil
	case n > Layout:
		return nil, fmt.Errorf("%w: the cache %s has layout %d, this host reads layouts up to %d "+
			"(upgrade it, or remove the directory to rebuild the cache from the stream)", ErrLayout, dir, n, Layout)
	case n < Layout:
		return fmt.Errorf("layout %d, older than %d", n, Layout), nil
	}
	return nil, nil
}
