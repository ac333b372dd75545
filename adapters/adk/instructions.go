package adk

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"

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
		text, err := instructionutil.InjectSessionState(ctx, own)
		if err != nil {
			return "", instructionError(ctx, own, err)
		}
		return text, nil
	}
}

// placeholderPattern is the placeholder of ADK-Go's instruction
// templating (google.golang.org/adk/v2 v2.2.0,
// internal/llminternal.InjectSessionState, which
// instructionutil.InjectSessionState runs): braces, one or more, around
// text without braces. checkInstruction reads an instruction as it does.
var placeholderPattern = regexp.MustCompile(`{+[^{}]*}+`)

// A placeholder of an instruction, as ADK-Go's templating reads it
// (its replaceMatch): the text between the braces, spaces trimmed; a
// trailing ? makes it optional; "artifact." starts an artifact's name;
// otherwise a valid state name (an identifier, or one after app:,
// user: or temp:) names a session-state key, and anything else is left
// as written.
type placeholder struct {
	text     string // as written, braces included
	key      string // the state key or (artifact) the artifact's name
	artifact bool
	optional bool
}

// placeholders returns the placeholders of instruction that ADK-Go's
// templating resolves (state keys and artifacts), in order; the rest it
// leaves as written.
func placeholders(instruction string) []placeholder {
	var out []placeholder
	for _, m := range placeholderPattern.FindAllString(instruction, -1) {
		name := strings.TrimSpace(strings.Trim(m, "{}"))
		name, optional := strings.CutSuffix(name, "?")
		if file, ok := strings.CutPrefix(name, "artifact."); ok {
			out = append(out, placeholder{text: m, key: file, artifact: true, optional: optional})
			continue
		}
		if validStateName(name) {
			out = append(out, placeholder{text: m, key: name, optional: optional})
		}
	}
	return out
}

// validStateName is ADK-Go's isValidStateName: an identifier, or
// app:, user: or temp: and an identifier.
func validStateName(name string) bool {
	parts := strings.Split(name, ":")
	switch len(parts) {
	case 1:
		return isIdentifier(name)
	case 2:
		return slices.Contains([]string{"app", "user", "temp"}, parts[0]) && isIdentifier(parts[1])
	}
	return false
}

// isIdentifier is ADK-Go's isIdentifier (Python's str.isidentifier).
func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if i == 0 {
			if !unicode.IsLetter(r) && r != '_' {
				return false
			}
		} else if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' {
			return false
		}
	}
	return true
}

// checkInstruction refuses an instruction a turn could never be given:
// one with a placeholder ADK-Go's templating resolves and fails on when
// the session state lacks the key. Armature gives no way to set ADK-Go's
// session state, so a required placeholder ({key}, {app:key}, ...)
// would fail every turn; and the agent has no artifact service, so an
// artifact placeholder ({artifact.name}, optional or not) would too. An
// optional state placeholder ({key?}, empty when the key is unset) and
// braces around anything but a state name are accepted, as ADK-Go
// accepts them.
func checkInstruction(instruction string) error {
	for _, p := range placeholders(instruction) {
		switch {
		case p.artifact:
			return fmt.Errorf("%w: instruction: placeholder %s loads the ADK-Go artifact %q, and the agent has no artifact service, so every turn would fail; "+
				"put text meant literally in the agent's system: prompt, which is sent as written", ErrInvalidConfig, p.text, p.key)
		case !p.optional:
			return fmt.Errorf("%w: instruction: placeholder %s names the ADK-Go session-state key %q, which nothing sets on an Armature agent, so every turn would fail; "+
				"write {%s?} for an optional placeholder (replaced by nothing while the key is unset); "+
				"ADK-Go's templating has no escape for literal braces ({{%s}} is the placeholder too): braces around anything but a state name ({%s-x}, {a b}) stay as written, "+
				"and the agent's system: prompt, used when the adk: section sets no instruction, is sent as written",
				ErrInvalidConfig, p.text, p.key, p.key, p.key, p.key)
		}
	}
	return nil
}

// instructionError is the error of a turn whose instruction ADK-Go's
// templating failed on (a state key the session lacks, when Validate
// did not see the instruction): the instruction must change, so it is
// ErrInstructionState (prompt_render_error, user-correctable), naming
// the placeholder that failed when the session state shows which.
func instructionError(ctx adkagent.ReadonlyContext, instruction string, err error) error {
	for _, p := range placeholders(instruction) {
		if p.artifact {
			return fmt.Errorf("%w: %s: %w", ErrInstructionState, p.text, err)
		}
		if p.optional {
			continue
		}
		if _, gerr := ctx.ReadonlyState().Get(p.key); gerr != nil {
			return fmt.Errorf("%w: %s (session-state key %q): %w", ErrInstructionState, p.text, p.key, err)
		}
	}
	return fmt.Errorf("%w: %w", ErrInstructionState, err)
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
