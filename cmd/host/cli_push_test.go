package main

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/faultnet"
	"github.com/berthhq/berth/internal/testing/checkfor"
)

// TestPushSameBytesSendsNone: `berth modules push` of the bytes the module
// runs already is answered from their digest before any of them is sent.
// Through a proxy that counts what the CLI sends, the second push of the
// same file sends its request's head alone (not the module's megabytes) and
// prints the running module.
func TestPushSameBytesSendsNone(t *testing.T) {
	wasm, err := os.ReadFile(sampleWasm)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCLI("", "modules", "push", "shipment-notifier", sampleWasm); code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	proxy, err := faultnet.Listen(strings.TrimPrefix(hostURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	code, stdout, stderr := runCLI("http://"+proxy.Addr(), "modules", "push", "shipment-notifier", sampleWasm)
	if code != 0 || !strings.Contains(stdout, "module shipment-notifier") {
		t.Fatalf("push of the same bytes: exit %d\n%s%s", code, stdout, stderr)
	}
	checkfor.Nil(t, 10*time.Second, 10*time.Millisecond, func() error {
		if proxy.Sent() == 0 {
			return errors.New("the proxy counted nothing sent")
		}
		return nil
	})
	if n := proxy.Sent(); n > 16<<10 {
		t.Errorf("the same bytes pushed again sent %d bytes (the module is %d): want the request's head alone", n, len(wasm))
	}
}
