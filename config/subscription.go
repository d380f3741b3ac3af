package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/subscription"
)

// Defaults of [subscription] and [subscription.systemic]: the subscription package's, which owns them
// (the retry and parked defaults are the retry package's: retry.Defaults, retry.DefaultParked).
const (
	DefaultPartitions         = subscription.DefaultPartitions
	DefaultConcurrency        = subscription.DefaultConcurrency
	DefaultCheckpointEvery    = subscription.DefaultCheckpointEvery
	DefaultCheckpointInterval = retry.Duration(subscription.DefaultCheckpointInterval)
	MaxPartitions             = 4096
	MaxConcurrency            = 1024
	// DefaultProjectionWriters is the default of subscription.projection-writers: the deliveries one
	// subscription runs at once by default (partitions x concurrency), so that a group takes them all.
	DefaultProjectionWriters = registry.DefaultProjectionWriters
	// MaxProjectionWriters bounds subscription.projection-writers.
	MaxProjectionWriters = 1024
)

// SubscriptionConfig is [subscription]: how every subscription runs, and the host-wide failure settings.
type SubscriptionConfig struct {
	// Partitions is the number of partitions an event log is split into by aggregate (default 16); each
	// runs in order on its own. Changing it needs a restart.
	Partitions int `toml:"partitions"`
	// Concurrency is the number of aggregates a partition handles at once (default 4); backpressure
	// lowers it for a while.
	Concurrency int `toml:"concurrency"`
	// CheckpointEvery writes a checkpoint after this many handled events (default 100).
	CheckpointEvery int `toml:"checkpoint-every"`
	// CheckpointInterval writes a checkpoint at least this often while events are handled (default 200ms).
	CheckpointInterval retry.Duration `toml:"checkpoint-interval"`
	// ProjectionWriters is how many projection calls of the whole host one transaction of the query
	// store applies together (group commit, default 64: partitions x concurrency); more wait for the next
	// transaction. A call never fails, nor runs again, because the store is busy.
	ProjectionWriters int `toml:"projection-writers"`
	// Retry is [subscription.retry], the host's retry budget, below every processor's and handler's own
	// (defaults: those of retry.Defaults).
	Retry retry.Config `toml:"retry"`
	// Parked is [subscription.parked], the long-horizon retries of a parked aggregate (defaults: those of
	// retry.DefaultParked).
	Parked retry.ParkedConfig `toml:"parked"`
	// Systemic is [subscription.systemic], when failures of a partition are taken for an outage.
	Systemic SystemicConfig `toml:"systemic"`
}

// SystemicConfig is [subscription.systemic], the TOML form of retry.SystemicWindow.
type SystemicConfig struct {
	// Aggregates is the number of distinct failing aggregates that make an outage (default 3, at least 2).
	Aggregates int `toml:"aggregates"`
	// Window is how recent their failures must be (default 10s).
	Window retry.Duration `toml:"window"`
}

// SubscriptionOverride is [subscriptions."<Processor.handler>"]: the host's per-subscription override of
// the retry and parked settings, over what the module declares. A key left out (zero) is inherited.
type SubscriptionOverride struct {
	// Retry overrides the retry budget setting by setting (default: nothing overridden). An empty list
	// (unrecoverable = []) clears the inherited one.
	Retry retry.Config `toml:"retry"`
	// Parked overrides the long-horizon retries setting by setting (default: nothing overridden).
	Parked retry.ParkedConfig `toml:"parked"`
}

// RetryLayers returns the two retry layers the host owns for a subscription: defaults, the host-wide
// [subscription.retry], and override, the subscription's [subscriptions."<name>".retry] (zero when it
// has none). The engine resolves them around the module's own layers:
//
//	retry.Resolve(
//		retry.Layer{Source: retry.SourceDefault, Settings: defaults},
//		retry.Layer{Source: retry.SourceProcessor, Settings: processorDeclared},
//		retry.Layer{Source: retry.SourceHandler, Settings: handlerDeclared},
//		retry.Layer{Source: retry.SourceOverride, Settings: override},
//	)
//
// The lists are copies.
func (c *Config) RetryLayers(subscription string) (defaults, override retry.Settings) {
	defaults = cloneSettings(c.Subscription.Retry.Settings())
	if o, ok := c.Subscriptions[subscription]; ok {
		override = cloneSettings(o.Retry.Settings())
	}
	return defaults, override
}

func cloneSettings(s retry.Settings) retry.Settings {
	s.Unrecoverable = slices.Clone(s.Unrecoverable)
	s.Recoverable = slices.Clone(s.Recoverable)
	return s
}

// Parked returns the effective long-horizon settings of a subscription: [subscription.parked] with the
// subscription's [subscriptions."<name>".parked] over it.
func (c *Config) Parked(subscription string) retry.ParkedSettings {
	o := c.Subscriptions[subscription]
	return retry.ResolveParked(c.Subscription.Parked.Parked(), o.Parked.Parked())
}

// Systemic returns [subscription.systemic] as a retry.SystemicWindow.
func (c *Config) Systemic() retry.SystemicWindow {
	return retry.SystemicWindow{
		Aggregates: c.Subscription.Systemic.Aggregates,
		Window:     c.Subscription.Systemic.Window.Std(),
	}
}

