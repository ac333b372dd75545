package adk

import (
	"fmt"

	adkagent "google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/genai"
)

// DefaultMaxLLMCalls bounds the model calls of one turn when
// Config.MaxLLMCalls is 0.
const DefaultMaxLLMCalls = 20

// StoppedText is the answer of a turn that reached its bound on model
// calls after steps of them.
func StoppedText(steps int) string {
	return fmt.Sprintf("I stopped after %d steps without finishing. Ask me to continue if you want me to keep going.", steps)
}

// stepLimit is the BeforeModelCallback bounding a turn's model calls:
// once the turn made limit of them, the next is not made, and its
// answer is StoppedText (ADK-Go's loop then ends: the answer calls no
// tool).
//
// The turn's calls are the more of two counts: the model's contents
// since the user's message (a resumed turn goes on with the calls it
// made before its approval), and the calls this run made (the run's
// modelCalls). The second bounds what the first cannot see: ADK-Go
// leaves out of the request the events of the calls it reserves for
// itself (adk_request_confirmation, adk_request_credential), so a model
// that calls one of those names is sent the same contents again and
// again, and without the run's own count would be called without end.
func stepLimit(limit int) llmagent.BeforeModelCallback {
	return func(ctx adkagent.Context, req *model.LLMRequest) (*model.LLMResponse, error) {
		n := callsThisTurn(req.Contents)
		c, _ := ctx.Value(modelCallsKey{}).(*modelCalls)
		if c != nil {
			c.mu.Lock()
			n = max(n, c.made)
			if n < limit {
				c.made++ // the call about to be made
			}
			c.mu.Unlock()
		}
		if n >= limit {
			return &model.LLMResponse{Content: genai.NewContentFromText(StoppedText(n), genai.RoleModel), TurnComplete: true}, nil
		}
		return nil, nil
	}
}

// callsThisTurn counts the model's contents since the user's last
// message (a user content that is not only function responses).
func callsThisTurn(contents []*genai.Content) int {
	n := 0
	for i := len(contents) - 1; i >= 0; i-- {
		c := contents[i]
		if c == nil {
			continue
		}
		if c.Role == genai.RoleModel {
			n++
			continue
		}
		for _, p := range c.Parts {
			if p != nil && p.FunctionResponse == nil {
				return n
			}
		}
	}
	return n
}
