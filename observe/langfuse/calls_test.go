package langfuse_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/armature-go/armature/graph"
	"github.com/armature-go/armature/llm"
	"github.com/armature-go/armature/llm/llmtest"
	"github.com/armature-go/armature/observe/langfuse"
	"github.com/armature-go/armature/observe/langfuse/langfusetest"
	"github.com/armature-go/armature/prompt"
)

func ptrTo[T any](v T) *T { return &v }

var answer = graph.NewField[string]("answer")

// askGraph is one node calling the provider with req under ctxFn's
// context.
func askGraph(t *testing.T, p llm.Provider, req *llm.Request, ctxFn func(context.Context) context.Context) *graph.Graph {
	t.Helper()
	g, err := graph.NewBuilder(graph.MustSchema(answer)).
		AddNode("ask", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			if ctxFn != nil {
				ctx = ctxFn(ctx)
			}
			r := *req
			resp, err := llm.Complete(ctx, p, &r)
			if err != nil {
				return nil, err
			}
			return answer.Set(resp.Message.Text()), nil
		}).
		AddEdge("ask", graph.End).SetEntry("ask").Compile()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func reply(text string, prompt, completion int) llmtest.Step {
	s := llmtest.Reply(text)
	s.Response.Raw = json.RawMessage(`{"id":"resp-1","model":"model-v2"}`)
	s.Response.Usage = llm.Usage{PromptTokens: &prompt, CompletionTokens: &completion}
	return s
}

// modeled is a scripted provider naming its model and system.
type modeled struct{ *llmtest.Provider }

func (modeled) Model() string  { return "m" }
func (modeled) System() string { return "test-system" }

func provider(steps ...llmtest.Step) llm.Provider { return modeled{llmtest.New(steps...)} }

func generation(t *testing.T, tr *langfusetest.Trace) *langfusetest.Observation {
	t.Helper()
	var g *langfusetest.Observation
	langfusetest.Walk(tr.Observations, func(o *langfusetest.Observation) {
		if o.Type == "generation" {
			g = o
		}
	})
	if g == nil {
		t.Fatalf("no generation in %s", names(tr.Observations))
	}
	return g
}

func TestGenerationPayloadOffByDefault(t *testing.T) {
	h := newHarness(t, langfuse.Config{})
	req := &llm.Request{Messages: []llm.Message{llm.UserText("secret question")},
		Config: llm.Config{Temperature: ptrTo(0.5), MaxTokens: ptrTo(20), Extras: map[string]any{"k": "v"}}}
	g := askGraph(t, provider(reply("secret answer", 7, 2)), req, nil)
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	tr := h.traces(t, g)[0]
	if got := names(tr.Observations); got != "span:ask(generation:openarmature.llm.complete)" {
		t.Fatalf("tree %s", got)
	}
	gen := generation(t, tr)
	f := gen.Fields
	if f["model"] != "m" || f["level"] != "DEFAULT" || gen.Metadata()["system"] != "test-system" {
		t.Errorf("fields %v", f)
	}
	if u, _ := f["usage"].(map[string]any); u["input"] != int64(7) || u["output"] != int64(2) || len(u) != 2 {
		t.Errorf("usage %v (total not reported: omitted)", f["usage"])
	}
	if mp, _ := f["modelParameters"].(map[string]any); mp["temperature"] != 0.5 || mp["max_tokens"] != int64(20) {
		t.Errorf("modelParameters %v", f["modelParameters"])
	}
	md := gen.Metadata()
	if md["response_model"] != "model-v2" || md["response_id"] != "resp-1" || md["finish_reason"] != "stop" {
		t.Errorf("metadata %v", md)
	}
	for _, k := range []string{"input", "output"} {
		if _, ok := f[k]; ok {
			t.Errorf("payload field %s emitted with the payload off", k)
		}
	}
	if _, ok := md["request_extras"]; ok {
		t.Error("request_extras emitted with the payload off")
	}
	for _, ev := range h.srv.Events() {
		b, _ := json.Marshal(ev.Body)
		if strings.Contains(string(b), "secret") {
			t.Errorf("payload leaked in %s: %s", ev.Type, b)
		}
	}
}

func TestGenerationPayloadAndTruncation(t *testing.T) {
	h := newHarness(t, langfuse.Config{CaptureProviderPayload: true, PayloadMaxBytes: 256})
	long := strings.Repeat("x", 500)
	req := &llm.Request{Messages: []llm.Message{llm.SystemText("be brief"), llm.UserText(long)},
		Config: llm.Config{Extras: map[string]any{"k": "v"}}}
	g := askGraph(t, provider(reply("ok", 1, 1)), req, nil)
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	gen := generation(t, h.traces(t, g)[0])
	in, isStr := gen.Fields["input"].(string)
	if !isStr || len(in) > 256 || !strings.HasSuffix(in, " bytes total]") {
		t.Errorf("input %v: want the raw truncated string with its marker", gen.Fields["input"])
	}
	if gen.Fields["output"] != "ok" {
		t.Errorf("output %v", gen.Fields["output"])
	}
	if ex, _ := gen.Metadata()["request_extras"].(map[string]any); ex["k"] != "v" {
		t.Errorf("request_extras %v", gen.Metadata()["request_extras"])
	}

	// Within the cap the input is the message list itself.
	h2 := newHarness(t, langfuse.Config{CaptureProviderPayload: true})
	g2 := askGraph(t, provider(reply("ok", 1, 1)), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}}, nil)
	h2.attach(t, g2)
	if _, err := g2.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	msgs, _ := generation(t, h2.traces(t, g2)[0]).Fields["input"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["role"] != "user" {
		t.Errorf("input %v", msgs)
	}
}

