package sandbox

// How deadlines stop a module's running code.
const (
	guardLoop        = "loop-guard"
	guardCloseOnDone = "close-on-done"
	guardNone        = "none"
)

// guardDeadlines prepares module bytes for the sandbox's deadline mode.
func (s *Sandbox) guardDeadlines(wasm []byte) ([]byte, string, error) {
	switch s.cfg.Deadlines {
	case DeadlinesNone:
		return wasm, guardNone, nil
	default:
		return wasm, guardCloseOnDone, nil
	}
}
