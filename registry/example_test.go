package registry_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/berthhq/berth/config"
	"github.com/berthhq/berth/eventlog"
	"github.com/berthhq/berth/internal/testing/testbuild"
	"github.com/berthhq/berth/ledger"
	"github.com/berthhq/berth/registry"
	"github.com/berthhq/berth/sandbox"
	"github.com/berthhq/berth/subscription"
)

// Uploading a module (Put) keeps its bytes, loads it in the sandbox, and
// adds one subscription per handler to the engine; a second upload of the
// same bytes changes nothing.
func Example() {
	wasm, err := testbuild.Bytes("samples/shipment-notifier")
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "berth-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	log, err := eventlog.Open(dir+"/log", eventlog.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer log.Close(ctx)
	store, err := ledger.Open(dir+"/ledger", ledger.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close(ctx)
	box, err := sandbox.New(sandbox.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer box.Close(ctx)
	engine, err := subscription.Open(log, store, subscription.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer engine.Close(ctx)
	cfg := config.Default()
	modules, err := registry.Open(ctx, registry.Options{Dir: dir + "/modules", Sandbox: box, Engine: engine,
		Settings: func() registry.Settings { return cfg }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := engine.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}

	info, changed, err := modules.Put(ctx, "shipment-notifier", wasm)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(info.Processor, info.Kind, "version", info.Version, "changed", changed)
	fmt.Println(info.Subscriptions)
	_, changed, _ = modules.Put(ctx, "shipment-notifier", wasm)
	fmt.Println("again: changed", changed)
	// Output:
	// ShipmentNotifier reactor version 1 changed true
	// [ShipmentNotifier.onOrderShipped]
	// again: changed false
}
