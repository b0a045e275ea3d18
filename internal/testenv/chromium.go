package testenv

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// ChromiumPath finds a Chromium or Chrome binary: $TOOLGATE_CHROMIUM, or one on PATH.
func ChromiumPath() (string, bool) {
	if p := os.Getenv("TOOLGATE_CHROMIUM"); p != "" {
		return p, true
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, true
		}
	}
	return "", false
}

// ChromiumOptions are the allocator options of a headless Chromium at bin with the
// profile directory given, as every browser test here runs it.
func ChromiumOptions(bin, profile string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.UserDataDir(profile),
		// The network here is closed: without these, Chromium waits on connections
		// that never come.
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
}

// Chromium starts a headless Chromium with a fresh profile for the test (skipping it
// when there is none: set TOOLGATE_CHROMIUM or install Debian's chromium) and
// returns the context chromedp drives it by; it ends with the test.
func Chromium(t testing.TB) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests are slow; they run without -short")
	}
	bin, ok := ChromiumPath()
	if !ok {
		t.Skip("no Chromium found (set TOOLGATE_CHROMIUM or install Debian's chromium: `make test-deps`)")
	}
	ctx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), ChromiumOptions(bin, t.TempDir())...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(ctx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, which lives as long as ctx
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}