func TestFailedGeneration(t *testing.T) {
	h := newHarness(t, langfuse.Config{})
	fail := &llm.ProviderError{Cat: "provider_rate_limit", Provider: "x", Op: "complete", Code: "rate_limited", Message: "slow down"}
	g := askGraph(t, provider(llmtest.Fail(fail)), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}}, nil)
	h.attach(t, g)
	_, _ = g.Invoke(context.Background(), nil)
	tr := h.traces(t, g)[0]
	gen := generation(t, tr)
	if gen.Fields["level"] != "ERROR" || gen.Fields["statusMessage"] != "provider_rate_limit" {
		t.Errorf("fields %v", gen.Fields)
	}
	if md := gen.Metadata(); md["error_type"] != "rate_limited" || md["error_message"] != "slow down" {
		t.Errorf("metadata %v", md)
	}
	if node := tr.Observations[0]; node.Fields["level"] != "ERROR" || node.Fields["statusMessage"] != "provider_rate_limit" {
		t.Errorf("node %v", node.Fields)
	}
}

func TestPromptLinkageAndTokenBudget(t *testing.T) {
	h := newHarness(t, langfuse.Config{})
	budget := &llm.TokenBudget{InputMaxTokens: ptrTo(5)}
	id := &llm.PromptIdentity{Name: "classify", Version: "3", Label: "production", TemplateHash: "t", RenderedHash: "r",
		ObservabilityEntities: map[string]any{langfuse.PromptEntityKey: prompt.LangfusePromptRef{Name: "classify", Version: 3}}}
	ctxFn := func(ctx context.Context) context.Context {
		ctx = llm.WithActivePrompt(ctx, id, budget)
		return llm.WithActivePromptGroup(ctx, &llm.PromptGroupIdentity{GroupName: "triage"})
	}
	g := askGraph(t, provider(reply("ok", 9, 1)), &llm.Request{Messages: []llm.Message{llm.UserText("hi")}}, ctxFn)
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	gen := generation(t, h.traces(t, g)[0])
	f, md := gen.Fields, gen.Metadata()
	if f["promptName"] != "classify" || f["promptVersion"] != int64(3) {
		t.Errorf("prompt link %v/%v", f["promptName"], f["promptVersion"])
	}
	if p, _ := md["prompt"].(map[string]any); p["name"] != "classify" || p["version"] != "3" || p["rendered_hash"] != "r" {
		t.Errorf("metadata.prompt %v", md["prompt"])
	}
	if md["prompt_group_name"] != "triage" || md["token_budget_exceeded"] != true {
		t.Errorf("metadata %v", md)
	}
	if f["level"] != "WARNING" || f["statusMessage"] != "token budget exceeded: input 9 > 5" {
		t.Errorf("level %v status %v", f["level"], f["statusMessage"])
	}
}

func TestToolObservation(t *testing.T) {
	h := newHarness(t, langfuse.Config{CaptureProviderPayload: true})
	out := graph.NewField[any]("out")
	g, err := graph.NewBuilder(graph.MustSchema(out)).
		AddNode("run", func(ctx context.Context, _ graph.State) (graph.Update, error) {
			r, err := graph.CallTool(ctx, graph.ToolCall{Name: "weather", ID: "call-1", Arguments: map[string]any{"city": "Paris"}},
				func(context.Context) (any, error) { return map[string]any{"c": 20}, nil })
			if err != nil {
				return nil, err
			}
			_, _ = graph.CallTool(ctx, graph.ToolCall{Name: "broken"}, func(context.Context) (any, error) { return nil, errors.New("down") })
			return out.Set(r), nil
		}).AddEdge("run", graph.End).SetEntry("run").Compile()
	if err != nil {
		t.Fatal(err)
	}
	h.attach(t, g)
	if _, err := g.Invoke(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	tr := h.traces(t, g)[0]
	tools := tr.Observations[0].Children
	if len(tools) != 2 || tools[0].Type != "tool" || tools[0].Name() != langfuse.ToolName {
		t.Fatalf("tree %s", names(tr.Observations))
	}
	ok, failed := tools[0], tools[1]
	if ok.Metadata()["openarmature_tool_name"] != "weather" || ok.Metadata()["openarmature_tool_call_id"] != "call-1" {
		t.Errorf("metadata %v", ok.Metadata())
	}
	if in, _ := ok.Fields["input"].(map[string]any); in["city"] != "Paris" {
		t.Errorf("input %v", ok.Fields["input"])
	}
	if failed.Fields["level"] != "ERROR" || failed.Metadata()["error_message"] != "down" {
		t.Errorf("failed tool %v", failed.Fields)
	}
	if _, has := failed.Fields["output"]; has {
		t.Error("failed tool has an output")
	}
}
