package dashboard_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/toolgate/toolgate/internal/testenv"
)

// The browser tests drive headless Chromium through the dashboard as a person would,
// on a laptop-sized and a phone-sized screen, and save a screenshot of every page
// they pass through. With -artifacts the screenshots go to the test's artifact
// directory; otherwise to testdata/out/, which git ignores. Either way the test log
// says where.

// chromium finds a Chromium or Chrome binary: $TOOLGATE_CHROMIUM, or one on PATH.
func chromium() (string, bool) { return testenv.ChromiumPath() }

type viewport struct {
	name          string
	width, height int64
	mobile        bool
}

var viewports = []viewport{
	{name: "laptop", width: 1366, height: 860},
	{name: "phone", width: 390, height: 844, mobile: true},
}

func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser tests are slow; they run without -short")
	}
	bin, ok := chromium()
	if !ok {
		t.Skip("no Chromium found (set TOOLGATE_CHROMIUM or install Debian's chromium: `make test-deps`)")
	}
	e := newEnv(t, nil)
	for _, vp := range viewports {
		t.Run("on a "+vp.name+" screen", func(t *testing.T) {
			b := newBrowser(t, bin, vp)
			b.walkThrough(e)
		})
	}
}

// browser is one headless Chromium with a fresh profile.
type browser struct {
	t    *testing.T
	ctx  context.Context
	vp   viewport
	dir  string // where screenshots go
	shot int
}

func newBrowser(t *testing.T, bin string, vp viewport) *browser {
	opts := append(testenv.ChromiumOptions(bin, t.TempDir()), chromedp.WindowSize(int(vp.width), int(vp.height)))
	ctx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancelBrowser := chromedp.NewContext(ctx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelBrowser)
	b := &browser{t: t, ctx: ctx, vp: vp, dir: screenshotDir(t)}
	// The first action starts the browser, which lives as long as ctx: it must have
	// no deadline of its own.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	viewport := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
	if vp.mobile {
		viewport = append(viewport, chromedp.EmulateMobile)
	}
	b.do("set the viewport", chromedp.EmulateViewport(vp.width, vp.height, viewport...))
	t.Logf("screenshots of the %s screen in %s", vp.name, b.dir)
	return b
}

func screenshotDir(t *testing.T) string {
	if f := flag.Lookup("test.artifacts"); f != nil && f.Value.String() == "true" {
		return t.ArtifactDir()
	}
	name := regexp.MustCompile(`[^A-Za-z0-9_-]+`).ReplaceAllString(t.Name(), "_")
	out, err := filepath.Abs(filepath.Join("testdata", "out"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	// Each run writes into a directory of its own, which takes the name's place when
	// the test ends: runs of one tree at the same time never remove what another is
	// writing.
	dir, err := os.MkdirTemp(out, "."+name+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		final := filepath.Join(out, name)
		if err := os.RemoveAll(final); err == nil {
			err = os.Rename(dir, final)
		}
		if err != nil {
			t.Logf("the screenshots stay in %s: %v", dir, err)
		}
	})
	return dir
}

// stepTimeout bounds one step of a walk through the pages.
const stepTimeout = 20 * time.Second

// run runs one action and returns its value, failing the test with what was being
// done and where.
func run[T any](b *browser, what string, a chromedp.Action[T]) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		b.t.Fatalf("%s (at %s): %v", what, loc, err)
	}
	return v
}

// do runs steps that return nothing.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	run(b, what, chromedp.Steps(steps...))
}

// screenshot saves the whole page as NN-name.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	b.shot++
	png := run(b, "screenshot "+name, chromedp.FullScreenshot(100))
	path := filepath.Join(b.dir, fmt.Sprintf("%02d-%s.png", b.shot, name))
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	return run(b, "read "+sel, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
}

// css selects the first element matching a CSS selector.
func css(sel string) chromedp.CSS { return chromedp.CSS(sel) }

