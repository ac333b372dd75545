// Package web is the browser UI of armature serve: a chat page (sessions,
// streaming replies, tool cards, approvals, error replies by bucket) and
// a run inspector, as plain HTML, CSS and JavaScript modules embedded in
// the binary. There is no build step and nothing is fetched from
// elsewhere, so the page works offline.
//
// The page uses only the server's public HTTP API (/v1/sessions...,
// /v1/runs...). The UI's own routes are public — the page is the same for
// everyone — and the page sends the bearer token the user stores in the
// browser (localStorage) as Authorization on its API calls; a loopback
// server without tokens needs none.
//
// Routes served by [UI.ServeHTTP]:
//
//	GET /                              the page (Cache-Control: no-cache)
//	GET /assets/<version>/<path>       an asset (immutable for a year)
//
// <version> is a digest of every embedded file, so a new binary's page
// names new asset URLs and browsers never mix versions; an asset asked
// for under another version is still served, but revalidated. Every
// response carries a strict Content-Security-Policy ([CSP]: scripts and
// styles only from the server's own files, no inline code), an ETag, and
// nosniff.
//
// A UI is immutable after New and safe for concurrent use.
//
// # Example
//
//	ui, err := web.New()
//	mux.Handle("GET /{$}", ui)
//	mux.Handle("GET /assets/", ui)
package web
