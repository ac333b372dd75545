package langfuse

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"
)

// EventType is the type of an ingestion event (the "type" of the Langfuse
// public ingestion API's event envelope). The values are wire identifiers
// and must not change.
type EventType string

// The ingestion event types the observer emits. A trace is created and
// later updated with trace-create (the API upserts a trace by its id); a
// span with span-create at its start and span-update at its end; the
// call observations, which render one finished call each, with a single
// create.
const (
	TraceCreate      EventType = "trace-create"
	SpanCreate       EventType = "span-create"
	SpanUpdate       EventType = "span-update"
	GenerationCreate EventType = "generation-create"
	GenerationUpdate EventType = "generation-update"
	EventCreate      EventType = "event-create"
	ToolCreate       EventType = "tool-create"
	EmbeddingCreate  EventType = "embedding-create"
	RetrieverCreate  EventType = "retriever-create"
)

// ObservationType is the Langfuse type of an observation, as the
// observation tree names it (observability §8.3, §8.4.5–§8.4.7).
type ObservationType string

// The observation types of the mapping.
const (
	TypeSpan       ObservationType = "span"
	TypeGeneration ObservationType = "generation"
	TypeEvent      ObservationType = "event"
	TypeTool       ObservationType = "tool"
	TypeEmbedding  ObservationType = "embedding"
	TypeRetriever  ObservationType = "retriever"
)

// ObservationTypeOf returns the observation type an event creates or
// updates, and false for a trace-create or an unknown type.
func ObservationTypeOf(t EventType) (ObservationType, bool) {
	switch t {
	case SpanCreate, SpanUpdate:
		return TypeSpan, true
	case GenerationCreate, GenerationUpdate:
		return TypeGeneration, true
	case EventCreate:
		return TypeEvent, true
	case ToolCreate:
		return TypeTool, true
	case EmbeddingCreate:
		return TypeEmbedding, true
	case RetrieverCreate:
		return TypeRetriever, true
	}
	return "", false
}

// Levels of an observation.
const (
	LevelDefault = "DEFAULT"
	LevelWarning = "WARNING"
	LevelError   = "ERROR"
)

// Event is one ingestion event: the envelope (a unique id, the type and
// the time it was produced) around a trace or observation body. Body is a
// *TraceBody for trace-create and an *ObservationBody otherwise. An event
// is immutable once handed to an [Exporter].
type Event struct {
	ID        string    `json:"id"`
	Type      EventType `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Body      any       `json:"body"`
}

// TraceBody is the body of a trace-create event. Zero fields are left out
// (a later trace-create with the same id updates the ones it sets).
type TraceBody struct {
	ID        string         `json:"id"`
	Timestamp *time.Time     `json:"timestamp,omitempty"`
	Name      string         `json:"name,omitempty"`
	UserID    string         `json:"userId,omitempty"`
	SessionID string         `json:"sessionId,omitempty"`
	Input     any            `json:"input,omitempty"`
	Output    any            `json:"output,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
	Release   string         `json:"release,omitempty"`
	Version   string         `json:"version,omitempty"`
	// Environment is the Langfuse environment ("default" when unset).
	Environment string   `json:"environment,omitempty"`
	Tags        []string `json:"tags,omitempty"`
}

// ObservationBody is the body of the observation events (span, generation,
// tool, embedding and retriever creates and updates). Zero fields are
// left out.
type ObservationBody struct {
	ID                  string         `json:"id"`
	TraceID             string         `json:"traceId"`
	ParentObservationID string         `json:"parentObservationId,omitempty"`
	Name                string         `json:"name,omitempty"`
	StartTime           *time.Time     `json:"startTime,omitempty"`
	EndTime             *time.Time     `json:"endTime,omitempty"`
	CompletionStartTime *time.Time     `json:"completionStartTime,omitempty"`
	Input               any            `json:"input,omitempty"`
	Output              any            `json:"output,omitempty"`
	Metadata            map[string]any `json:"metadata,omitempty"`
	Level               string         `json:"level,omitempty"`
	StatusMessage       string         `json:"statusMessage,omitempty"`
	Model               string         `json:"model,omitempty"`
	ModelParameters     map[string]any `json:"modelParameters,omitempty"`
	// Usage is a generation's token usage; UsageDetails the open usage
	// map of embedding and retriever observations (sent when non-nil,
	// also empty: it carries only the figures the provider reported).
	Usage        *Usage         `json:"usage,omitempty"`
	UsageDetails map[string]int `json:"usageDetails,omitzero"`
	// PromptName and PromptVersion link a generation to a Langfuse prompt
	// (both or neither).
	PromptName    string `json:"promptName,omitempty"`
	PromptVersion int    `json:"promptVersion,omitempty"`
	Version       string `json:"version,omitempty"`
	Environment   string `json:"environment,omitempty"`
}

// Usage is a generation's token usage; a counter the provider did not
// report is nil and left out (observability §8.4.3).
type Usage struct {
	Input  *int `json:"input,omitempty"`
	Output *int `json:"output,omitempty"`
	Total  *int `json:"total,omitempty"`
}

// TraceID returns the Langfuse trace id of an invocation id (observability
// §8.4.1): a UUID's 32 lowercase hex digits (dashes stripped), any other
// id the first 16 bytes of its SHA-256 in hex, which is Langfuse's own
// create_trace_id(seed=invocationID).
func TraceID(invocationID string) string {
	if h, ok := uuidHex(invocationID); ok {
		return h
	}
	sum := sha256.Sum256([]byte(invocationID))
	return hex.EncodeToString(sum[:16])
}

// IsUUID reports whether id is a UUID in its hyphenated 8-4-4-4-12 or
// its 32-digit form (any case).
func IsUUID(id string) bool {
	_, ok := uuidHex(id)
	return ok
}

func uuidHex(id string) (string, bool) {
	s := strings.ToLower(id)
	if len(s) == 36 {
		if s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return "", false
		}
		s = s[:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	}
	if len(s) != 32 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", false
		}
	}
	return s, true
}
