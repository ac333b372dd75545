package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// CSP is the Content-Security-Policy of every UI response: the page's
// scripts, styles and images come from the server only, it talks only to
// its own origin, and nothing inline runs.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// assetsPrefix is where assets are served; the page names them under
// assetsPrefix + version + "/".
const assetsPrefix = "/assets/"

// versionPlaceholder is replaced in index.html by the assets' base path.
const versionPlaceholder = "{{ASSETS}}"

// contentTypes maps the embedded files' extensions to their media types
// (explicit, so the host's MIME tables cannot change them).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

type asset struct {
	body        []byte
	contentType string
	etag        string
}

// UI serves the embedded web UI.
type UI struct {
	version string
	index   asset
	assets  map[string]asset // by path under static/, e.g. "js/main.js"
}

// New loads the embedded files.
func New() (*UI, error) {
	u := &UI{assets: map[string]asset{}}
	sum := sha256.New()
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return fmt.Errorf("web: no content type for %s", p)
		}
		name := strings.TrimPrefix(p, "static/")
		fmt.Fprintf(sum, "%s\x00%d\x00", name, len(body))
		sum.Write(body)
		u.assets[name] = asset{body: body, contentType: ct, etag: etag(body)}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("web: reading the embedded files: %w", err)
	}
	idx, ok := u.assets["index.html"]
	if !ok {
		return nil, fmt.Errorf("web: index.html is not embedded")
	}
	delete(u.assets, "index.html")
	u.version = hex.EncodeToString(sum.Sum(nil))[:16]
	body := bytes.ReplaceAll(idx.body, []byte(versionPlaceholder), []byte("assets/"+u.version))
	u.index = asset{body: body, contentType: idx.contentType, etag: etag(body)}
	return u, nil
}

func etag(body []byte) string {
	s := sha256.Sum256(body)
	return `"` + hex.EncodeToString(s[:12]) + `"`
}

// Version is the digest that names the current assets.
func (u *UI) Version() string { return u.version }

// ServeHTTP serves GET (and HEAD) / and /assets/<version>/<path>.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/" {
		h.Set("Cache-Control", "no-cache")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		u.serve(w, r, u.index)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, assetsPrefix)
	version, name, _ := strings.Cut(rest, "/")
	a, found := u.assets[name]
	if !ok || !found {
		h.Set("Cache-Control", "no-store")
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if version == u.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	u.serve(w, r, a)
}

func (u *UI) serve(w http.ResponseWriter, r *http.Request, a asset) {
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
