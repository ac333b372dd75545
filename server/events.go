package server

import (
	"context"

	"github.com/armature-go/armature/chat"
	"github.com/armature-go/armature/runtime"
)

// NarrationEvent is the SSE event name of a progress narration on the
// OpenAI-compatible stream (stable-harness runtime.stream.progress.narration),
// sent when Config.Narration is set. It is a wire identifier and must
// not change.
const NarrationEvent = "stable_harness.progress.narration"

// NarrationProvider is the provider field of the built-in narration.
const NarrationProvider = "template"

// Narration configures progress narration (Config.Narration).
type Narration struct {
	// Style is recorded with each narration (for example "concise", the
	// default); the template provider writes one short sentence either
	// way.
	Style string
}

// narrationData is the runtime.progress.narration payload.
type narrationData struct {
	Message          string   `json:"message"`
	Provider         string   `json:"provider"`
	SourceEventTypes []string `json:"sourceEventTypes"`
	Style            string   `json:"style,omitempty"`
}

// narrationChunk is a narration as the OpenAI stream sends it: a
// chat.completion.chunk with an empty delta, as a tool progress frame
// is (the official SDKs hand every SSE event to the caller as a chunk,
// whatever its name: one without choices breaks code that reads
// choices[0]), with the narration's fields beside.
type narrationChunk struct {
	chunkJSON
	narrationData
}

// toolNarration is the template narration of a tool's progress ("" for
// a status that is not narrated).
func toolNarration(t *chat.ToolProgress) string {
	if t == nil {
		return ""
	}
	switch t.Status {
	case chat.ToolRunning:
		return "Calling " + t.Name + "…"
	case chat.ToolCompleted:
		return t.Name + " returned its result."
	case chat.ToolFailed:
		return t.Name + " failed."
	}
	return ""
}

// toolFrame is the narration of a tool's progress as the OpenAI stream
// sends it.
func (n *Narration) toolFrame(t *chat.ToolProgress) narrationData {
	return n.frame(toolNarration(t), runtime.EventAdapterEvent)
}

// frame is a narration as the OpenAI stream sends it: the message the
// run records as runtime.progress.narration (turnEvents.narrate).
func (n *Narration) frame(message string, sources ...string) narrationData {
	return narrationData{Message: message, Provider: NarrationProvider, SourceEventTypes: sources, Style: n.style()}
}

// The template narrations of a turn's other facts, recorded (narrate)
// and streamed alike.
const (
	narrationArtifact = "An artifact was created."
	narrationAnswer   = "The answer is ready."
)

func (n *Narration) style() string {
	if n.Style == "" {
		return "concise"
	}
	return n.Style
}

// narrate records a runtime.progress.narration derived from the given
// source event types, when narration is enabled.
func (te *turnEvents) narrate(ctx context.Context, message string, sources ...string) {
	if te.narration == nil || message == "" {
		return
	}
	_ = te.turn.Emit(ctx, runtime.EventProgressNarration, narrationData{Message: message, Provider: NarrationProvider,
		SourceEventTypes: sources, Style: te.narration.style()})
}

// narrateTool narrates a tool's progress.
func (te *turnEvents) narrateTool(ctx context.Context, t *chat.ToolProgress) {
	if te.narration == nil {
		return // before the message and the sources are built
	}
	te.narrate(ctx, toolNarration(t), runtime.EventAdapterEvent)
}

// event records a runtime event a node reported (chat.EmitEvent): an
// agent.* signal as runtime.adapter.event, a runtime fact under its own
// type; its output fields join the run's output.
func (te *turnEvents) event(ctx context.Context, e *chat.Event) {
	if e == nil {
		return
	}
	switch {
	case e.Phase != "":
		_ = te.turn.Adapter(ctx, e.Phase, e.Data)
	case e.Type != "":
		_ = te.turn.Emit(ctx, e.Type, e.Data)
		if e.Type == runtime.EventArtifactCreated {
			te.narrate(ctx, narrationArtifact, e.Type)
		}
	}
	for k, v := range e.Output {
		if te.output == nil {
			te.output = map[string]any{}
		}
		te.output[k] = v
	}
}
