package agent_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/armature-go/armature/agent"
)

// A tool whose amount has two decimals ({"type": "number", "multipleOf":
// 0.01}: what zod's z.number().multipleOf(0.01) gives, in a TypeScript
// SDK server) takes 19.99 and 0.07: the arguments are checked with exact
// decimal numbers, not binary doubles (19.99 / 0.01 is 1998.9999999999998
// in doubles), as the official TypeScript SDK server accepts them.
func TestMCPMultipleOfDecimal(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "pay", Version: "1"}, nil)
	var got []string
	s.AddTool(&mcp.Tool{Name: "refund", InputSchema: map[string]any{
		"type": "object", "required": []any{"amount"},
		"properties": map[string]any{"amount": map[string]any{"type": "number", "multipleOf": 0.01}},
	}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		got = append(got, string(req.Params.Arguments))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil
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
	tools, err := agent.MCPTools(ctx, cs)
	if err != nil || len(tools) != 1 {
		t.Fatal(tools, err)
	}
	for _, args := range []string{`{"amount":19.99}`, `{"amount":0.07}`} {
		if out, err := tools[0].Call(ctx, []byte(args)); err != nil {
			t.Errorf("refund %s refused before it reached the server: %q, %v", args, out, err)
		}
	}
}

// The argument check reads numbers exactly for every numeric keyword:
// bounds, integer type, enum and const compare decimals as written, and
// a number too large to compute with is refused rather than validated
// for ages. Format stays an annotation (left to the server) in every
// draft.
func TestMCPArgumentsExactNumbers(t *testing.T) {
	type call struct {
		args string
		ok   bool
	}
	cases := []struct {
		name   string
		schema map[string]any
		calls  []call
	}{
		{"multipleOf 0.01", map[string]any{"type": "number", "multipleOf": 0.01}, []call{
			{"19.99", true}, {"0.07", true}, {"100", true}, {"1e-2", true}, {"-3.10", true},
			{"19.991", false}, {"0.005", false},
		}},
		{"multipleOf 0.1", map[string]any{"multipleOf": 0.1}, []call{{"0.3", true}, {"0.35", false}}},
		{"multipleOf 3", map[string]any{"type": "integer", "multipleOf": 3}, []call{{"9", true}, {"9.0", true}, {"10", false}, {"9.5", false}}},
		{"minimum and maximum", map[string]any{"type": "number", "minimum": 0.1, "maximum": 100}, []call{
			{"0.1", true}, {"100", true}, {"50.5", true},
			{"0.09999999999999999", false}, {"100.5", false}, {"-1", false},
		}},
		{"exclusive bounds", map[string]any{"exclusiveMinimum": 0, "exclusiveMaximum": 1}, []call{
			{"0.01", true}, {"0.99", true}, {"0", false}, {"1", false}, {"1.0", false},
		}},
		// 2^53+1 is 2^53 as a double.
		{"maximum 2^53", map[string]any{"type": "integer", "maximum": 9007199254740992}, []call{
			{"9007199254740992", true}, {"9007199254740993", false}, {"9007199254740992.5", false},
		}},
		{"integer", map[string]any{"type": "integer"}, []call{
			{"3", true}, {"3.0", true}, {"1e2", true}, {"12345678901234567890", true}, {"-0", true},
			{"3.5", false}, {`"3"`, false}, {"1e-2", false},
		}},
		{"enum of numbers", map[string]any{"enum": []any{0.1, 0.2, 5}}, []call{
			{"0.1", true}, {"0.10", true}, {"5.0", true}, {"0.3", false}, {`"0.1"`, false},
		}},
		{"const number", map[string]any{"const": 1}, []call{{"1", true}, {"1.0", true}, {"1.5", false}}},
		{"number in an array", map[string]any{"type": "array", "items": map[string]any{"type": "number", "multipleOf": 0.01}}, []call{
			{"[19.99, 0.07, 1]", true}, {"[19.99, 0.075]", false},
		}},
		{"huge exponent", map[string]any{"type": "number"}, []call{
			{"1e308", true}, {"1e400", true}, {"1e-400", true}, {"1e401", false}, {"1e999999", false}, {"1e9999999", false}, {"1e-9999999", false},
		}},
		{"long number", map[string]any{"type": "number", "minimum": 0}, []call{
			{"1" + strings.Repeat("0", 399), true}, {"1" + strings.Repeat("0", 400), false},
		}},
		{"format left to the server", map[string]any{"type": "string", "format": "email"}, []call{{`"not an email"`, true}, {"1", false}}},
	}
	var schemas []map[string]any
	for _, c := range cases {
		schemas = append(schemas, c.schema)
	}
	// A draft-07 schema (zod-to-json-schema writes one): format is not
	// asserted there either.
	schemas = append(schemas, map[string]any{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
		"properties": map[string]any{"v": map[string]any{"type": "string", "format": "uri"}}})
	tools, received := exactServer(t, schemas)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want, got []string
			for _, cl := range c.calls {
				args := `{"v":` + cl.args + `}`
				_, err := tools[i].Call(context.Background(), []byte(args))
				var ae *agent.ArgumentsError
				switch {
				case err == nil:
					got = append(got, cl.args+" taken")
				case errors.As(err, &ae):
					got = append(got, cl.args+" refused")
				default:
					t.Fatalf("%s: %v", args, err)
				}
				if cl.ok {
					want = append(want, cl.args+" taken")
				} else {
					want = append(want, cl.args+" refused")
				}
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("calls (-want +got):\n%s", d)
			}
		})
	}
	if _, err := tools[len(cases)].Call(context.Background(), []byte(`{"v":"not a uri"}`)); err != nil {
		t.Errorf("draft-07 format asserted: %v", err)
	}
	if n := received(); n == 0 {
		t.Fatal("no call reached the server")
	}
}

// The model is told where and why its arguments do not fit, without the
// schema's internal URL, and a long list of failures is cut.
func TestMCPArgumentsMismatchMessage(t *testing.T) {
	tools, received := exactServer(t, []map[string]any{
		{"type": "number", "multipleOf": 0.01, "maximum": 10},
		{"type": "array", "items": map[string]any{"type": "integer"}},
	})
	ctx := context.Background()
	_, err := tools[0].Call(ctx, []byte(`{"v":19.991}`))
	var ae *agent.ArgumentsError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want an *ArgumentsError", err)
	}
	msg := err.Error()
	for _, want := range []string{"agent: tool t0: invalid arguments: ", "'/v'", "multipleOf", "maximum"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "urn:") {
		t.Errorf("message %q names the schema's URL", msg)
	}
	items := make([]string, 100)
	for i := range items {
		items[i] = "0.5"
	}
	_, err = tools[1].Call(ctx, []byte(`{"v":[`+strings.Join(items, ",")+`]}`))
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want an *ArgumentsError", err)
	}
	if lines := strings.Count(err.Error(), "\n"); lines > 25 || !strings.Contains(err.Error(), "more") {
		t.Errorf("%d lines, want the failures cut:\n%s", lines, err)
	}
	if n := received(); n != 0 {
		t.Errorf("%d calls reached the server", n)
	}
}

// exactServer serves one tool per schema, t0, t1, …, whose argument "v"
// has that schema, and returns them as MCPTools offers them, in order,
// and a count of the calls the server received.
func exactServer(t *testing.T, schemas []map[string]any) ([]agent.Tool, func() int) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "exact", Version: "1"}, nil)
	var mu sync.Mutex
	calls := 0
	for i, sc := range schemas {
		in := map[string]any{"type": "object", "required": []any{"v"}, "properties": map[string]any{"v": sc}}
		if _, ok := sc["$schema"]; ok {
			in = sc
		}
		s.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%d", i), InputSchema: in}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			calls++
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	}
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
	listed, err := agent.MCPTools(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]agent.Tool{}
	for _, tl := range listed {
		byName[tl.Definition.Name] = tl
	}
	tools := make([]agent.Tool, len(schemas))
	for i := range schemas {
		if tools[i] = byName[fmt.Sprintf("t%d", i)]; tools[i].Call == nil {
			t.Fatalf("tool t%d not offered", i)
		}
	}
	return tools, func() int { mu.Lock(); defer mu.Unlock(); return calls }
}
