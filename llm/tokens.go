package llm

// TokenEstimator is an optional capability of a [Provider], detected with
// a type assertion: a quick estimate, with no network call and no
// tokenizer, of the input tokens one message costs in the mapping's wire
// format. Context-window policies (the agent package's Window) add it up
// over the messages they consider, and correct the sum with the prompt
// tokens the provider reports ([Usage.PromptTokens]). Without it,
// [EstimateTokens] applies.
type TokenEstimator interface {
	EstimateTokens(m *Message) int
}

// TokenRates is a linear token estimate: the text a message sends (its
// text, thinking and tool-result content, its tool calls' ids, names and
// arguments) at BytesPerToken bytes a token, plus PerMessage tokens of
// framing a message and PerImage tokens an image block. A wire mapping
// states its rates as a value ([DefaultTokenRates] are the mappings'
// common ground) and implements [TokenEstimator] with [TokenRates.Estimate].
type TokenRates struct {
	// BytesPerToken is how many bytes of UTF-8 text make a token on
	// average; it must be positive.
	BytesPerToken float64
	// PerMessage is the framing a message costs (role, separators).
	PerMessage int
	// PerImage is what an image block costs, whatever its size.
	PerImage int
}

// DefaultTokenRates returns the rates [EstimateTokens] uses: 4 bytes a
// token (English text on the BPE tokenizers of the OpenAI, Anthropic and
// Gemini models comes to 3.5 to 4.5), 4 tokens of framing a message,
// 1 000 tokens an image.
func DefaultTokenRates() TokenRates {
	return TokenRates{BytesPerToken: 4, PerMessage: 4, PerImage: 1000}
}

// EstimateTokens estimates the input tokens m costs with
// [DefaultTokenRates], for providers that do not implement
// [TokenEstimator].
func EstimateTokens(m *Message) int { return DefaultTokenRates().Estimate(m) }

// Estimate returns the tokens m costs at rates r: at least PerMessage.
// Its cost is proportional to the number of m's blocks and tool calls; it
// never reads the text itself, only its length.
func (r TokenRates) Estimate(m *Message) int {
	n, images := len(m.ToolCallID), 0
	if m.Content.IsBlocks() {
		for _, b := range m.Content.Blocks() {
			if b.Type == BlockImage {
				images++
			}
			n += len(b.Text) + len(b.Data)
		}
	} else {
		n += len(m.Content.Text())
	}
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		n += len(tc.ID) + len(tc.Name) + len(tc.Arguments)
	}
	return r.PerMessage + images*r.PerImage + r.tokens(n)
}

// EstimateText returns the tokens of a text of n bytes at rates r (no
// framing): the system prompt, a tool definition.
func (r TokenRates) EstimateText(n int) int { return r.tokens(n) }

func (r TokenRates) tokens(bytes int) int {
	if bytes <= 0 {
		return 0
	}
	per := r.BytesPerToken
	if per <= 0 {
		per = DefaultTokenRates().BytesPerToken
	}
	return int(float64(bytes)/per + 0.999)
}
