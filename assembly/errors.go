package assembly

// OpenError is why [Open] failed: the part that did not open, and its error.
type OpenError struct {
	// Part names the part: "configuration", "data directory", "NATS connection", "event log", "ledger", "sandbox",
	// "engine", "modules", "jobs" or "cluster".
	Part string
	// Err is the part's own error.
	Err error
}

// Error says which part did not open, and why.
func (e *OpenError) Error() string { return "open " + e.Part + ": " + e.Err.Error() }

// Unwrap returns the part's error.
func (e *OpenError) Unwrap() error { return e.Err }
