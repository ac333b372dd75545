package adk

import (
	"cmp"

	"github.com/armature-go/armature/adapter"
	"github.com/armature-go/armature/agent"
	"github.com/armature-go/armature/llm"

	adkagent "google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"
)

// window cuts each model request of an agent to its window (see
// Config.Window): a BeforeModelCallback, ADK-Go's own hook, so the
// session keeps every event and only what a call sends is bounded.
type window struct {
	w      agent.Window
	tokens func(*llm.Message) int
	fixed  int // the tokens of the instruction and the tool definitions
}

func newWindow(cfg Config) *window {
	win := &window{w: cfg.Window, tokens: cfg.Tokens}
	if win.tokens == nil {
		win.tokens = llm.EstimateTokens
	}
	if cfg.Window.MaxTokens > 0 {
		win.fixed = adapter.FixedTokens(cmp.Or(cfg.Instruction, cfg.System), cfg.Tools, win.tokens)
	}
	return win
}

// callback is the BeforeModelCallback.
func (win *window) callback() llmagent.BeforeModelCallback {
	return func(_ adkagent.Context, req *model.LLMRequest) (*model.LLMResponse, error) {
		if k := win.start(req.Contents); k > 0 {
			req.Contents = req.Contents[k:]
		}
		return nil, nil
	}
}

// start returns the index of the first content the window sends: the
// content holding the message agent.Window.Start picks over the
// contents as Armature messages (a turn boundary: a user message outside
// every tool-call group). With only MaxMessages set, it converts the
// contents' tail first, which decides the window unless the walk over
// it reaches the tail's first message; then, as with MaxTokens, all of
// them. Contents the model bridge cannot convert are sent whole.
func (win *window) start(contents []*genai.Content) int {
	if tail := 2*win.w.MaxMessages + 8; win.w.MaxTokens == 0 && tail < len(contents) {
		if k, ok := win.startIn(contents, len(contents)-tail); ok && k > len(contents)-tail {
			return k
		}
	}
	k, _ := win.startIn(contents, 0)
	return k
}

// startIn is start over contents[from:]: the index in contents of the
// window's first content, and whether the contents converted.
func (win *window) startIn(contents []*genai.Content, from int) (int, bool) {
	msgs := make([]llm.Message, 0, len(contents)-from)
	first := make([]int, 0, len(contents)-from) // the content of each message
	for i := from; i < len(contents); i++ {
		c := contents[i]
		if c == nil {
			continue
		}
		ms, err := toLLMMessages(c)
		if err != nil {
			return from, false
		}
		for range ms {
			first = append(first, i)
		}
		msgs = append(msgs, ms...)
	}
	s, _ := win.w.Start(msgs, win.fixed, win.tokens)
	if s <= 0 || s >= len(msgs) {
		return from, true
	}
	// The window starts at a user message: the first of its content's
	// messages. Should it not, it starts at the next content.
	k := first[s]
	if s > 0 && first[s-1] == k {
		k++
	}
	return k, true
}
