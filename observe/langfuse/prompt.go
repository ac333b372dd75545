package langfuse

import "github.com/armature-go/armature/graph"

// promptLinkage adds the active prompt's identity, link and token budget
// to a generation (§8.4.3, §8.4.4).
func (o *Observer) promptLinkage(b *ObservationBody, meta map[string]any, src *graph.CallSource, resp *graph.LLMResponse) {
}

// observeRetrieval renders the embedding and rerank events.
func (o *Observer) observeRetrieval(ev graph.Event) {}
