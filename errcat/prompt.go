package errcat

// Prompt-management categories (prompt-management §11).
const (
	// PromptNotFound: no prompt matches (name, label). Non-transient; a
	// manager does not fall back past it (prompt-management §9).
	PromptNotFound Category = "prompt_not_found"
	// PromptRenderError: rendering failed (an undefined variable, a
	// template syntax error, a value that cannot be rendered, or a chat
	// template rule). Non-transient.
	PromptRenderError Category = "prompt_render_error"
	// PromptStoreUnavailable: a prompt backend could not be reached
	// (network, filesystem I/O, vendor 5xx or timeout). Transient.
	PromptStoreUnavailable Category = "prompt_store_unavailable"
	// PromptGroupInvalid: a prompt group was built with fewer than two
	// members. Non-transient.
	PromptGroupInvalid Category = "prompt_group_invalid"
)
