package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// formatKey and formatValue mark a stream as a Berth event log in its
// metadata: the commit codec and the subject layout (Shards). Open refuses a
// stream of the same name without them, which holds something else.
const (
	formatKey   = "berth.eventlog"
	formatValue = "commit-codec=1 shards=256"
)

// streamConfig is the configuration Open creates the stream with: file
// storage, no limits (a limit would delete commits, leaving gaps in the
// positions), deletes, purges and rollups denied, direct gets allowed (reads
// are direct gets) and new messages refused rather than old ones dropped if
// someone adds a limit later.
func (l *Log) streamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        l.opts.Stream,
		Description: "Berth event log: one message per commit; the stream sequence is the commit's position",
		Subjects:    []string{allSubjects(l.opts.Prefix)},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardNew,
		MaxMsgs:     -1,
		MaxBytes:    -1,
		Storage:     jetstream.FileStorage,
		Replicas:    l.opts.Replicas,
		Duplicates:  l.opts.DuplicateWindow,
		DenyDelete:  true,
		DenyPurge:   true,
		AllowDirect: true,
		Metadata:    map[string]string{formatKey: formatValue},
	}
}

// ensureStream returns the stream, creating it when there is none, or an
// error naming every way an existing one does not fit.
func (l *Log) ensureStream(ctx context.Context) (jetstream.Stream, error) {
	rctx, cancel := l.openRequest(ctx)
	defer cancel()
	s, err := l.js.Stream(rctx, l.opts.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		s, err = l.create(rctx)
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			// Another host created it meanwhile, with another config: check
			// what it made.
			s, err = l.js.Stream(rctx, l.opts.Stream)
		}
	}
	if err != nil {
		return nil, l.fail(ctx, "open", err)
	}
	if diffs := l.incompatible(s.CachedInfo().Config); len(diffs) > 0 {
		return nil, fmt.Errorf("eventlog/jetstream: stream %s exists with an incompatible configuration: %s",
			l.opts.Stream, strings.Join(diffs, "; "))
	}
	if err := l.awaitLeader(rctx, s); err != nil {
		return nil, l.fail(ctx, "open: waiting for the stream's leader", err)
	}
	return s, nil
}

// awaitLeader returns once the replicated stream has elected a leader: a
// stream just created, or one whose leader's server is gone, answers no
// publish until then, and an Open that returned before would hand its
// caller "no responders" for its first appends.
func (l *Log) awaitLeader(ctx context.Context, s jetstream.Stream) error {
	if l.opts.Replicas == 1 {
		return nil
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		info, err := s.Info(ctx)
		if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
			}
			return err
		case <-tick.C:
		}
	}
}

// errCodeNoPlacement is JetStream's "no suitable peers for placement"
// (JSClusterNoPeersErrF), which nats.go has no name for.
const errCodeNoPlacement jetstream.ErrorCode = 10005

// create creates the stream. A cluster still forming may refuse to place
// it for a moment ("no suitable peers for placement, peer offline"): that
// is tried again while rctx lasts, and the last refusal returned.
func (l *Log) create(rctx context.Context) (jetstream.Stream, error) {
	for {
		s, err := l.js.CreateStream(rctx, l.streamConfig())
		if apiCode(err) != errCodeNoPlacement {
			return s, err
		}
		select {
		case <-rctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// incompatible lists how cfg differs from what the log needs.
func (l *Log) incompatible(cfg jetstream.StreamConfig) []string {
	var d []string
	if got := cfg.Metadata[formatKey]; got != formatValue {
		d = append(d, fmt.Sprintf("metadata %s is %q, want %q (not a Berth event log, or another format)", formatKey, got, formatValue))
	}
	if want := []string{allSubjects(l.opts.Prefix)}; !slices.Equal(cfg.Subjects, want) {
		d = append(d, fmt.Sprintf("subjects %q, want %q", cfg.Subjects, want))
	}
	if cfg.Replicas != l.opts.Replicas {
		d = append(d, fmt.Sprintf("replicas %d, want %d", cfg.Replicas, l.opts.Replicas))
	}
	if cfg.Retention != jetstream.LimitsPolicy {
		d = append(d, fmt.Sprintf("retention %s, want limits", cfg.Retention))
	}
	var limits []string
	for _, lim := range []struct {
		name string
		set  bool
		v    any
	}{
		{"max msgs", cfg.MaxMsgs > 0, cfg.MaxMsgs}, {"max bytes", cfg.MaxBytes > 0, cfg.MaxBytes},
		{"max age", cfg.MaxAge > 0, cfg.MaxAge}, {"max msgs per subject", cfg.MaxMsgsPerSubject > 0, cfg.MaxMsgsPerSubject},
	} {
		if lim.set {
			limits = append(limits, fmt.Sprintf("%s %v", lim.name, lim.v))
		}
	}
	if len(limits) > 0 {
		d = append(d, "limits ("+strings.Join(limits, ", ")+") would delete commits")
	}
	if !cfg.DenyDelete || !cfg.DenyPurge || cfg.AllowRollup {
		d = append(d, "deletes, purges or rollups are allowed (they would leave gaps in the positions)")
	}
	if !cfg.AllowDirect {
		d = append(d, "direct gets are not allowed")
	}
	if cfg.Mirror != nil || cfg.Sealed {
		d = append(d, "the stream is a mirror or sealed")
	}
	return d
}
