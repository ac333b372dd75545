package server_test

import (
	"context"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// TestResponsesGoClient drives the Responses API with the official Go
// client: a response through the agent's server-side tool loop, its
// retrieval, a continuation, a stream read through the typed event
// union, and an approval answered with an mcp_approval_response item.
func TestResponsesGoClient(t *testing.T) {
	ts := newOpenAIServer(t)
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey(oaiToken),
		option.WithHTTPClient(ts.Client()), option.WithMaxRetries(0))

	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:        "demo",
		Instructions: openai.String("Be brief."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("where is order 4?")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "Here is what I found: order 4: shipped, arriving Thursday"; resp.OutputText() != want || resp.Status != "completed" {
		t.Errorf("output text %q, status %q", resp.OutputText(), resp.Status)
	}
	if len(resp.Output) != 2 || resp.Output[0].Type != "mcp_call" {
		t.Fatalf("output %+v", resp.Output)
	}
	if c := resp.Output[0].AsMcpCall(); c.Name != "lookup_order" || c.Output != "order 4: shipped, arriving Thursday" || c.ServerLabel != "armature" {
		t.Errorf("mcp_call %+v", c)
	}
	got, err := client.Responses.Get(ctx, resp.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != resp.ID || got.OutputText() != resp.OutputText() || got.Instructions.OfString != "Be brief." {
		t.Errorf("Get = %s %q", got.ID, got.OutputText())
	}

	next, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              "demo",
		PreviousResponseID: openai.String(resp.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfString: openai.String("thanks")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(next.OutputText(), `You said: "thanks".`) || next.PreviousResponseID != resp.ID {
		t.Errorf("continued: %q (previous %q)", next.OutputText(), next.PreviousResponseID)
	}

	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: "demo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("where is order 9?")},
	})
	var text strings.Builder
	var final responses.Response
	var mcpDone int
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.AsResponseOutputTextDelta().Delta)
		case "response.mcp_call.completed":
			mcpDone++
		case "response.completed":
			final = ev.AsResponseCompleted().Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if final.OutputText() != text.String() || text.Len() == 0 || mcpDone != 1 || final.Status != "completed" {
		t.Errorf("streamed %q, final %q, %d mcp calls completed", text.String(), final.OutputText(), mcpDone)
	}

	susp, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: "demo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("refund order 3")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var approval responses.ResponseOutputItemMcpApprovalRequest
	for _, it := range susp.Output {
		if it.Type == "mcp_approval_request" {
			approval = it.AsMcpApprovalRequest()
		}
	}
	if approval.ID == "" || approval.Name != "issue_refund" {
		t.Fatalf("no approval request in %+v", susp.Output)
	}
	done, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model:              "demo",
		PreviousResponseID: openai.String(susp.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMcpApprovalResponse(approval.ID, true),
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(done.OutputText(), "refunded $30.00 for order 3") || done.Output[0].AsMcpCall().ApprovalRequestID != approval.ID {
		t.Errorf("approved: %q %+v", done.OutputText(), done.Output)
	}
}
