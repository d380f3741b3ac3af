package sandbox

import (
	"errors"
	"fmt"

	"github.com/berthhq/berth/sandbox/internal/loopguard"
)

// How deadlines stop a module's running code.
const (
	guardLoop        = "loop-guard"
	guardCloseOnDone = "close-on-done"
	guardNone        = "none"
)

// guardDeadlines prepares module bytes, whose sha256 is sum, for the
// sandbox's deadline mode. In the default mode the loop guard rewrites the
// module (or the guard store has its rewrite from an earlier run); a module
// it cannot rewrite (no sched_yield import, an instruction it does not
// decode) runs under wazero's close-on-done instead, which stops it just as
// surely, only slower. Malformed bytes are left for the compiler to report.
// Without the loop guard, only the module's data segments are merged
// (loopguard.MergeData: a new instance is made faster), as the rewrite
// merges them.
func (s *Sandbox) guardDeadlines(wasm []byte, sum [32]byte) ([]byte, string, error) {
	switch s.cfg.Deadlines {
	case DeadlinesNone:
		return loopguard.MergeData(wasm), guardNone, nil
	case DeadlinesCloseOnDone:
		return loopguard.MergeData(wasm), guardCloseOnDone, nil
	}
	if s.guards != nil {
		if code, guard, ok := s.guards.load(sum); ok {
			if guard == guardCloseOnDone {
				code = wasm
			}
			return code, guard, nil
		}
	}
	code, guard := wasm, guardLoop
	res, err := loopguard.Rewrite(wasm, loopguard.Options{})
	switch {
	case err == nil:
		code = res.Module
	case errors.Is(err, loopguard.ErrNoYieldImport), errors.Is(err, loopguard.ErrUnsupported):
		s.cfg.Logger.Info("module runs under close-on-done deadlines", "reason", err.Error())
		guard = guardCloseOnDone
	default: // loopguard.ErrMalformed among them
		return nil, "", fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
	if s.guards != nil {
		if err := s.guards.store(sum, code, guard); err != nil {
			// Only the next start's speed depends on it.
			s.cfg.Logger.Warn("the loop guard's rewrite is not kept", "err", err.Error())
		}
	}
	return code, guard, nil
}
