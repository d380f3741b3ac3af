package jetstream

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/berthhq/berth/internal/jsapi"
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
// error naming every way an existing one does not fit. Each request is
// bounded by RequestTimeout and tried again while the cluster cannot answer
// it yet (jsapi.Retry), until ctx ends: a cluster still forming, or another
// host creating the same stream at the same moment, is waited for.
func (l *Log) ensureStream(ctx context.Context) (jetstream.Stream, error) {
	s, err := jsapi.Retry(ctx, jsapi.Opening(l.opts.RequestTimeout), jsapi.Transient, func(rctx context.Context) (jetstream.Stream, error) {
		s, err := l.js.Stream(rctx, l.opts.Stream)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			s, err = l.js.CreateStream(rctx, l.streamConfig())
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				// Another host created it meanwhile, with another config:
				// check what it made.
				s, err = l.js.Stream(rctx, l.opts.Stream)
			}
		}
		return s, err
	})
	if err != nil {
		return nil, l.fail(context.WithoutCancel(ctx), "open", err)
	}
	if diffs := l.incompatible(s.CachedInfo().Config); len(diffs) > 0 {
		return nil, fmt.Errorf("eventlog/jetstream: stream %s exists with an incompatible configuration: %s",
			l.opts.Stream, strings.Join(diffs, "; "))
	}
	if err := jsapi.AwaitLeader(ctx, l.js, l.opts.Stream, l.opts.RequestTimeout); err != nil {
		return nil, l.fail(context.WithoutCancel(ctx), "open: waiting for the stream's leader", err)
	}
	return s, nil
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
