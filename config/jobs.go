package config

import "fmt"

// Defaults of [jobs].
const (
	// DefaultJobRate is jobs.default-rate: records a second a bulk job acts on unless it asks for another
	// rate. Each resume replays an aggregate's held events through its handler, and so calls whatever
	// service it calls: a bulk resume after an outage must not be the next outage of the service that
	// just came back. 100 a second is gentle on a service and resumes an incident's 100,000 parks in 17
	// minutes (5 a second took five and a half hours).
	DefaultJobRate = 100.0
	// DefaultMaxJobRate is jobs.max-rate: the highest rate a job may ask for. A job acts on up to 256
	// records at once, their ledger writes sharing commits, so a host reaches thousands a second.
	DefaultMaxJobRate = 5000.0
)

// JobsConfig is [jobs]: the pace of operators' bulk resume and skip jobs.
type JobsConfig struct {
	// DefaultRate is the records a second a job acts on when it asks for no rate (default 100).
	DefaultRate float64 `toml:"default-rate"`
	// MaxRate is the highest rate a job may ask for (default 5000); a higher one is refused with 400.
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
