package llm_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

func TestSentinelPrefixes(t *testing.T) {
	for _, err := range []error{llm.ErrInvalidMessage} {
		if !strings.HasPrefix(err.Error(), "llm: ") {
			t.Errorf("sentinel %q lacks the package prefix", err)
		}
	}
}

// TestErrorMessagePrefixes checks that every error the package returns,
// from validation, decoding and encoding, carries the "llm: " prefix.
func TestErrorMessagePrefixes(t *testing.T) {
	var errs []error
	for _, tc := range []llm.Message{
		{}, llm.UserText(""), llm.SystemText(""), llm.UserBlocks(llm.Block{Type: llm.BlockImage}),
		llm.AssistantToolCalls(llm.ToolCall{}), {Role: llm.RoleTool, Content: llm.Text("x")},
	} {
		errs = append(errs, tc.Validate())
		if _, err := tc.MarshalJSON(); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs,
		llm.ValidateMessages(nil, nil),
		llm.ValidateMessages([]llm.Message{llm.UserText("a"), llm.SystemText("b")}, nil),
		llm.Tool{}.Validate(),
		json.Unmarshal([]byte(`{"role":"bot"}`), new(llm.Message)),
		new(llm.Message).UnmarshalJSON([]byte(`{`)),
		json.Unmarshal([]byte(`{"role":"user","content":[{"type":"video"}]}`), new(llm.Message)),
	)
	for _, err := range errs {
		if err == nil {
			t.Fatal("expected an error")
		}
		var ve *llm.ValidationError
		if !errors.As(err, &ve) {
			t.Errorf("%v is not a *llm.ValidationError", err)
			continue
		}
		if !strings.HasPrefix(ve.Error(), "llm: ") {
			t.Errorf("error %q lacks the package prefix", ve)
		}
	}
}

func TestValidationErrorMatching(t *testing.T) {
	err := llm.ValidateMessages([]llm.Message{llm.UserBlocks(llm.ImageInline("image/tiff", "x"))}, nil)
	const want = `llm: messages[0].content[0].media_type: unsupported image media type "image/tiff" (want image/png, image/jpeg, image/webp or image/gif)`
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant  %s", err, want)
	}
	wrapped := fmt.Errorf("chat: turn 3: %w", err)
	for _, target := range []error{llm.ErrInvalidMessage, errcat.ProviderInvalidRequest, errcat.New(errcat.ProviderInvalidRequest, "other")} {
		if !errors.Is(wrapped, target) {
			t.Errorf("errors.Is(wrapped, %v) = false", target)
		}
	}
	for _, target := range []error{errcat.ProviderInvalidResponse, errors.New("llm: invalid message")} {
		if errors.Is(wrapped, target) {
			t.Errorf("errors.Is(wrapped, %v) = true", target)
		}
	}
	if got := errcat.Of(wrapped); got != errcat.ProviderInvalidRequest {
		t.Errorf("errcat.Of = %q", got)
	}
	if errcat.Of(wrapped).Transient() {
		t.Error("provider_invalid_request reported transient")
	}

	cause := errors.New("boom")
	ve := &llm.ValidationError{Index: -1, Field: "content", Reason: "cannot decode", Err: cause}
	if !errors.Is(ve, cause) || ve.Error() != "llm: content: cannot decode: boom" {
		t.Errorf("cause not reachable or message wrong: %q", ve)
	}
	if got := (&llm.ValidationError{Index: -1, Reason: "r"}).Error(); got != "llm: r" {
		t.Errorf("Error() without field = %q", got)
	}
}

func TestValidationErrorNil(t *testing.T) {
	var ve *llm.ValidationError
	if ve.Error() != "<nil>" || ve.Unwrap() != nil || ve.Category() != "" || ve.Is(llm.ErrInvalidMessage) {
		t.Error("nil *ValidationError methods misbehave")
	}
}
