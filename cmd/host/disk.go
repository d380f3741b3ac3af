package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/internal/diskspace"
)

// openDisk makes the data directory and the guard of its free space, and
// refuses to start below the reserve (store.min-free): a store opened on a
// full disk writes on open and would crash with SIGBUS, again at every
// restart, where this says once, on one line, what to do.
func openDisk(cfg *config.Config, log *slog.Logger) (*diskspace.Guard, error) {
	data := cfg.Server.DataDir
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	g, err := diskspace.New(data, diskspace.Options{Reserve: cfg.Store.MinFree.Bytes(), ReserveName: "store.min-free", Logger: log})
	if err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	var de *diskspace.Error
	switch err := g.Check(); {
	case errors.As(err, &de) && de.Err == nil:
		g.Close()
		return nil, fmt.Errorf("not starting: the data directory %s has %s free, below the reserve of %s (store.min-free); free some space or lower store.min-free",
			de.Dir, diskspace.FormatBytes(de.Free), diskspace.FormatBytes(de.Reserve))
	case err != nil:
		g.Close()
		return nil, fmt.Errorf("not starting: %w", err)
	}
	return g, nil
}