// Classifier returns the [[classifier.rules]] as a retry.Classifier. A validated Config never fails.
func (c *Config) Classifier() (*retry.Classifier, error) {
	return retry.NewClassifier(c.ClassifierConfig.Rules)
}

func (s SubscriptionConfig) validate(p *problems, at keyPath) {
	positiveInt(p, at.key("partitions"), s.Partitions, MaxPartitions)
	positiveInt(p, at.key("concurrency"), s.Concurrency, MaxConcurrency)
	positiveInt(p, at.key("checkpoint-every"), s.CheckpointEvery, 1<<30)
	positiveDuration(p, at.key("checkpoint-interval"), s.CheckpointInterval)
	positiveInt(p, at.key("projection-writers"), s.ProjectionWriters, MaxProjectionWriters)

	// The host-wide layers are the base: every setting must be there (0 would silently mean a default).
	r := at.key("retry")
	rs := s.Retry.Settings()
	if rs.MaxAttempts == 0 {
		p.add(r.key(retry.KeyMaxAttempts), "0", "must be at least 1")
	}
	if rs.BackpressureAttempts == 0 {
		p.add(r.key(retry.KeyBackpressureAttempts), "0", "must be at least 1")
	}
	positiveDuration(p, r.key(retry.KeyInitialBackoff), s.Retry.InitialBackoff)
	positiveDuration(p, r.key(retry.KeyMaxBackoff), s.Retry.MaxBackoff)
	positiveDuration(p, r.key(retry.KeyTimeout), s.Retry.Timeout)
	settingErrs(p, r, rs.Validate())

	pk := at.key("parked")
	if s.Parked.MaxRetries == 0 {
		p.add(pk.key(retry.KeyParkedMaxRetries), "0", "must be at least 1, or -1 for none")
	}
	positiveDuration(p, pk.key(retry.KeyParkedFirstDelay), s.Parked.FirstDelay)
	positiveDuration(p, pk.key(retry.KeyParkedMaxDelay), s.Parked.MaxDelay)
	positiveDuration(p, pk.key(retry.KeyParkedTimeout), s.Parked.Timeout)
	settingErrs(p, pk, s.Parked.Parked().Validate())

	sy := at.key("systemic")
	if s.Systemic.Aggregates == 0 {
		p.add(sy.key(retry.KeySystemicAggregates), "0", "must be at least 2")
	}
	positiveDuration(p, sy.key(retry.KeySystemicWindow), s.Systemic.Window)
	settingErrs(p, sy, retry.SystemicWindow{Aggregates: s.Systemic.Aggregates, Window: s.Systemic.Window.Std()}.Validate())
}

func (o SubscriptionOverride) validate(p *problems, at keyPath) {
	name := at[len(at)-1].name
	if strings.TrimSpace(name) == "" || strings.TrimSpace(name) != name {
		p.add(at, "", "a subscription name must not be empty or start or end with a space")
	}
	settingErrs(p, at.key("retry"), o.Retry.Settings().Validate())
	settingErrs(p, at.key("parked"), o.Parked.Parked().Validate())
}

// settingErrs turns the retry package's errors (each a *retry.SettingError naming the key within its
// table) into problems under at, skipping keys already reported.
func settingErrs(p *problems, at keyPath, err error) {
	if err == nil {
		return
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var se *retry.SettingError
		if !errors.As(e, &se) {
			p.add(at, "", "%v", e)
			continue
		}
		k := at.String() + "." + se.Setting // Setting may carry an index: "unrecoverable[2]"
		if p.hasKeyOrChild(k) {
			continue
		}
		*p = append(*p, &Error{Key: k, Value: se.Value, Problem: se.Problem})
	}
}

// validateRules checks each [[classifier.rules]] entry the way retry.NewClassifier does, naming the key.
func validateRules(p *problems, rules []retry.Rule, at keyPath) {
	before := len(*p)
	seen := map[string]int{}
	for i, r := range rules {
		k := at.at(i)
		switch {
		case r.Class == "":
			p.add(k.key("class"), `""`, "each rule needs an error class")
		case strings.TrimSpace(r.Class) != r.Class:
			p.add(k.key("class"), fmt.Sprintf("%q", r.Class), "leading or trailing space")
		case strings.HasPrefix(r.Class, retry.ReservedPrefix) && !retry.IsBuiltin(r.Class):
			p.add(k.key("class"), fmt.Sprintf("%q", r.Class), "no builtin class has that name (names starting %q are the host's own; see wasm/abi/ABI.md)", retry.ReservedPrefix)
		default:
			if j, dup := seen[r.Class]; dup {
				p.add(k.key("class"), fmt.Sprintf("%q", r.Class), "already classified by classifier.rules[%d]", j)
			} else {
				seen[r.Class] = i
			}
		}
		if _, err := retry.ParseClass(r.As); err != nil {
			p.add(k.key("as"), fmt.Sprintf("%q", r.As), "want recoverable, unrecoverable, systemic or backpressure")
		}
	}
	if len(*p) == before {
		if _, err := retry.NewClassifier(rules); err != nil { // anything the checks above missed
			p.add(at, "", "%v", err)
		}
	}
}
