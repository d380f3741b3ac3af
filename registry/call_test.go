package registry

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/retry"
	"github.com/berthhq/berth/wasm/abi"
)

// CheckCommands fails a call with berth.InvalidCommand, naming the first
// command whose payload is not JSON, and passes JSON and empty payloads.
func TestCheckCommands(t *testing.T) {
	cmd := func(id, payload string) abi.Command {
		return abi.Command{AggregateType: "Stock", AggregateID: id, Type: "Reserve", Payload: []byte(payload)}
	}
	tests := []struct {
		name string
		cmds []abi.Command
		want string // a part of the message; "": no failure
	}{
		{"none", nil, ""},
		{"JSON and empty", []abi.Command{cmd("a", `{"n":1}`), cmd("b", ""), cmd("c", "null")}, ""},
		{"the first bad one is named", []abi.Command{cmd("a", `{}`), cmd("b", "{oops"), cmd("c", "also bad")},
			"command Reserve b of S.h:Order/o@1:0: the payload is not JSON"},
	}
	for _, tt := range tests {
		f := CheckCommands("S.h:Order/o@1:0", tt.cmds)
		switch {
		case tt.want == "" && f != nil:
			t.Errorf("%s: %v, want none", tt.name, f)
		case tt.want != "" && (f == nil || !slices.Equal(f.Classes, []string{retry.ClassInvalidCommand}) || !strings.Contains(f.Message, tt.want)):
			t.Errorf("%s: %+v, want %s saying %q", tt.name, f, retry.ClassInvalidCommand, tt.want)
		}
	}
}

// DeclaredRetry returns the processor's and the handler's own layers, as the
// host's subscriptions take them.
func TestDeclaredRetry(t *testing.T) {
	desc := abi.Description{Processor: "P", Retry: abi.RetrySettings{MaxAttempts: 3, Timeout: time.Second},
		Handlers: []abi.HandlerDesc{{Name: "a", Retry: abi.RetrySettings{Timeout: 2 * time.Second}}, {Name: "b"}}}
	tests := []struct {
		handler     string
		wantTimeout time.Duration // resolved over a default of 1m
	}{
		{"a", 2 * time.Second},
		{"b", time.Second},
		{"unknown", time.Second},
	}
	for _, tt := range tests {
		proc, own := DeclaredRetry(desc, tt.handler)
		if proc.MaxAttempts != 3 {
			t.Errorf("%s: processor layer %+v", tt.handler, proc)
		}
		got := retry.Resolve(retry.Layer{Source: retry.SourceDefault, Settings: retry.Settings{Timeout: time.Minute}},
			retry.Layer{Source: retry.SourceProcessor, Settings: proc}, retry.Layer{Source: retry.SourceHandler, Settings: own}).Timeout
		if got != tt.wantTimeout {
			t.Errorf("%s: timeout %v, want %v", tt.handler, got, tt.wantTimeout)
		}
	}
}
