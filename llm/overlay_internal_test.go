package llm

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

var overlayCases = [][]string{
	{},
	{`{"a":1}`},
	{`{"id":"x","choices":[{"delta":{"content":"a <b> & c"}}]}`, `{"choices":[],"usage":null}`, ` { "usage" : {"t" : 3} , "id":"y" } `},
	{`{"b":null}`, `{"b":2}`, `{"b":null}`, `{"b":[]}`, `{"b":[ ]}`},
	{`[1,2]`, `null`, `"s"`, `{}`, `not json`, `{"a":`, `{"z":{"nested":{"deep":[1,{"x":"}"}]}},"a":"\"q\""}`},
	{`{"k\u0041":1}`, `{"kA":2}`},                             // an escaped key: decoded
	{`{"é":1}`, `{"e":2}`},                                    // a non-ASCII key: decoded
	{`{"a":1,"a":null}`, `{"b":1}`},                           // a repeated key: the last wins
	{`{"s":"\u2028 line\u2029"}`, `{"t":"` + "\u2028" + `"}`}, // escaped as json.Marshal does
	{"{\"n\":1.5e3,\"t\":true,\"f\":false}\n", `{"n":-0}`},
}

func TestOverlayJSON(t *testing.T) {
	for _, c := range overlayCases {
		events := raws(c)
		got, want := OverlayJSON(events), overlayDecoded(events)
		if !bytes.Equal(got, want) {
			t.Errorf("OverlayJSON(%s) = %s, want %s", strings.Join(c, " | "), got, want)
		}
	}
}

// FuzzOverlayJSON: the in-place scan gives exactly what decoding every
// event gives, for any events.
func FuzzOverlayJSON(f *testing.F) {
	for _, c := range overlayCases {
		f.Add(strings.Join(c, "\x00"))
	}
	f.Fuzz(func(t *testing.T, joined string) {
		events := raws(strings.Split(joined, "\x00"))
		got, want := OverlayJSON(events), overlayDecoded(events)
		if !bytes.Equal(got, want) {
			t.Fatalf("OverlayJSON(%q) = %s, want %s", joined, got, want)
		}
	})
}

func raws(s []string) []json.RawMessage {
	out := make([]json.RawMessage, len(s))
	for i, e := range s {
		out[i] = json.RawMessage(e)
	}
	return out
}

func BenchmarkOverlayJSON(b *testing.B) {
	events := make([]json.RawMessage, 200)
	for i := range events {
		events[i] = json.RawMessage(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"word "},"finish_reason":null}]}`)
	}
	for _, impl := range []struct {
		name string
		f    func([]json.RawMessage) json.RawMessage
	}{{"scan", OverlayJSON}, {"decode", overlayDecoded}} {
		b.Run(impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				impl.f(events)
			}
		})
	}
}
