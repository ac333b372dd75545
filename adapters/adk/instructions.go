package adk

import (
	"strings"

	adkagent "google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/util/instructionutil"
	"google.golang.org/genai"

	"github.com/armature-go/armature/adapter"
)

// setInstruction gives acfg the agent's instruction own so that a turn's
// per-request instructions replace it in the turn's model calls (in the
// request's system instruction, ADK-Go's other system text, the agent's
// name and description, staying), for any model.LLM: the workspace
// model's bridge and ADK-Go's Gemini client alike. A turn without them
// gets what ADK-Go's static Instruction gives: own with the session
// state injected, or, literal (the workspace's system: prompt,
// Config.System), own as written. An agent without an instruction gets
// the per-request ones appended by a BeforeModelCallback (instructions)
// instead.
func setInstruction(acfg *llmagent.Config, own string, literal bool) {
	if own == "" {
		return
	}
	acfg.InstructionProvider = func(ctx adkagent.ReadonlyContext) (string, error) {
		if text, ok := adapter.InstructionsOf(ctx); ok {
			return text, nil
		}
		if literal {
			return own, nil
		}
		return instructionutil.InjectSessionState(ctx, own)
	}
}

// instructions is the BeforeModelCallback completing setInstruction for
// a turn with per-request instructions: an agent without an instruction
// (own "") gets them appended to the system instruction as ADK-Go
// appends one, and empty ones leave no empty text behind (ADK-Go appends
// what the InstructionProvider returns, "" too).
func instructions(own string) llmagent.BeforeModelCallback {
	return func(ctx adkagent.Context, req *model.LLMRequest) (*model.LLMResponse, error) {
		text, ok := adapter.InstructionsOf(ctx)
		if !ok || (own != "" && text != "") {
			return nil, nil
		}
		if req.Config == nil {
			req.Config = &genai.GenerateContentConfig{}
		}
		if own == "" {
			req.Config.SystemInstruction = appendInstruction(req.Config.SystemInstruction, text)
		} else {
			req.Config.SystemInstruction = trimEmpty(req.Config.SystemInstruction)
		}
		return nil, nil
	}
}

// appendInstruction returns si with text appended as ADK-Go appends an
// instruction (to the last text part, after "\n\n"); si is not changed.
func appendInstruction(si *genai.Content, text string) *genai.Content {
	if text == "" {
		return si
	}
	if si == nil {
		return genai.NewContentFromText(text, genai.RoleUser)
	}
	out := &genai.Content{Role: si.Role, Parts: append([]*genai.Part(nil), si.Parts...)}
	if n := len(out.Parts); n > 0 && out.Parts[n-1] != nil && out.Parts[n-1].Text != "" {
		p := *out.Parts[n-1]
		p.Text += "\n\n" + text
		out.Parts[n-1] = &p
		return out
	}
	out.Parts = append(out.Parts, genai.NewPartFromText(text))
	return out
}

// trimEmpty returns si without what appending an empty instruction left
// (an empty text part, or a trailing "\n\n" on the last part): nil when
// nothing else is left; si is not changed.
func trimEmpty(si *genai.Content) *genai.Content {
	if si == nil {
		return nil
	}
	out := &genai.Content{Role: si.Role, Parts: make([]*genai.Part, 0, len(si.Parts))}
	for _, p := range si.Parts {
		if p != nil && p.Text == "" && p.InlineData == nil && p.FileData == nil && p.FunctionCall == nil && p.FunctionResponse == nil {
			continue
		}
		out.Parts = append(out.Parts, p)
	}
	if n := len(out.Parts); n > 0 && out.Parts[n-1] != nil && strings.HasSuffix(out.Parts[n-1].Text, "\n\n") {
		p := *out.Parts[n-1]
		p.Text = strings.TrimSuffix(p.Text, "\n\n")
		out.Parts[n-1] = &p
	}
	if len(out.Parts) == 0 {
		return nil
	}
	return out
}

// chain is one BeforeModelCallback running each of cbs in order until
// one answers (a response or an error), as ADK-Go runs a list of them:
// ADK-Go's own bookkeeping for each callback of the list costs
// allocations on every model call, so the adapter's callbacks are one.
func chain(cbs ...llmagent.BeforeModelCallback) llmagent.BeforeModelCallback {
	return func(ctx adkagent.Context, req *model.LLMRequest) (*model.LLMResponse, error) {
		for _, cb := range cbs {
			if resp, err := cb(ctx, req); resp != nil || err != nil {
				return resp, err
			}
		}
		return nil, nil
	}
}
