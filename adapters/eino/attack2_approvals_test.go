package eino_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/armature-go/armature/adapters/eino"
	"github.com/armature-go/armature/internal/demo"
)

// TestAttackConcurrentApprovals: an approval sent several times at once,
// to one server or to two sharing one SQLite file and one checkpoint
// directory, with one request id or one each, runs the refund once and
// leaves no checkpoint.
func TestAttackConcurrentApprovals(t *testing.T) {
	for _, tc := range []struct {
		servers   int
		sameReqID bool
	}{{1, false}, {1, true}, {2, false}, {2, true}} {
		t.Run(fmt.Sprintf("servers=%d,same request id=%v", tc.servers, tc.sameReqID), func(t *testing.T) {
			dir := t.TempDir()
			ckpts := filepath.Join(dir, "ckpt")
			var refunds atomic.Int32
			tools := demo.Tools()
			for i, tl := range tools {
				if tl.Definition.Name == "issue_refund" {
					call := tl.Call
					tools[i].Call = func(ctx context.Context, args json.RawMessage) (string, error) {
						refunds.Add(1)
						return call(ctx, args)
					}
				}
			}
			var urls []string
			for range tc.servers {
				fs, err := eino.NewFileStore(ckpts)
				if err != nil {
					t.Fatal(err)
				}
				urls = append(urls, serveEino(t, dir, tools, fs))
			}
			post := func(url, path, body string) (int, map[string]any) {
				resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return 0, nil
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				var out map[string]any
				_ = json.Unmarshal(b, &out)
				return resp.StatusCode, out
			}
			_, out := post(urls[0], "/v1/sessions/s/messages", `{"content":"please refund order 7"}`)
			sig, _ := out["signal"].(map[string]any)
			signalID, _ := sig["signal_id"].(string)
			if out["outcome"] != "suspended" || signalID == "" {
				t.Fatalf("refund turn: %v", out)
			}
			const n = 6
			var wg sync.WaitGroup
			outcomes := make([]string, n)
			for i := range n {
				wg.Go(func() {
					reqID := fmt.Sprintf("req-%d", i)
					if tc.sameReqID {
						reqID = "req"
					}
					code, out := post(urls[i%len(urls)], "/v1/sessions/s/signals",
						fmt.Sprintf(`{"signal_id":%q,"request_id":%q,"payload":{"approval":{"approved":true}}}`, signalID, reqID))
					outcomes[i] = fmt.Sprintf("%d %v", code, out["outcome"])
					if out["outcome"] == nil {
						outcomes[i] = fmt.Sprintf("%d %v", code, out)
					}
				})
			}
			wg.Wait()
			completed := 0
			for _, o := range outcomes {
				if strings.Contains(o, "completed") {
					completed++
				}
			}
			t.Logf("outcomes: %q", outcomes)
			if got := refunds.Load(); got != 1 {
				t.Errorf("%d refunds", got)
			}
			if tc.sameReqID && completed != n || !tc.sameReqID && completed != 1 {
				t.Errorf("%d approvals completed", completed)
			}
			if n, _ := filepath.Glob(filepath.Join(ckpts, "*.ckpt")); len(n) != 0 {
				t.Errorf("%d checkpoints left", len(n))
			}
			_, out = post(urls[len(urls)-1], "/v1/sessions/s/messages", `{"content":"where is order 8?"}`)
			if out["outcome"] != "completed" {
				t.Errorf("the turn after: %v", out)
			}
		})
	}
}
