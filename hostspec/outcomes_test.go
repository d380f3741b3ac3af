package hostspec_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/guest-sdk/berth"
	"github.com/berthhq/berth/guest-sdk/berthtest"
	"github.com/berthhq/berth/hostspec"
)

// The host's own outcomes, from a module that misbehaves on purpose.
func TestHostOutcomesAreFailures(t *testing.T) {
	tests := []struct {
		event string
		opts  []hostspec.Option
		class *berth.ErrorClass
	}{
		{"Spin", []hostspec.Option{hostspec.WithTimeout(200 * time.Millisecond)}, hostspec.Timeout},
		{"Sleep", []hostspec.Option{hostspec.WithTimeout(200 * time.Millisecond)}, hostspec.Timeout},
		{"Crash", nil, hostspec.Trap},
		{"Hog", []hostspec.Option{hostspec.WithMemoryLimitPages(256)}, hostspec.MemoryExceeded},
		{"Panic", nil, berth.ClassPanic},
	}
	for _, tt := range tests {
		t.Run(tt.event, func(t *testing.T) {
			spec := hostspec.New(t, modules["samples/misbehaving"], tt.opts...)
			spec.WhenEvent(berthtest.Event{Type: tt.event, AggregateID: "a-1"}).ExpectErrorClass(tt.class).ExpectErrorIs(tt.class)
		})
	}
}

func TestGuestLinesAreCaptured(t *testing.T) {
	spec := hostspec.New(t, modules["samples/misbehaving"])

	then := spec.WhenEvent(berthtest.Event{Type: "Echo", AggregateID: "a-1"}).ExpectNoError()
	lines := spec.Log.Lines()
	// The guest's fields stay fields, as its native test kit records them.
	if len(lines) != 1 || lines[0].Key != then.Key || lines[0].Msg != "echo" || len(lines[0].KV) != 2 ||
		lines[0].KV[0] != "key" || lines[0].KV[1] != then.Key {
		t.Errorf("log lines %+v", lines)
	}
}

func TestAModuleTheSandboxRefusesFailsTheTest(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	if spec := hostspec.New(rec, []byte("not wasm")); spec != nil || !strings.Contains(rec.fatal, "do not start with") {
		t.Errorf("spec %v, fatal %q", spec, rec.fatal)
	}
}

// fatalRecorder records Fatalf instead of ending the test.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }
