// Package buildinfo reads what the Go toolchain recorded about the running
// binary (runtime/debug.ReadBuildInfo): its module version and the VCS
// revision it was built from. The CLI's version verb prints it and the
// berth_build_info metric exposes it; both read it here.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Unknown stands for a value the build did not record (a binary built
// with -buildvcs=false, or outside a repository, has no revision).
const Unknown = "unknown"

// Info is what is known about the build of a binary.
type Info struct {
	// Version is the main module's version: a release tag, a pseudo-version,
	// or "(devel)" for a build from a working tree.
	Version string
	// Revision is the VCS commit the binary was built from, or Unknown.
	Revision string
	// Modified is set when the working tree had uncommitted changes.
	Modified bool
	// Time is the commit time as the VCS recorded it (RFC 3339), or "".
	Time string
	// GoVersion is the toolchain that built the binary, e.g. "go1.26.0".
	GoVersion string
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	return From(bi, ok)
}

// From extracts Info from what debug.ReadBuildInfo returned; ok false (no
// build information, e.g. a binary built without module support) gives
// Unknown for everything but the running Go version.
func From(bi *debug.BuildInfo, ok bool) Info {
	info := Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version()}
	if !ok || bi == nil {
		return info
	}
	if bi.Main.Version != "" {
		info.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if s.Value != "" {
				info.Revision = s.Value
			}
		case "vcs.modified":
			info.Modified = s.Value == "true"
		case "vcs.time":
			info.Time = s.Value
		}
	}
	return info
}
