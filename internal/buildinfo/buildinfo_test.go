package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestFrom(t *testing.T) {
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want Info
	}{
		{"no build info", nil, false, Info{Version: Unknown, Revision: Unknown, GoVersion: runtime.Version()}},
		{"working tree without VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, true,
			Info{Version: "(devel)", Revision: Unknown, GoVersion: "go1.26.0"}},
		{"release with VCS stamp", &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "82d5e46c0ffee"}, {Key: "vcs.time", Value: "2026-05-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
		}}, true, Info{Version: "v1.2.3", Revision: "82d5e46c0ffee", Modified: true, Time: "2026-05-01T10:00:00Z", GoVersion: "go1.26.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := From(tt.bi, tt.ok); got != tt.want {
				t.Errorf("From = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestRead: a test binary has build information, so Read reports the
// toolchain that built it.
func TestRead(t *testing.T) {
	if got := Read(); got.GoVersion != runtime.Version() || got.Version == "" || got.Revision == "" {
		t.Errorf("Read = %+v", got)
	}
}
