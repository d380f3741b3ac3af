package sandbox_test

import (
	"context"
	"fmt"
	"time"

	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/wasm/abi"
)

// A module is loaded once and invoked per event; the sandbox reports how
// each call ended as an Outcome, and the host's kinds name their builtin
// class through retry's one table. The misbehaving sample's spinner loops
// for ever: the sandbox stops it at its deadline.
func Example() {
	wasm, err := testbuild.Bytes("samples/misbehaving")
	if err != nil {
		fmt.Println(err)
		return
	}
	sb, err := sandbox.New(sandbox.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close(context.Background())
	m, err := sb.Load(context.Background(), "misbehaving", wasm, sandbox.ModuleConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	o := m.Invoke(context.Background(), &abi.Event{Handler: "spinner", Type: "Spin",
		AggregateType: "Order", AggregateID: "o-1", Version: 1, Attempt: 1}, 200*time.Millisecond)
	fmt.Println(o.Kind, o.Kind.HostKind().Class())
	// Output: timeout berth.Timeout
}
