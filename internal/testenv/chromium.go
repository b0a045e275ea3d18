package testenv

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// Chromium starts a headless Chromium with a fresh profile for the test (skipping it
// when there is none: set TOOLGATE_CHROMIUM or install Debian's chromium) and
// returns the context chromedp drives it by; it ends with the test.
func Chromium(t testing.TB) context.Context {
	t.Helper()
	if testing.Short() {
		t.Skip("browser tests are slow; they run without -short")
	}
	bin := os.Getenv("TOOLGATE_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome"} {
		if bin != "" {
			break
		}
		bin, _ = exec.LookPath(name)
	}
	if bin == "" {
		t.Skip("no Chromium found (set TOOLGATE_CHROMIUM or install Debian's chromium: `make test-deps`)")
	}
	ctx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(bin), chromedp.UserDataDir(t.TempDir()),
		// The network here is closed: without these, Chromium waits on connections
		// that never come.
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(ctx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil { // starts the browser, which lives as long as ctx
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}
