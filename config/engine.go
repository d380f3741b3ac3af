package config

import (
	"github.com/berthhq/berth/subscription"
)

// EngineOptions returns the subscription engine's options from [subscription] and [[classifier.rules]]:
// partitions, concurrency, checkpointing, the host-wide retry and parked layers, the outage window and
// the classifier. The host adds the Logger (and a test, if it wants, the Clock and Jitter). A reload
// applies the Retry, Parked and Classifier it returns (Engine.SetHostDefaults); the rest needs a
// restart. It fails only on a Config that does not validate (a classifier rule naming an unknown
// berth.* class, say).
func (c *Config) EngineOptions() (subscription.Options, error) {
	classifier, err := c.Classifier()
	if err != nil {
		return subscription.Options{}, err
	}
	defaults, _ := c.RetryLayers("")
	s := c.Subscription
	return subscription.Options{
		Partitions:         s.Partitions,
		Concurrency:        s.Concurrency,
		Retry:              defaults,
		Parked:             c.Parked(""),
		Systemic:           c.Systemic(),
		Classifier:         classifier,
		CheckpointEvery:    s.CheckpointEvery,
		CheckpointInterval: s.CheckpointInterval.Std(),
	}, nil
}
