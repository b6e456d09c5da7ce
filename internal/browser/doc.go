// Package browser drives headless Chromium over the Chrome DevTools Protocol,
// for end-to-end tests of web pages a wasmkeep node serves. It depends only
// on the standard library and gorilla/websocket.
//
// Launch starts Chromium (Debian's chromium package; scripts/chromium.sh
// installs it) headless, with the flags this machine needs (no sandbox, as
// root; no GPU; no background networking), a fresh temporary profile and
// --remote-debugging-port=0, reads the DevTools URL from its stderr and
// connects to it. NewPage opens a tab as a flattened session of that one
// connection; Eval, WaitFor and Console work on the tab. Tests get the
// Chromium path from Require, which fails a test when Chromium is missing.
//
//	b, err := browser.Launch(ctx, browser.Options{Logf: t.Logf})
//	...
//	defer b.Close()
//	p, err := b.NewPage(ctx, srv.URL)
//	...
//	err = p.WaitFor(ctx, `document.querySelector("#out") !== null`, 5*time.Second)
//
// Invariants:
//   - One goroutine reads the DevTools websocket; replies are matched to
//     commands by id, events to pages by session id. Browser and Page
//     methods may be called from any goroutine.
//   - Every wait is bounded: by the caller's ctx, WaitFor's timeout, or a
//     fixed bound where a method takes no ctx (Page.Close, writes).
//   - Chromium runs in its own process group. Browser.Close kills the group,
//     reaps the main process and waits for the stderr reader, so no process
//     or goroutine of the browser outlives Close. On Linux the kernel also
//     kills Chromium if the test process dies first.
package browser
