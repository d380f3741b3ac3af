package config

import "fmt"

// Defaults of [jobs].
const (
	// DefaultJobRate is jobs.default-rate: records a second a bulk job acts on unless it asks for another
	// rate. Each resume replays an aggregate's held events through its handler, and so calls whatever
	// service it calls: a bulk resume after an outage must not be the next outage of the service that
	// just came back.
	DefaultJobRate = 5.0
	// DefaultMaxJobRate is jobs.max-rate: the highest rate a job may ask for.
	DefaultMaxJobRate = 200.0
)

// JobsConfig is [jobs]: the pace of operators' bulk resume and skip jobs.
type JobsConfig struct {
	// DefaultRate is the records a second a job acts on when it asks for no rate (default 5).
	DefaultRate float64 `toml:"default-rate"`
	// MaxRate is the highest rate a job may ask for (default 200); a higher one is refused with 400.
	MaxRate float64 `toml:"max-rate"`
}

func (j JobsConfig) validate(p *problems, at keyPath) {
	if !(j.MaxRate > 0) || j.MaxRate > 10000 {
		p.add(at.key("max-rate"), fmt.Sprint(j.MaxRate), "must be above 0 and at most 10000 records a second")
	}
	if !(j.DefaultRate > 0) {
		p.add(at.key("default-rate"), fmt.Sprint(j.DefaultRate), "must be above 0 records a second")
	} else if j.MaxRate > 0 && j.DefaultRate > j.MaxRate {
		p.add(at.key("default-rate"), fmt.Sprint(j.DefaultRate), "must be at most jobs.max-rate (%v)", j.MaxRate)
	}
}
