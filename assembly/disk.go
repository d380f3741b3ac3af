package assembly

import (
	"errors"
	"fmt"
	"os"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/diskspace"
)

// openDisk makes the data directory and the guard of its free space, and refuses to open the host
// below the reserve (store.min-free): a store opened on a full disk writes on open and would crash
// with SIGBUS, again at every restart, where this says once, on one line, what to do.
func openDisk(cfg *config.Config, opts Options) (*diskspace.Guard, error) {
	data := cfg.Server.DataDir
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	do := cfg.DiskOptions()
	do.Logger, do.Statfs, do.Clock = opts.Logger, opts.Statfs, opts.Clock
	g, err := diskspace.New(data, do)
	if err != nil {
		return nil, err
	}
	var de *diskspace.Error
	switch err := g.Check(); {
	case errors.As(err, &de) && de.Err == nil:
		g.Close()
		return nil, lowAtOpen{de}
	case err != nil:
		g.Close()
		return nil, err
	}
	return g, nil
}

// lowAtOpen is a data directory below its reserve when the host opens: the guard's refusal, said as
// what to do about it. It matches diskspace.ErrLow.
type lowAtOpen struct{ low *diskspace.Error }

func (e lowAtOpen) Error() string {
	return fmt.Sprintf("%s has %s free, below the reserve of %s (%s); free some space or lower %[4]s",
		e.low.Dir, diskspace.FormatBytes(e.low.Free), diskspace.FormatBytes(e.low.Reserve), e.low.ReserveName)
}

func (e lowAtOpen) Unwrap() error { return e.low }
