package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/armature-go/armature/server"
)

// TestDirectToolBoundsEchoedNames: the direct tool path
// (POST /v1/agents/{agent}/tools/{tool}) takes the agent and tool names
// from the URL. An agent name over 128 bytes is 400, as the other
// surfaces answer an over-long agent (or model); an unknown or
// forbidden tool's error quotes at most 64 bytes of its name, an
// ellipsis marking the cut. Before, a 5000-byte name came back in full
// in the 404 or 403 message.
func TestDirectToolBoundsEchoedNames(t *testing.T) {
	long := strings.Repeat("x", 5000)
	for _, c := range []struct {
		name   string
		direct []string
		path   string
		status int
	}{
		{"long agent", []string{"*"}, "/v1/agents/" + long + "/tools/lookup_order", http.StatusBadRequest},
		{"unknown agent", []string{"*"}, "/v1/agents/" + strings.Repeat("a", 128) + "/tools/lookup_order", http.StatusNotFound},
		{"unknown tool", []string{"*"}, "/v1/agents/demo/tools/" + long, http.StatusNotFound},
		{"forbidden tool", []string{"lookup_order"}, "/v1/agents/demo/tools/" + long, http.StatusForbidden},
		{"multibyte tool", []string{"*"}, "/v1/agents/demo/tools/" + strings.Repeat("é", 100), http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newRuntime(t, func(cfg *server.Config) {
				cfg.DirectTools = map[string][]string{server.DefaultTenant: c.direct}
			})
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			r, err := http.Post(ts.URL+c.path, "application/json", strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			t.Logf("%d %s", r.StatusCode, b)
			if r.StatusCode != c.status {
				t.Errorf("status %d, want %d", r.StatusCode, c.status)
			}
			if len(b) > 400 {
				t.Errorf("the error is %d bytes: the name is echoed unbounded", len(b))
			}
			if !strings.Contains(string(b), "…") && c.status != http.StatusBadRequest {
				t.Errorf("the cut name has no ellipsis: %s", b)
			}
		})
	}
}
