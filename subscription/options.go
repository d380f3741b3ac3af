package subscription

import (
	"log/slog"
	"time"

	"github.com/berthhq/berth/internal/clock"
	"github.com/berthhq/berth/retry"
	"go.opentelemetry.io/otel/trace"
)

// Options configure an Engine. Zero values take the defaults named.
type Options struct {
	// Partitions is the number of partitions per subscription; an aggregate
	// belongs to partition FNV-1a(type, 0, id) mod Partitions. Default [DefaultPartitions].
	// Each partition keeps its own checkpoint. Changing it between starts
	// loses nothing: a subscription started with another count than its
	// checkpoints were written for starts every partition from the lowest of
	// them, so events after it are delivered again (startpoint.go). Every
	// host of one ledger must have the same count.
	Partitions int
	// Host is this host's id among several sharing one event log and one
	// ledger: the engine then delivers only the partitions it is told it
	// owns (Engine.Own, none before) and fences its writes for them. Empty:
	// a single host, which owns every partition and never fences.
	Host string
	// Concurrency is the number of aggregates a partition handles at once.
	// Default [DefaultConcurrency].
	Concurrency int
	// Retry is the host's default retry layer ([subscription.retry]) over
	// retry.Defaults().
	Retry retry.Settings
	// Parked is the host's long-horizon retry layer ([subscription.parked])
	// over retry.DefaultParked().
	Parked retry.ParkedSettings
	// Systemic is the window in which that many distinct aggregates of one
	// partition failing makes the failure systemic. Default
	// retry.DefaultSystemicWindow() (3 aggregates in 10 s).
	Systemic retry.SystemicWindow
	// Classifier is the application-wide classifier; nil: none.
	Classifier *retry.Classifier
	// CheckpointEvery and CheckpointInterval batch checkpoint writes: one
	// write per CheckpointEvery finished commits or per CheckpointInterval,
	// whichever comes first. Defaults [DefaultCheckpointEvery] and
	// [DefaultCheckpointInterval].
	CheckpointEvery    int
	CheckpointInterval time.Duration
	// ReadBatch is how many commits the reader asks the log for at once.
	// Default [DefaultReadBatch].
	ReadBatch int
	// MaxInFlight bounds the commits read but not finished per subscription;
	// the reader waits for room. Default [DefaultMaxInFlight].
	MaxInFlight int
	// Clock is the source of time for every wait of the failure model.
	// Default clock.Real().
	Clock clock.Clock
	// Logger receives the engine's log. Default: discarded.
	Logger *slog.Logger
	// Jitter returns a number in [0, 1) for backpressure jitter and that of
	// start retries. Default math/rand/v2.Float64.
	Jitter func() float64
	// StartTimeout bounds each try of a subscription's start (reading the
	// log's head and its checkpoints and parks). StartBackoff is the wait
	// after its first failed try, doubled after each failed try up to
	// StartBackoffMax (startretry.go). Defaults [DefaultStartTimeout],
	// [DefaultStartBackoff] and [DefaultStartBackoffMax].
	StartTimeout    time.Duration
	StartBackoff    time.Duration
	StartBackoffMax time.Duration
	// Observer is told of attempts, parks, long-horizon retries and
	// resolutions, for metrics (observe.go); nil: none.
	Observer Observer
	// Tracer makes a span per delivered event and per attempt (trace.go);
	// nil: none.
	Tracer trace.Tracer
}

// Defaults of Options; config's [subscription] defaults are these.
const (
	// DefaultPartitions is the default Options.Partitions: a number every
	// host of a deployment must agree on, so it has this one owner.
	DefaultPartitions = 16
	// DefaultConcurrency is the default Options.Concurrency.
	DefaultConcurrency = 4
	// DefaultCheckpointEvery and DefaultCheckpointInterval are the
	// defaults of Options.CheckpointEvery and CheckpointInterval.
	DefaultCheckpointEvery    = 100
	DefaultCheckpointInterval = 200 * time.Millisecond
	// DefaultReadBatch and DefaultMaxInFlight are the defaults of
	// Options.ReadBatch and MaxInFlight.
	DefaultReadBatch   = 256
	DefaultMaxInFlight = 8192
	// DefaultStartTimeout, DefaultStartBackoff and DefaultStartBackoffMax
	// are the defaults of Options.StartTimeout, StartBackoff and
	// StartBackoffMax.
	DefaultStartTimeout    = 30 * time.Second
	DefaultStartBackoff    = 500 * time.Millisecond
	DefaultStartBackoffMax = 30 * time.Second
)

func (o *Options) defaults() {
	if o.Partitions <= 0 {
		o.Partitions = DefaultPartitions
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Systemic.Aggregates <= 0 || o.Systemic.Window <= 0 {
		d := retry.DefaultSystemicWindow()
		if o.Systemic.Aggregates <= 0 {
			o.Systemic.Aggregates = d.Aggregates
		}
		if o.Systemic.Window <= 0 {
			o.Systemic.Window = d.Window
		}
	}
	if o.CheckpointEvery <= 0 {
		o.CheckpointEvery = DefaultCheckpointEvery
	}
	if o.CheckpointInterval <= 0 {
		o.CheckpointInterval = DefaultCheckpointInterval
	}
	if o.ReadBatch <= 0 {
		o.ReadBatch = DefaultReadBatch
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.Clock == nil {
		o.Clock = clock.Real()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Jitter == nil {
		o.Jitter = randFloat
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StartBackoff <= 0 {
		o.StartBackoff = DefaultStartBackoff
	}
	if o.StartBackoffMax <= 0 {
		o.StartBackoffMax = DefaultStartBackoffMax
	}
	o.StartBackoffMax = max(o.StartBackoffMax, o.StartBackoff)
}
