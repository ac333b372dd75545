package server

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/armature-go/armature/internal/jsonstr"
	"github.com/armature-go/armature/llm"
)

// The OpenHarness response encoded by hand, byte for byte as
// json.Marshal encodes it (TestOHResponseEncoding holds it to that),
// without reflection: a response is encoded once per turn. The
// json.RawMessage fields of a response are always compact JSON as
// json.Marshal writes it (ohJSON, or a literal), so they are appended
// as they are where json.Marshal would compact them again.

// encode returns the response's JSON encoding, in a buffer sized once.
func (r *ohResponse) encode() json.RawMessage {
	n := 256 + len(r.RequestID) + len(r.CorrelationID)
	for _, v := range r.Response.Extensions {
		n += 16 + len(v)
	}
	for i := range r.Response.ActionDirectives {
		n += 128 + len(r.Response.ActionDirectives[i].Payload)
	}
	return r.appendJSON(make([]byte, 0, n))
}

// appendJSON appends the response's JSON encoding to b.
func (r *ohResponse) appendJSON(b []byte) []byte {
	b = append(b, `{"protocol_version":`...)
	b = jsonstr.Append(b, r.ProtocolVersion)
	if r.RequestID != "" {
		b = jsonstr.Append(append(b, `,"request_id":`...), r.RequestID)
	}
	if r.CorrelationID != "" {
		b = jsonstr.Append(append(b, `,"correlation_id":`...), r.CorrelationID)
	}
	if r.SupportedProtocolVersions != nil {
		b = jsonstr.AppendStrings(append(b, `,"supported_protocol_versions":`...), r.SupportedProtocolVersions)
	}
	if r.SupportedCapabilities != nil {
		b = appendRawMap(append(b, `,"supported_capabilities":`...), r.SupportedCapabilities)
	}
	if r.CapabilityDenials != nil {
		b = append(b, `,"capability_denials":[`...)
		for i, d := range r.CapabilityDenials {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonstr.Append(append(b, `{"capability":`...), d.Capability)
			if d.Code != "" {
				b = jsonstr.Append(append(b, `,"code":`...), d.Code)
			}
			if d.Message != "" {
				b = jsonstr.Append(append(b, `,"message":`...), d.Message)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = r.Response.appendJSON(append(b, `,"response":`...))
	return append(b, '}')
}

func (p *ohResponsePayload) appendJSON(b []byte) []byte {
	b = jsonstr.Append(append(b, `{"status":`...), p.Status)
	if p.EngineLatencyMS != nil {
		b = appendFloat(append(b, `,"engine_latency_ms":`...), *p.EngineLatencyMS)
	}
	if p.ActionDirectives != nil {
		b = append(b, `,"action_directives":[`...)
		for i := range p.ActionDirectives {
			if i > 0 {
				b = append(b, ',')
			}
			b = p.ActionDirectives[i].appendJSON(b)
		}
		b = append(b, ']')
	}
	if e := p.Error; e != nil {
		b = jsonstr.Append(append(b, `,"error":{"code":`...), e.Code)
		if e.Message != "" {
			b = jsonstr.Append(append(b, `,"message":`...), e.Message)
		}
		if e.Retryable != nil {
			b = strconv.AppendBool(append(b, `,"retryable":`...), *e.Retryable)
		}
		if len(e.Details) > 0 {
			b = append(append(b, `,"details":`...), e.Details...)
		}
		b = append(b, '}')
	}
	if p.Extensions != nil {
		b = appendRawMap(append(b, `,"extensions":`...), p.Extensions)
	}
	return append(b, '}')
}

func (d *ohDirective) appendJSON(b []byte) []byte {
	b = jsonstr.Append(append(b, `{"action_type":`...), d.ActionType)
	if d.Priority != "" {
		b = jsonstr.Append(append(b, `,"priority":`...), d.Priority)
	}
	if d.Execution != "" {
		b = jsonstr.Append(append(b, `,"execution":`...), d.Execution)
	}
	if d.RiskTier != "" {
		b = jsonstr.Append(append(b, `,"risk_tier":`...), d.RiskTier)
	}
	if d.RequiresUserApproval != nil {
		b = strconv.AppendBool(append(b, `,"requires_user_approval":`...), *d.RequiresUserApproval)
	}
	if d.DeadlineMS != nil {
		b = strconv.AppendInt(append(b, `,"deadline_ms":`...), *d.DeadlineMS, 10)
	}
	if len(d.Payload) > 0 {
		b = append(append(b, `,"payload":`...), d.Payload...)
	}
	if d.Extensions != nil {
		b = appendRawMap(append(b, `,"extensions":`...), d.Extensions)
	}
	return append(b, '}')
}

// appendRawMap appends m as json.Marshal does: keys sorted, a nil
// value as null.
func appendRawMap(b []byte, m map[string]json.RawMessage) []byte {
	var small [4]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(jsonstr.Append(b, k), ':')
		if v := m[k]; len(v) > 0 {
			b = append(b, v...)
		} else {
			b = append(b, "null"...)
		}
	}
	return append(b, '}')
}

// appendFloat appends f as json.Marshal encodes a float64 (a
// non-finite f, which json.Marshal refuses, as null).
func appendFloat(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, "null"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// renderMessagePayload is the payload of a render_message directive,
// {"message": m, "text": text}, as json.Marshal encodes that map.
func renderMessagePayload(m llm.Message, text string) json.RawMessage {
	b, err := m.AppendJSON(append(make([]byte, 0, 64+2*len(text)), `{"message":`...))
	if err != nil { // as json.Marshal would fail
		return ohJSON(map[string]any{"text": text, "message": m})
	}
	b = jsonstr.Append(append(b, `,"text":`...), text)
	return append(b, '}')
}

// encode returns the extension's JSON encoding, as json.Marshal writes
// it.
func (x *ohExtension) encode() json.RawMessage {
	b := make([]byte, 0, 192+len(x.SessionID)+len(x.Agent)+len(x.RunID)+len(x.InvocationID)+len(x.ConversationID))
	b = jsonstr.Append(append(b, `{"session_id":`...), x.SessionID)
	if x.Agent != "" {
		b = jsonstr.Append(append(b, `,"agent":`...), x.Agent)
	}
	b = jsonstr.Append(append(b, `,"outcome":`...), x.Outcome)
	if x.RunID != "" {
		b = jsonstr.Append(append(b, `,"run_id":`...), x.RunID)
	}
	if x.InvocationID != "" {
		b = jsonstr.Append(append(b, `,"invocation_id":`...), x.InvocationID)
	}
	if x.ConversationID != "" {
		b = jsonstr.Append(append(b, `,"conversation_id":`...), x.ConversationID)
	}
	if x.Resumed {
		b = append(b, `,"resumed":true`...)
	}
	if x.Replayed {
		b = append(b, `,"replayed":true`...)
	}
	if len(x.Superseded) > 0 {
		b = jsonstr.AppendStrings(append(b, `,"superseded":`...), x.Superseded)
	}
	if len(x.Usage) > 0 {
		var small [8]string
		keys := small[:0]
		for k := range x.Usage {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, `,"usage":{`...)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(append(jsonstr.Append(b, k), ':'), int64(x.Usage[k]), 10)
		}
		b = append(b, '}')
	}
	if x.FinishReason != "" {
		b = jsonstr.Append(append(b, `,"finish_reason":`...), x.FinishReason)
	}
	if c := x.Continuation; c != nil {
		b = append(b, `,"continuation":{`...)
		sep := ""
		for _, f := range [...]struct{ key, v string }{{"run_id", c.RunID}, {"sop_id", c.SOPID},
			{"continuation_token", c.ContinuationToken}} {
			if f.v != "" {
				b = jsonstr.Append(append(jsonstr.Append(append(b, sep...), f.key), ':'), f.v)
				sep = ","
			}
		}
		b = append(b, '}')
	}
	if len(x.UnusedAttachments) > 0 {
		b = append(b, `,"unused_attachments":[`...)
		for i, v := range x.UnusedAttachments {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(v), 10)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}
