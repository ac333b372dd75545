// Package prompt is the prompt-management capability of the OpenArmature
// specification (spec/prompt-management): named, versioned, labelled
// prompt templates fetched from backends and rendered into
// [llm.Message] sequences ready for a provider.
//
// A [Prompt] is a text prompt (one template, rendered to one user
// message) or a chat prompt (role segments, content blocks with images,
// and placeholder segments into which the caller injects message lists
// such as the conversation so far). Backends fetch prompts:
//
//   - [Memory] holds prompts in memory;
//   - [Dir] reads prompt files from a directory (see its documentation
//     for the file format: versions, labels, sampling and token budget);
//   - [Langfuse] fetches from Langfuse's public prompts API;
//   - [Cache] caches another backend's prompts, honouring each fetch's
//     [FetchOptions.MaxAge] (prompt-management §5: 0 forces a fresh read,
//     N bounds the age of a served entry) and optionally serving stale
//     entries while the source is down (after a failed read, at once for
//     [CacheConfig.StaleRetry], rather than waiting on the source at
//     every fetch).
//
// A [Manager] composes backends with fallback (prompt-management §9: an
// unavailable backend falls through to the next, a prompt_not_found
// stops the search so a retired prompt is never served from a stale
// copy), resolves labels ([Labels], §7) and renders. Rendering ([Render])
// is local and strict: a variable the template uses but the caller did
// not give is a prompt_render_error naming it, as are chat-template rule
// violations (empty segments, missing or duplicate placeholders, images
// outside user messages). Errors carry the errcat categories
// prompt_not_found, prompt_render_error, prompt_store_unavailable
// (transient) and prompt_group_invalid; a render failure is a
// *[RenderError] with the prompt's identity.
//
// Templates use the substitution subset of Jinja2 ({{ name }},
// {{ a.b }}, {# comments #}); see [Template]. Langfuse prompts keep
// Langfuse's syntax, {{variable}} only, every other brace being literal
// text. Every rendered prompt
// carries a content hash of its messages ([Result.RenderedHash]) and of
// its template ([Prompt.TemplateHash]).
//
// Observability. [Activate] binds a rendered prompt to a context (and
// [ActivateGroup] a [Group]): the LLM, embedding and rerank calls made
// with that context from a graph node carry the prompt's identity
// ([Result.Identity]), its group's name and its token budget on their
// typed events, and the OTel observer renders them as the
// openarmature.prompt.* span attributes (prompt-management §12). A
// [TokenBudget] never changes a request; observers compare it with the
// call's usage (observability §5.5.15).
package prompt
