package tests

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// newBrowser starts headless Chromium for one test and returns its context,
// which ends within the given time; extra adds command-line flags.
func newBrowser(t *testing.T, within time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("no %s: install Debian's chromium package (.ci/run does: apt-get install -y chromium): %v", chromium, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 900),
	)
	opts = append(opts, extra...)
	// Start the browser now, so that its start is not charged to the first
	// step. A loaded machine has seen chromium exit before it served its
	// DevTools ("chrome failed to start"): that is the machine's, not the
	// console's, so it is tried again, twice at most.
	var err error
	for try := range 3 {
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
		ctx, cancel := context.WithTimeout(ctx, within)
		if err = chromedp.Do(ctx); err == nil {
			t.Cleanup(cancelAlloc)
			t.Cleanup(cancelCtx)
			t.Cleanup(cancel)
			return ctx
		}
		cancel()
		cancelCtx()
		cancelAlloc()
		t.Logf("start chromium (try %d): %v", try+1, err)
	}
	t.Fatalf("start chromium: %v", err)
	return nil
}

// evaluate runs js in the page and returns its string result, failing the
// test when it cannot.
func evaluate(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return s
}
