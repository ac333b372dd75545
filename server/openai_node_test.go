package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/internal/npmtest"
	"github.com/armature-go/armature/internal/servertest"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
)

// openaiNodeVersion is the official openai npm package the interop test
// drives the endpoint with.
const openaiNodeVersion = "7.57.0"

// nodeScript drives the endpoint with the openai npm client: a
// completion, a stream with usage, a rate limit without retries, and a
// rate limit the client retries past. It prints one JSON line per case.
const nodeScript = `
import OpenAI from "openai";
const base = process.env.BASE_URL;
const out = (o) => console.log(JSON.stringify(o));
const client = new OpenAI({ baseURL: base, apiKey: "unused", maxRetries: 0 });

const r = await client.chat.completions.create({ model: "demo", messages: [{ role: "user", content: "hello" }] });
out({ case: "completion", content: r.choices[0].message.content, finish: r.choices[0].finish_reason, usage: r.usage });

const stream = await client.chat.completions.create({ model: "demo", stream: true, stream_options: { include_usage: true },
  messages: [{ role: "user", content: "stream please" }] });
let text = "", usage = null, finish = null, chunks = 0;
for await (const c of stream) {
  chunks++;
  if (c.choices?.[0]?.delta?.content) text += c.choices[0].delta.content;
  if (c.choices?.[0]?.finish_reason) finish = c.choices[0].finish_reason;
  if (c.usage) usage = c.usage;
}
out({ case: "stream", content: text, finish, usage, chunks });

try {
  await client.chat.completions.create({ model: "demo", messages: [{ role: "user", content: "limited" }] });
  out({ case: "ratelimit", error: null });
} catch (e) {
  out({ case: "ratelimit", status: e.status, name: e.constructor.name, retryAfter: e.headers?.get?.("retry-after") ?? null });
}

const tools = await client.chat.completions.create({ model: "demo", stream: true,
  messages: [{ role: "user", content: "where is order 7?" }] });
let toolText = "", toolChunks = 0;
for await (const c of tools) {
  toolChunks++;
  if (c.choices?.[0]?.delta?.content) toolText += c.choices[0].delta.content;
}
out({ case: "tools", content: toolText, chunks: toolChunks });

const retrying = new OpenAI({ baseURL: base, apiKey: "unused", maxRetries: 2 });
const t0 = Date.now();
const rr = await retrying.chat.completions.create({ model: "demo", messages: [{ role: "user", content: "retry me" }] });
out({ case: "retry", content: rr.choices[0].message.content, waitedMs: Date.now() - t0 });
`

// TestOpenAINodeClient: the official openai npm package, under Node,
// reads the endpoint's completions, streams (tool progress frames and
// the include_usage chunk among them), usage and finish reasons, and its
// rate-limit error and retry behave as against OpenAI.
func TestOpenAINodeClient(t *testing.T) {
	dir := npmtest.Install(t, "openai", openaiNodeVersion)
	reply := func(text string, in, out int, finish llm.FinishReason) llmtest.Step {
		s := llmtest.Reply(text)
		s.Response.Usage = llm.Usage{PromptTokens: new(in), CompletionTokens: new(out), TotalTokens: new(in + out)}
		s.Response.FinishReason = finish
		return s
	}
	limited := func(after time.Duration) llmtest.Step {
		return llmtest.Fail(&llm.ProviderError{Cat: errcat.ProviderRateLimit, Provider: "openai", Op: "complete", StatusCode: 429,
			Message: "Rate limit reached", RetryAfter: after})
	}
	p := llmtest.New(
		reply("Hello from Armature.", 11, 5, llm.FinishStop),
		reply("A streamed answer, in pieces.", 7, 9, llm.FinishLength),
		limited(30*time.Second),
		llmtest.CallTools(llm.ToolCall{ID: "call_7", Name: "lookup_order", Arguments: json.RawMessage(`{"order":"7"}`)}),
		reply("Order 7 has shipped.", 5, 5, llm.FinishStop),
		limited(time.Second),
		reply("after the retry", 3, 4, llm.FinishStop),
	)
	lookup, err := agent.NewTool("lookup_order", "Look up an order.", func(ctx context.Context, in struct {
		Order string `json:"order"`
	}) (string, error) {
		return "order " + in.Order + ": shipped", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	a, err := agent.New(agent.Config{Provider: p, Tools: []agent.Tool{lookup}})
	if err != nil {
		t.Fatal(err)
	}
	ts := servertest.New(t, a)
	got := runNode(t, dir, "interop.mjs", nodeScript, "BASE_URL="+ts.URL+"/v1")
	usage := func(c map[string]any) float64 {
		u, _ := c["usage"].(map[string]any)
		n, _ := u["total_tokens"].(float64)
		return n
	}
	if c := got["completion"]; c["content"] != "Hello from Armature." || c["finish"] != "stop" || usage(c) != 16 {
		t.Errorf("completion: %v", c)
	}
	if c := got["stream"]; c["content"] != "A streamed answer, in pieces." || c["finish"] != "length" || usage(c) != 16 {
		t.Errorf("stream: %v", c)
	}
	if c := got["ratelimit"]; c["status"] != float64(429) || !strings.Contains(c["name"].(string), "RateLimit") || c["retryAfter"] != "30" {
		t.Errorf("rate limit: %v, want a 429 RateLimitError with Retry-After 30", c)
	}
	if c := got["tools"]; c["content"] != "Order 7 has shipped." {
		t.Errorf("streamed turn with server-side tool progress frames: %v", c)
	}
	if c := got["retry"]; c["content"] != "after the retry" || c["waitedMs"].(float64) < 900 {
		t.Errorf("retry: %v, want the answer after a retry that honoured Retry-After", c)
	}
}

// runNode runs script (written to name in dir, where the npm packages
// are installed) under Node with env added, and returns the JSON lines
// it printed by their "case".
func runNode(t *testing.T, dir, name, script string, env ...string) map[string]map[string]any {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", path)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s\n%s", err, stdout, stderr.String())
	}
	got := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(stdout))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("node printed %q", sc.Text())
		}
		c, _ := line["case"].(string)
		got[c] = line
	}
	return got
}
