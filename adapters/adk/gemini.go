package adk

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net"
	"net/url"
	"strings"

	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"

	"github.com/armature-go/armature/errcat"
	"github.com/armature-go/armature/llm"
)

// geminiModel is ADK-Go's own Gemini client (model/gemini) with the
// failures of its calls categorized as Armature's own Gemini client
// (llm/gemini) categorizes them, so that an agent on either fails a
// turn alike:
//
//   - an error answer of the Gemini API: the category of its status and
//     envelope (modelError);
//   - no answer, or an answer cut off (the connection refused, reset or
//     closed early, a timeout): provider_unavailable, retryable, where
//     ADK-Go's error would be a node_exception;
//   - a stream that ends without a finish reason (the connection closed
//     between two chunks, which the SDK reads as the stream's end):
//     provider_unavailable, where ADK-Go would take the text that came
//     as the whole answer and keep it in its session;
//   - an answer that is not JSON (a stream's line that is, up to where
//     the connection closed, is a cut stream): provider_invalid_response.
//
// The API key is redacted from every message.
type geminiModel struct {
	model.LLM
	key string
}

// GenerateContent implements model.LLM.
func (m geminiModel) GenerateContent(ctx context.Context, req *model.LLMRequest, stream bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		finished := false
		for resp, err := range m.LLM.GenerateContent(ctx, req, stream) {
			if err != nil {
				yield(nil, m.fail(ctx, err, stream))
				return
			}
			if resp != nil && resp.FinishReason != "" && resp.FinishReason != genai.FinishReasonUnspecified {
				finished = true
			}
			if !yield(resp, nil) {
				return
			}
		}
		if stream && !finished && ctx.Err() == nil {
			yield(nil, &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "gemini", Op: "stream",
				Message: "the stream ended before completion"})
		}
	}
}

// GetGoogleLLMVariant reports the client's backend (the Gemini API or
// Vertex AI), as ADK-Go's model does, for ADK-Go's telemetry and the
// behaviour that depends on it.
func (m geminiModel) GetGoogleLLMVariant() genai.Backend {
	if v, ok := m.LLM.(interface{ GetGoogleLLMVariant() genai.Backend }); ok {
		return v.GetGoogleLLMVariant()
	}
	return genai.BackendUnspecified
}

// Client is the model's genai client, as ADK-Go's model gives it.
func (m geminiModel) Client() *genai.Client {
	if c, ok := m.LLM.(interface{ Client() *genai.Client }); ok {
		return c.Client()
	}
	return nil
}

// fail categorizes err, a failure of a call of the client (a
// streaming one when stream).
func (m geminiModel) fail(ctx context.Context, err error, stream bool) error {
	if ctx.Err() != nil {
		return err // the run's own cancellation: the engine reports it
	}
	if pe := modelError(err); pe != err {
		return pe
	}
	cause := &redacted{msg: llm.Redact(err.Error(), m.key), err: err}
	var (
		ue *url.Error
		ne net.Error
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &ue), errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		// The SDK reads a stream by lines and decodes the last one even
		// when the connection closed in the middle of it: JSON that ends
		// early is a cut stream, where other bad JSON is garbage.
		stream && errors.As(err, &se) && strings.Contains(se.Error(), "unexpected end of JSON input"):
		return &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "gemini", Op: "complete", Message: "transport failure", Err: cause}
	case errors.As(err, &se), errors.As(err, &te):
		return &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: "gemini", Op: "complete",
			Message: "the answer could not be decoded", Err: cause}
	}
	return err
}

// redacted is an error whose text has a secret redacted and which still
// unwraps to the error it stands for.
type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }
