package server

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/armature-go/armature/llm"
)

// ohRand builds random OpenHarness responses: every field set or not,
// strings with HTML, control and invalid UTF-8 bytes, floats of every
// magnitude, raw values as ohJSON encodes them.
type ohRand struct{ r *rand.Rand }

func (g ohRand) str() string {
	const alphabet = "ab <>&\"\\\n\t\x01\u2028é日\xff/"
	if g.r.IntN(4) == 0 {
		return ""
	}
	rs := []rune(alphabet)
	b := make([]byte, 0, 16)
	for range 1 + g.r.IntN(12) {
		if g.r.IntN(10) == 0 {
			b = append(b, 0xff) // invalid UTF-8
			continue
		}
		b = append(b, string(rs[g.r.IntN(len(rs))])...)
	}
	return string(b)
}

func (g ohRand) raw() json.RawMessage {
	switch g.r.IntN(5) {
	case 0:
		return nil
	case 1:
		return json.RawMessage("true")
	case 2:
		return ohJSON(map[string]any{g.str(): g.str(), "n": g.r.IntN(100)})
	case 3:
		return ohJSON([]string{g.str(), g.str()})
	}
	return ohJSON(g.str())
}

func (g ohRand) rawMap() map[string]json.RawMessage {
	switch g.r.IntN(3) {
	case 0:
		return nil
	case 1:
		return map[string]json.RawMessage{}
	}
	m := map[string]json.RawMessage{}
	for range 1 + g.r.IntN(4) {
		m[g.str()] = g.raw()
	}
	return m
}

func (g ohRand) float() float64 {
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		return g.r.Float64() * 1e-8
	case 2:
		return g.r.Float64() * 1e25
	case 3:
		return -g.r.Float64() * 1e22
	case 4:
		return math.Copysign(0, -1)
	}
	return g.r.Float64() * 1000
}

func (g ohRand) boolp() *bool {
	if g.r.IntN(2) == 0 {
		return nil
	}
	return new(g.r.IntN(2) == 0)
}

func (g ohRand) response() *ohResponse {
	r := &ohResponse{ProtocolVersion: g.str(), RequestID: g.str(), CorrelationID: g.str(),
		SupportedCapabilities: g.rawMap()}
	if g.r.IntN(2) == 0 {
		r.SupportedProtocolVersions = []string{}
		for range g.r.IntN(3) {
			r.SupportedProtocolVersions = append(r.SupportedProtocolVersions, g.str())
		}
	}
	if g.r.IntN(2) == 0 {
		r.CapabilityDenials = []ohDenial{}
		for range g.r.IntN(3) {
			r.CapabilityDenials = append(r.CapabilityDenials, ohDenial{g.str(), g.str(), g.str()})
		}
	}
	p := &r.Response
	p.Status, p.Extensions = g.str(), g.rawMap()
	if g.r.IntN(2) == 0 {
		p.EngineLatencyMS = new(g.float())
	}
	if g.r.IntN(2) == 0 {
		p.Error = &ohError{Code: g.str(), Message: g.str(), Retryable: g.boolp(), Details: g.raw()}
	}
	if g.r.IntN(3) > 0 {
		p.ActionDirectives = []ohDirective{}
		for range g.r.IntN(4) {
			d := ohDirective{ActionType: g.str(), Priority: g.str(), Execution: g.str(), RiskTier: g.str(),
				RequiresUserApproval: g.boolp(), Payload: g.raw(), Extensions: g.rawMap()}
			if g.r.IntN(2) == 0 {
				d.DeadlineMS = new(g.r.Int64() - math.MaxInt64/2)
			}
			p.ActionDirectives = append(p.ActionDirectives, d)
		}
	}
	return r
}

// The hand encoder writes what json.Marshal writes, for random
// responses (seed printed).
func TestOHResponseEncoding(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	g := ohRand{rand.New(rand.NewPCG(uint64(seed), 0))}
	for i := range 2000 {
		r := g.response()
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.encode(); string(got) != string(want) {
			t.Fatalf("response %d:\n got %s\nwant %s", i, got, want)
		}
	}
	// Non-finite latencies cannot come from time.Duration; the encoder
	// writes null rather than fail.
	r := &ohResponse{Response: ohResponsePayload{EngineLatencyMS: new(math.Inf(1))}}
	if got := string(r.appendJSON(nil)); got != `{"protocol_version":"","response":{"status":"","engine_latency_ms":null}}` {
		t.Errorf("infinite latency: %s", got)
	}
}

// Every field of the response types is one the encoder writes: a field
// added to them must be added to appendJSON (and to ohRand) too.
func TestOHResponseEncodingCoversFields(t *testing.T) {
	want := map[reflect.Type]int{
		reflect.TypeFor[ohResponse]():        7 + 4, // and replayed, retryAfter, raw, recorded
		reflect.TypeFor[ohResponsePayload](): 5,
		reflect.TypeFor[ohDirective]():       8,
		reflect.TypeFor[ohError]():           4,
		reflect.TypeFor[ohDenial]():          3,
		reflect.TypeFor[ohExtension]():       13,
		reflect.TypeFor[ohContinuation]():    3,
	}
	for typ, n := range want {
		if typ.NumField() != n {
			t.Errorf("%s has %d fields, the encoder writes %d: update appendJSON", typ, typ.NumField(), n)
		}
	}
}

// The extension's encoder writes what json.Marshal writes, for random
// extensions (seed printed).
func TestOHExtensionEncoding(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	g := ohRand{rand.New(rand.NewPCG(uint64(seed), 0))}
	strs := func() []string {
		switch g.r.IntN(3) {
		case 0:
			return nil
		case 1:
			return []string{}
		}
		return []string{g.str(), g.str()}
	}
	for i := range 2000 {
		x := &ohExtension{SessionID: g.str(), Agent: g.str(), Outcome: g.str(), RunID: g.str(), InvocationID: g.str(),
			ConversationID: g.str(), Resumed: g.r.IntN(2) == 0, Replayed: g.r.IntN(2) == 0, Superseded: strs(),
			FinishReason: g.str()}
		switch g.r.IntN(3) {
		case 1:
			x.Usage = map[string]int{}
		case 2:
			x.Usage = map[string]int{"prompt_tokens": g.r.IntN(1000), "model_calls": 1 - g.r.IntN(3), g.str(): 7}
		}
		if g.r.IntN(2) == 0 {
			x.Continuation = &ohContinuation{RunID: g.str(), SOPID: g.str(), ContinuationToken: g.str()}
		}
		if g.r.IntN(2) == 0 {
			x.UnusedAttachments = []int{g.r.IntN(5), -1}
		}
		want, err := json.Marshal(x)
		if err != nil {
			t.Fatal(err)
		}
		if got := x.encode(); string(got) != string(want) {
			t.Fatalf("extension %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// renderMessagePayload writes what json.Marshal makes of the payload
// map, for messages of every shape.
func TestRenderMessagePayload(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	g := ohRand{rand.New(rand.NewPCG(uint64(seed), 0))}
	for range 500 {
		var m llm.Message
		switch g.r.IntN(3) {
		case 0:
			m = llm.AssistantText(g.str())
		case 1:
			m = llm.UserText(g.str())
		default:
			m = llm.Message{Role: llm.RoleAssistant, Content: llm.Text(g.str()), ToolCalls: []llm.ToolCall{
				{ID: g.str(), Name: g.str(), Arguments: json.RawMessage(`{"q": "<x>"}`)}}}
		}
		text := m.Text()
		want, err := json.Marshal(map[string]any{"text": text, "message": m})
		if err != nil {
			t.Fatal(err)
		}
		if got := renderMessagePayload(m, text); string(got) != string(want) {
			t.Fatalf("payload\n got %s\nwant %s", got, want)
		}
	}
}

// FuzzOHResponseEncoding holds the hand encoder to json.Marshal for
// arbitrary strings and latencies.
func FuzzOHResponseEncoding(f *testing.F) {
	f.Add("1.0.0", "req<1>", "success", "render_message", 12.5, "\xff\u2028")
	f.Fuzz(func(t *testing.T, version, id, status, action string, latency float64, text string) {
		if math.IsInf(latency, 0) || math.IsNaN(latency) {
			return
		}
		r := &ohResponse{ProtocolVersion: version, RequestID: id, CorrelationID: text,
			SupportedProtocolVersions: []string{version, text}, CapabilityDenials: []ohDenial{{Capability: text, Code: id}},
			Response: ohResponsePayload{Status: status, EngineLatencyMS: &latency,
				ActionDirectives: []ohDirective{{ActionType: action, Priority: text,
					Payload: renderMessagePayload(llm.AssistantText(text), text)}},
				Error:      &ohError{Code: status, Message: text, Details: ohJSON(map[string]string{text: id})},
				Extensions: map[string]json.RawMessage{text: ohJSON(id), version: nil}}}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.appendJSON(nil); string(got) != string(want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
		x := &ohExtension{SessionID: text, Agent: id, Outcome: status, RunID: version, Superseded: []string{action},
			Usage: map[string]int{text: len(id), action: -1}, Continuation: &ohContinuation{SOPID: text}}
		if want := ohJSON(x); string(x.encode()) != string(want) {
			t.Fatalf("extension\n got %s\nwant %s", x.encode(), want)
		}
	})
}
