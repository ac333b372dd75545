package adk

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"

	"github.com/armature-go/armature/agent"
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
//   - an answer without a candidate (a blocked prompt), streamed or not:
//     an empty reply, provider_invalid_response (agent.ErrEmptyReply);
//   - an answer that is not JSON (a stream's line that is, up to where
//     the connection closed, is a cut stream): provider_invalid_response.
//
// The API key is redacted from every message.
type geminiModel struct {
	model.LLM
	key   string
	limit int64
}

// newGeminiModel wraps m, ADK-Go's Gemini model, whose API key is key,
// and bounds what each of its calls reads of a reply to limit bytes
// (boundedTransport, on the client's own HTTP client, so that its
// credentials stay as the SDK set them up).
func newGeminiModel(m model.LLM, key string, limit int64) geminiModel {
	if c, ok := m.(interface{ Client() *genai.Client }); ok && c.Client() != nil {
		if hc := c.Client().ClientConfig().HTTPClient; hc != nil {
			hc.Transport = &boundedTransport{base: hc.Transport, limit: limit}
		}
	}
	return geminiModel{LLM: m, key: key, limit: limit}
}

// GenerateContent implements model.LLM.
func (m geminiModel) GenerateContent(ctx context.Context, req *model.LLMRequest, stream bool) iter.Seq2[*model.LLMResponse, error] {
	return func(yield func(*model.LLMResponse, error) bool) {
		finished := false
		call := &callState{}
		for resp, err := range m.LLM.GenerateContent(context.WithValue(ctx, callKey{}, call), req, stream) {
			if err != nil {
				yield(nil, m.fail(ctx, call, err, stream))
				return
			}
			// A finish reason ends a stream, and so does an error code (a
			// blocked prompt's block reason: no candidate will come).
			if resp != nil && (resp.FinishReason != "" && resp.FinishReason != genai.FinishReasonUnspecified || resp.ErrorCode != "") {
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
func (m geminiModel) fail(ctx context.Context, call *callState, err error, stream bool) error {
	if ctx.Err() != nil {
		return err // the run's own cancellation: the engine reports it
	}
	if pe, ok := apiError(err); ok {
		pe.Message = llm.Redact(pe.Message, m.key)
		if r, ok := pe.Err.(*redacted); ok {
			r.msg = llm.Redact(r.msg, m.key)
		}
		return pe
	}
	// ADK-Go's model reports an answer without candidates (a blocked
	// prompt: promptFeedback.blockReason, no candidate) with this
	// error of its own, unwrapped: an empty reply, as a native agent's
	// (agent.ErrEmptyReply), not a node failure to retry.
	if err.Error() == "empty response" {
		return errcat.Wrap(errcat.ProviderInvalidResponse, "the model returned an empty reply", agent.ErrEmptyReply)
	}
	// The SDK may report a reply cut at the bound as the JSON it could
	// not decode (the part of a line that came): the bound decides.
	if errors.Is(err, llm.ErrResponseTooLarge) || call.tooLarge.Load() {
		return &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: "gemini", Op: "complete",
			Message: "the reply exceeds the size bound of " + strconv.FormatInt(m.limit, 10) + " bytes", Err: llm.ErrResponseTooLarge}
	}
	var (
		ue *url.Error
		ne net.Error
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	// The SDK's errors may quote the reply (a line it could not decode,
	// a whole body): a decoding failure's cause says only what JSON
	// error it was, another's keeps its first line, cut short.
	var text string
	switch {
	case errors.As(err, &se):
		text = se.Error()
	case errors.As(err, &te):
		text = te.Error()
	default:
		text = causeText(llm.Redact(err.Error(), m.key))
	}
	cause := &redacted{msg: text, err: err}
	switch {
	case errors.As(err, &ue), errors.As(err, &ne), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, context.DeadlineExceeded), // the call's own timeout (ModelConfig.Timeout)
		// The SDK reads a stream by lines and decodes the last one even
		// when the connection closed in the middle of it: JSON that ends
		// early is a cut stream, where other bad JSON is garbage.
		stream && se != nil && strings.Contains(se.Error(), "unexpected end of JSON input"):
		return &llm.ProviderError{Cat: errcat.ProviderUnavailable, Provider: "gemini", Op: "complete", Message: "transport failure", Err: cause}
	case se != nil, te != nil:
		return &llm.ProviderError{Cat: errcat.ProviderInvalidResponse, Provider: "gemini", Op: "complete",
			Message: "the answer could not be decoded", Err: cause}
	}
	return err
}

// maxCauseText bounds the text of a failed call's cause.
const maxCauseText = 512

// causeText is s's first line, cut to maxCauseText bytes.
func causeText(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > maxCauseText {
		s = strings.ToValidUTF8(s[:maxCauseText], "") + "…"
	}
	return s
}

// maxErrorBody bounds what a call reads of an error answer's body, as
// Armature's own clients bound it.
const maxErrorBody = 64 << 10

// callState is what the transport learns of one call of the model.
type callState struct {
	// tooLarge is set when the reply exceeded the bound.
	tooLarge atomic.Bool
}

// callKey is the context key of a call's *callState.
type callKey struct{}

// boundedTransport bounds what a call reads of the upstream's reply: a
// reply past limit bytes fails with llm.ErrResponseTooLarge as soon as
// a byte more arrives (no more of it is read; closing the body drops
// the connection), and an error answer's body ends after maxErrorBody
// bytes.
type boundedTransport struct {
	base  http.RoundTripper
	limit int64
}

// RoundTrip implements http.RoundTripper.
func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if resp.StatusCode >= 400 {
		resp.Body = &boundedBody{rc: resp.Body, left: maxErrorBody, quiet: true}
	} else {
		call, _ := req.Context().Value(callKey{}).(*callState)
		resp.Body = &boundedBody{rc: resp.Body, left: t.limit, call: call}
	}
	return resp, nil
}

// boundedBody reads at most left bytes of rc; past them it fails with
// llm.ErrResponseTooLarge, or, when quiet, ends.
type boundedBody struct {
	rc    io.ReadCloser
	left  int64
	quiet bool
	call  *callState // told when the reply exceeds the bound; may be nil
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left <= 0 && b.quiet {
		return 0, io.EOF
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1] // one byte past the bound tells a reply that exceeds it
	}
	n, err := b.rc.Read(p)
	if int64(n) > b.left {
		n = int(b.left)
		b.left = 0
		if b.quiet {
			return n, io.EOF
		}
		if b.call != nil {
			b.call.tooLarge.Store(true)
		}
		return n, llm.ErrResponseTooLarge
	}
	b.left -= int64(n)
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// redacted is an error whose text has a secret redacted and which still
// unwraps to the error it stands for.
type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }
