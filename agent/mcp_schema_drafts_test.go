//go:build unix

package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
)

// Doc (agent/mcp.go, MCPTools): "format is never asserted (left to the
// server), whatever the draft." Draft-07 formats outside mcpSchemaFormats.
func TestMCPDraft07FormatsNotAsserted(t *testing.T) {
	formats := []struct{ format, value string }{
		{"regex", `"(unclosed"`},
		{"idn-email", `"not an email"`},
		{"idn-hostname", `"-bad-.-host-"`},
		{"email", `"not an email"`},
		{"ipv4", `"999.1.1.1"`},
	}
	var schemas []map[string]any
	for _, f := range formats {
		schemas = append(schemas, map[string]any{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
			"properties": map[string]any{"v": map[string]any{"type": "string", "format": f.format}}})
	}
	tools, _ := exactServer(t, schemas)
	for i, f := range formats {
		_, err := tools[i].Call(context.Background(), []byte(`{"v":`+f.value+`}`))
		var ae *agent.ArgumentsError
		if errors.As(err, &ae) {
			t.Errorf("draft-07 format %q asserted: %v", f.format, err)
		} else if err != nil {
			t.Errorf("format %q: %v", f.format, err)
		}
	}
}

// $ref to local $defs / definitions still validates; tricky numbers.
func TestMCPSchemaRefsAndNumbers(t *testing.T) {
	schemas := []map[string]any{
		{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": map[string]any{"n": map[string]any{"type": "integer", "maximum": 5}}, "type": "object",
			"properties": map[string]any{"v": map[string]any{"$ref": "#/$defs/n"}}},
		{"$schema": "http://json-schema.org/draft-07/schema#", "definitions": map[string]any{"n": map[string]any{"type": "integer", "maximum": 5}}, "type": "object",
			"properties": map[string]any{"v": map[string]any{"$ref": "#/definitions/n"}}},
		{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
			"properties": map[string]any{"v": map[string]any{"type": "array", "items": []any{map[string]any{"type": "integer"}}, "additionalItems": false}}},
	}
	tools, _ := exactServer(t, schemas)
	ctx := context.Background()
	check := func(i int, args string, ok bool) {
		_, err := tools[i].Call(ctx, []byte(args))
		var ae *agent.ArgumentsError
		if got := !errors.As(err, &ae); got != ok {
			t.Errorf("tool %d %s: taken=%v want %v (%v)", i, args, got, ok, err)
		}
	}
	check(0, `{"v":5}`, true)
	check(0, `{"v":6}`, false)
	check(0, `{"v":"x"}`, false)
	check(1, `{"v":6}`, false)
	check(1, `{"v":-0}`, true)
	check(1, `{"v":5E0}`, true)
	check(1, `{"v":5.00000000000000000001}`, false)
	check(2, `{"v":[1]}`, true)
	check(2, `{"v":[1,2]}`, false)
	check(2, `{"v":["a"]}`, false)
	// trailing garbage: old code (json.Unmarshal) refused it
	_, err := tools[0].Call(ctx, []byte(`{"v":1} {"v":9}`))
	if err == nil {
		t.Errorf("arguments with trailing data taken")
	} else {
		t.Logf("trailing data: %v", err)
	}
}

// Doc (ConnectMCP): "The same happens when the connection ends on its
// own (the server closed it)." A plain ConnectMCP session whose server
// hangs up, without the caller closing the session.
func TestMCPServerHangsUpEndsGroup(t *testing.T) {
	ctx := context.Background()
	pidfile := filepath.Join(t.TempDir(), "pid")
	cs, err := agent.ConnectMCP(ctx, launched(t, pidfile)())
	if err != nil {
		t.Fatal(err)
	}
	tools, err := agent.MCPTools(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range tools {
		if tl.Definition.Name == "hangup" {
			_, err = tl.Call(ctx, json.RawMessage(`{"text":"bye"}`))
			t.Logf("hangup: %v", err)
		}
	}
	pids := serverPids(t, pidfile)
	deadline := time.Now().Add(4 * time.Second)
	for {
		alive, parent := running(pids[0])
		if !alive {
			t.Logf("server gone without Close")
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("server pid %d (parent %s) still runs 4s after the connection ended on its own (no Close called)", pids[0], parent)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cs.Close()
	time.Sleep(500 * time.Millisecond)
	if alive, _ := running(pids[0]); alive {
		t.Errorf("server still runs after Close")
	}
}