// walkThrough signs in (after a bad key), opens a tool, reads its SSE link, runs a
// call, creates and revokes a key, and signs out.
func (b *browser) walkThrough(e *env) {
	t := b.t

	b.do("open the dashboard",
		chromedp.Navigate(e.url("")),
		chromedp.WaitVisible(css("#key")))
	if loc := run(b, "read the address", chromedp.Location()); !strings.HasSuffix(loc, "/dashboard/signin") {
		t.Fatalf("a visitor lands on %s, want the sign-in page", loc)
	}
	b.screenshot("signin")

	b.do("sign in with a bad key",
		chromedp.SendKeys(css("#key"), "tg_not-a-key"),
		chromedp.Submit(css("#key")),
		chromedp.WaitVisible(css("#signin-error")))
	if msg := b.text("#signin-error"); !strings.Contains(msg, "not valid") {
		t.Errorf("the sign-in error says %q", msg)
	}
	b.screenshot("signin-bad-key")

	b.do("sign in with the account's key",
		chromedp.SetValue(css("#key"), e.key),
		chromedp.Submit(css("#key")),
		chromedp.WaitVisible(css(".tool-list")))
	if names := b.text(".tool-list"); !strings.Contains(names, "Email") || !strings.Contains(names, "Clock") {
		t.Errorf("the tools page lists %q", names)
	}
	b.screenshot("tools")

	if b.vp.name == "laptop" {
		b.do("press Tab", chromedp.KeyEvent(kb.Tab))
		if focused := run(b, "read the focus", chromedp.Evaluate[string](`document.activeElement.textContent`)); focused != "Skip to content" {
			t.Errorf("the first Tab focuses %q, want the skip link", focused)
		}
	}

	b.do("open the email tool",
		chromedp.Click(css(`a[href="/dashboard/tools/email"]`)),
		chromedp.WaitVisible(css("#install-title")))
	if cmd := b.text("#install-cursor"); cmd != "toolgate install email <API_KEY> --client cursor --base-url "+e.base {
		t.Errorf("the Cursor install command reads %q", cmd)
	}
	if !run(b, "look for the copy buttons", chromedp.Evaluate[bool](`!document.querySelector("button.copy").hidden`)) {
		t.Errorf("the copy buttons stay hidden with script on")
	}
	b.screenshot("tool-install")

	b.do("open the SSE link tab",
		chromedp.Click(css(`a[href="/dashboard/tools/email/sse"]`)),
		chromedp.WaitVisible(css("#sse-link")))
	if link := b.text("#sse-link"); link != e.link("email") {
		t.Errorf("the page's SSE link is %q, want %q", link, e.link("email"))
	}
	b.screenshot("tool-sse")

	b.do("open the API tab",
		chromedp.Click(css(`a[href="/dashboard/tools/email/api"]`)),
		chromedp.WaitVisible(css("#params-send")))
	b.screenshot("tool-api")

	before := e.calls.Load()
	b.do("run a call from the try-it form",
		chromedp.SetValue(css("#params-send"), `{"to": "ada@example.com", "subject": "Hello", "body": "From the dashboard"}`),
		chromedp.Click(css("#run-send")),
		chromedp.WaitVisible(css("#result-send")))
	if status := b.text("#status-send"); status != "200 OK" {
		t.Errorf("the call's status reads %q", status)
	}
	if resp := b.text("#response-send"); !strings.Contains(resp, `"to": "ada@example.com"`) || !strings.Contains(resp, `"status": "queued"`) {
		t.Errorf("the call's response reads %q", resp)
	}
	if n := e.calls.Load() - before; n != 1 {
		t.Errorf("the tool was called %d times, want once", n)
	}
	b.screenshot("tool-api-result")

	name := "browser " + b.vp.name
	b.do("create a key",
		chromedp.Click(css(`a[href="/dashboard/keys"]`)),
		chromedp.WaitVisible(css("#key-name")),
		chromedp.SendKeys(css("#key-name"), name),
		chromedp.Click(css(`form[action="/dashboard/keys"] button[type="submit"]`)),
		chromedp.WaitVisible(css("#new-key")))
	secret := b.text("#new-key")
	p, err := e.view.Snapshot().AuthenticateKey(secret, time.Now())
	if err != nil || p.Key.Name != name {
		t.Fatalf("the key shown (%q) does not authenticate as %q: %v", secret, name, err)
	}
	b.screenshot("keys-created")

	row := "#key-" + p.Key.ID
	b.do("revoke the new key",
		chromedp.Click(css(row+` button[type="submit"]`)),
		chromedp.WaitVisible(css(".notice")))
	if status := b.text(row + " .key-status"); !strings.Contains(status, "revoked") {
		t.Errorf("the revoked key's status reads %q", status)
	}
	if _, err := e.view.Snapshot().AuthenticateKey(secret, time.Now()); err == nil {
		t.Errorf("the revoked key still authenticates")
	}
	if n := run(b, "look for the key on the page", chromedp.Nodes(css("#new-key"), chromedp.AtLeast(0))); len(n) != 0 {
		t.Errorf("the key is still shown after the page that created it")
	}
	b.screenshot("keys-revoked")

	b.do("sign out",
		chromedp.Click(css(`form[action="/dashboard/signout"] button`)),
		chromedp.WaitVisible(css("#key")))
	b.screenshot("signed-out")
	b.do("come back after signing out",
		chromedp.Navigate(e.url("keys")),
		chromedp.WaitVisible(css("#key")))
	if _, err := e.view.Snapshot().AuthenticateKey(e.key, time.Now()); err != nil {
		t.Errorf("the account's own key stopped working: %v", err)
	}
}
