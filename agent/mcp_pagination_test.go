package agent_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
)

// A server (buggy or hostile) whose tools/list always answers with a
// nextCursor does not make MCPTools (and MCPClient.Tools) page forever,
// collecting the same tools again and again, until the caller's context
// ends: the listing stops, with an error, when a cursor repeats.
func TestMCPToolsEndlessPagination(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "loop", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	var pages atomic.Int64
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if lr, ok := req.(*mcp.ListToolsRequest); ok && lr.Params != nil {
				lr.Params.Cursor = "" // every page is the first
			}
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				pages.Add(1)
				r.NextCursor = "same-cursor"
			}
			return res, err
		}
	})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := agent.ConnectMCP(ctx, ct)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	start := time.Now()
	tools, err := agent.MCPTools(lctx, cs)
	t.Logf("MCPTools returned after %v, %d pages listed, %d tools, err %v", time.Since(start).Round(time.Millisecond), pages.Load(), len(tools), err)
	if lctx.Err() != nil {
		t.Fatalf("MCPTools listed %d pages with the same cursor and ran until the caller's deadline (%v)", pages.Load(), err)
	}
	if !errors.Is(err, agent.ErrMCPToolListUnbounded) || tools != nil {
		t.Fatalf("MCPTools = %d tools, %v; want none and ErrMCPToolListUnbounded", len(tools), err)
	}
	if n := pages.Load(); n != 2 {
		t.Errorf("%d pages listed, want 2 (the second repeats the first's cursor)", n)
	}
}

// pagedServer answers tools/list with page(n), n counting from 0, and
// returns how many pages were asked for.
func pagedServer(t *testing.T, page func(n int64, cursor string) *mcp.ListToolsResult) (*mcp.ClientSession, *atomic.Int64) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "paged", Version: "1"}, nil)
	var pages atomic.Int64
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if lr, ok := req.(*mcp.ListToolsRequest); ok {
				cursor := ""
				if lr.Params != nil {
					cursor = lr.Params.Cursor
				}
				return page(pages.Add(1)-1, cursor), nil
			}
			return next(ctx, method, req)
		}
	})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := agent.ConnectMCP(ctx, ct)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, &pages
}

func toolsNamed(prefix string, n int) []*mcp.Tool {
	tools := make([]*mcp.Tool, n)
	for i := range tools {
		tools[i] = &mcp.Tool{Name: fmt.Sprintf("%s%d", prefix, i), InputSchema: map[string]any{"type": "object"}}
	}
	return tools
}

// The listing follows the server's cursors page by page, and stops with
// ErrMCPToolListUnbounded when a cursor comes back (a cycle of several
// pages too), after MaxMCPToolPages pages, or past MaxMCPTools tools; a
// list within the bounds is read whole.
func TestMCPToolsPaginationBounded(t *testing.T) {
	cases := []struct {
		name      string
		page      func(n int64, cursor string) *mcp.ListToolsResult
		wantErr   bool
		wantPages int64
		wantTools int
	}{
		{"three pages", func(n int64, cursor string) *mcp.ListToolsResult {
			next := map[string]string{"": "b", "b": "c", "c": ""}[cursor]
			return &mcp.ListToolsResult{Tools: toolsNamed("p"+cursor, 2), NextCursor: next}
		}, false, 3, 6},
		{"a null tool is left out", func(n int64, cursor string) *mcp.ListToolsResult {
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{nil, {Name: "x", InputSchema: map[string]any{"type": "object"}}}}
		}, false, 1, 1},
		{"a cycle of cursors", func(n int64, cursor string) *mcp.ListToolsResult {
			next := map[string]string{"": "a", "a": "b", "b": "c", "c": "a"}[cursor]
			return &mcp.ListToolsResult{Tools: toolsNamed("p"+cursor, 1), NextCursor: next}
		}, true, 4, 0},
		{"always a new cursor", func(n int64, cursor string) *mcp.ListToolsResult {
			return &mcp.ListToolsResult{NextCursor: fmt.Sprint(n + 1)}
		}, true, agent.MaxMCPToolPages, 0},
		{"the last page allowed", func(n int64, cursor string) *mcp.ListToolsResult {
			if n+1 == agent.MaxMCPToolPages {
				return &mcp.ListToolsResult{Tools: toolsNamed("last", 1)}
			}
			return &mcp.ListToolsResult{NextCursor: fmt.Sprint(n + 1)}
		}, false, agent.MaxMCPToolPages, 1},
		{"too many tools", func(n int64, cursor string) *mcp.ListToolsResult {
			return &mcp.ListToolsResult{Tools: toolsNamed(fmt.Sprintf("p%d_", n), 3000), NextCursor: fmt.Sprint(n + 1)}
		}, true, 4, 0},
		{"as many tools as allowed", func(n int64, cursor string) *mcp.ListToolsResult {
			next := ""
			if n < 9 {
				next = fmt.Sprint(n + 1)
			}
			return &mcp.ListToolsResult{Tools: toolsNamed(fmt.Sprintf("p%d_", n), agent.MaxMCPTools/10), NextCursor: next}
		}, false, 10, agent.MaxMCPTools},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cs, pages := pagedServer(t, c.page)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			tools, err := agent.MCPTools(ctx, cs)
			if got := errors.Is(err, agent.ErrMCPToolListUnbounded); got != c.wantErr {
				t.Fatalf("err = %v, want ErrMCPToolListUnbounded: %v", err, c.wantErr)
			}
			if !c.wantErr && err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([2]int64{c.wantPages, int64(c.wantTools)}, [2]int64{pages.Load(), int64(len(tools))}); d != "" {
				t.Errorf("pages and tools (-want +got):\n%s", d)
			}
		})
	}
}
