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

// guardDeadlines prepares module bytes for the sandbox's deadline mode. In
// the default mode the loop guard rewrites the module; a module it cannot
// rewrite (no sched_yield import, an instruction it does not decode) runs
// under wazero's close-on-done instead, which stops it just as surely, only
// slower. Malformed bytes are left for the compiler to report.
func (s *Sandbox) guardDeadlines(wasm []byte) ([]byte, string, error) {
	switch s.cfg.Deadlines {
	case DeadlinesNone:
		return wasm, guardNone, nil
	case DeadlinesCloseOnDone:
		return wasm, guardCloseOnDone, nil
	}
	res, err := loopguard.Rewrite(wasm, loopguard.Options{})
	switch {
	case err == nil:
		return res.Module, guardLoop, nil
	case errors.Is(err, loopguard.ErrNoYieldImport), errors.Is(err, loopguard.ErrUnsupported):
		s.cfg.Logger.Info("module runs under close-on-done deadlines", "reason", err.Error())
		return wasm, guardCloseOnDone, nil
	case errors.Is(err, loopguard.ErrMalformed):
		return nil, "", fmt.Errorf("%w: %v", ErrInvalidModule, err)
	default:
		return nil, "", fmt.Errorf("%w: %v", ErrInvalidModule, err)
	}
}
