// Package wire is the HTTP plumbing the provider mappings (llm/openai,
// llm/anthropic, llm/gemini) share: the pooled default client, the
// per-call default timeout, building and sending a request, reading a
// bounded error body, mapping transport failures onto
// *llm.ProviderError, and redacting the API key and extra header values
// from every error and log record.
//
// Each mapping keeps its own wire shapes, status and error-body mapping
// and public API; wire holds only the logic that is the same in all of
// them.
//
// A [Client] is read-only after [New] and safe for concurrent
// use.
//
// Typical use inside a mapping:
//
//	h := http.Header{}
//	h.Set("Authorization", "Bearer "+cfg.APIKey)
//	c := wire.New(wire.Config{Provider: "openai", HTTPClient: cfg.HTTPClient, Header: h,
//		APIKey: cfg.APIKey, ExtraHeaders: cfg.ExtraHeaders, Logger: cfg.Logger})
//
//	ctx, cancel := wire.WithTimeout(ctx, cfg.Timeout, DefaultTimeout)
//	defer cancel()
//	hreq, err := c.NewRequest(ctx, http.MethodPost, base+path, body, "application/json")
//	if err != nil {
//		return c.Fail("complete", errcat.ProviderInvalidRequest, 0, "", "cannot build the request", err)
//	}
//	resp, err := c.Send(ctx, "complete", hreq, "path", path)
//	if err != nil {
//		return err // the caller's cancellation, or provider_unavailable
//	}
//	if resp.StatusCode/100 != 2 {
//		return mapStatus(resp, wire.ReadErrorBody(resp))
//	}
package wire
