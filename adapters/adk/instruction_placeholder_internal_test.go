package adk

import (
	"context"
	"errors"
	"strings"
	"testing"

	adkagent "google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/adk/v2/session"
	"google.golang.org/genai"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/harness"
	"github.com/armature-go/armature/llm"
)

// okModel answers every call "ok".
type okModel struct{}

func (okModel) Ready(context.Context) error { return nil }
func (okModel) Complete(context.Context, *llm.Request) (*llm.Response, error) {
	return &llm.Response{Message: llm.AssistantText("ok"), FinishReason: llm.FinishStop}, nil
}

// adkTurn runs one turn of an llmagent whose instruction is instruction
// (through setInstruction, as NewEngine builds it, but without Validate)
// on a fresh in-memory session with no state and no artifact service,
// as an Armature agent's: ADK-Go's own templating decides.
func adkTurn(t *testing.T, instruction string) error {
	t.Helper()
	acfg := llmagent.Config{Name: "assistant", Model: NewProviderModel("m", okModel{})}
	setInstruction(&acfg, instruction, false)
	ag, err := llmagent.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runner.New(runner.Config{AppName: "armature", Agent: ag, SessionService: session.InMemoryService(), AutoCreateSession: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range r.Run(t.Context(), "user", "s", genai.NewContentFromText("hello", genai.RoleUser), adkagent.RunConfig{}) {
		if err != nil {
			return err
		}
	}
	return nil
}

// TestInstructionPlaceholdersMirrorADK: Validate refuses an instruction
// exactly when ADK-Go's templating (instructionutil.InjectSessionState)
// fails a turn of an Armature agent on it (no session state, no
// artifact service): required state keys, with or without the app:,
// user: and temp: prefixes, doubled braces, spaces inside the braces,
// and artifacts (optional too) are refused; optional keys, braces around
// anything that is not a state name (JSON, prose, unknown prefixes) are
// accepted, as ADK-Go accepts them.
func TestInstructionPlaceholdersMirrorADK(t *testing.T) {
	for _, s := range []string{
		"You help.", "Greet {user_name}", "Greet {user_name?}", "{ user_name }", "{ user_name? }", "{user_name ?}",
		"{{user_name}}", "{{user_name}", "{user_name}}", "{app:x}", "{user:x}", "{temp:x}", "{app:x?}", "{user:x?}",
		"{other:x}", "{app:x:y}", "{app:}", "{:x}", "{user name}", "{user-name}", "{1abc}", "{_x}", "{été}", "{x1}",
		"{}", "{?}", "{ }", "{artifact.notes}", "{artifact.notes?}", "{artifact.}", "{ artifact.a b }",
		`Answer as {"answer": "..."}`, "{a{b}", "{a}{b?}", "a { b", "a } b", "{x?}{y}", "{x??}", "{{{deep}}}",
		"{userName}", "{USER}", "{x.y}", "{app: x}", "{x\n}", "{ {y} }",
	} {
		validated := checkInstruction(s)
		ran := adkTurn(t, s)
		if (validated == nil) != (ran == nil) {
			t.Errorf("%q: Validate says %v, ADK-Go's turn %v", s, validated, ran)
		}
		if validated != nil && !errors.Is(validated, ErrInvalidConfig) {
			t.Errorf("%q: %v does not wrap ErrInvalidConfig", s, validated)
		}
	}
}

// TestInstructionPlaceholderError: the startup error names the
// placeholder and says how to write an optional one and literal braces.
func TestInstructionPlaceholderError(t *testing.T) {
	err := Config{Instruction: "Greet {user_name}."}.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"{user_name}", `"user_name"`, "{user_name?}", "literal braces", "system:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error lacks %q: %v", want, err)
		}
	}
	if err := (Config{Instruction: "Read {artifact.notes?}"}).Validate(); err == nil || !strings.Contains(err.Error(), "{artifact.notes?}") {
		t.Errorf("artifact placeholder: %v", err)
	}
	if err := (Config{System: "Greet {user_name}"}).Validate(); err != nil {
		t.Errorf("the system: prompt is not templated, yet refused: %v", err)
	}
}

// TestInstructionStateErrorCategory: a turn whose instruction ADK-Go's
// templating still fails on (state missing at run time; Validate
// bypassed here) fails as prompt_render_error, user-correctable and not
// retryable, naming the placeholder. Before, it was an uncategorized
// node_exception, bucketed retryable_transient: the OpenAI endpoint
// answered 503 with Retry-After, and clients retried forever.
func TestInstructionStateErrorCategory(t *testing.T) {
	err := adkTurn(t, "Greet {user_name}")
	if err == nil {
		t.Fatal("the turn ran")
	}
	if !errors.Is(err, ErrInstructionState) {
		t.Errorf("%v does not wrap ErrInstructionState", err)
	}
	cat := errcat.Of(err)
	if cat != errcat.PromptRenderError || harness.BucketOf(cat) != harness.UserCorrectable || harness.RetrySafe(cat) {
		t.Errorf("category %q, bucket %q, retry-safe %v", cat, harness.BucketOf(cat), harness.RetrySafe(cat))
	}
	if !strings.Contains(err.Error(), "{user_name}") {
		t.Errorf("the error does not name the placeholder: %v", err)
	}
}

// FuzzInstructionPlaceholders: for any instruction, Validate refuses it
// exactly when ADK-Go's templating fails an Armature agent's turn on it.
func FuzzInstructionPlaceholders(f *testing.F) {
	for _, s := range []string{"Greet {user_name}", "{x?}", "{app:x}", "{artifact.a}", "{a b}", "{{x}}", `{"k": 1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		validated, ran := checkInstruction(s), adkTurn(t, s)
		if (validated == nil) != (ran == nil) {
			t.Errorf("%q: Validate says %v, ADK-Go's turn %v", s, validated, ran)
		}
	})
}
