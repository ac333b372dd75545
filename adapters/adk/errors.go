package adk

import (
	"errors"

	"github.com/armature-go/armature/errcat"
)

// Sentinel errors of the ADK adapter; every message starts with "adk:".
var (
	// ErrInvalidConfig is wrapped by the errors of [Config.Validate].
	ErrInvalidConfig = errors.New("adk: invalid config")
	// ErrNoPending means a resume found no pending confirmation for the
	// call it names in the ADK session (it was answered already, or its
	// call is not in the history the adapter seeds a lost session
	// with). Its category is harness_signal_correlation_failed
	// (user-correctable): sending the approval again cannot help.
	ErrNoPending = errcat.Sentinel(errcat.HarnessSignalCorrelationFailed, "adk: no pending confirmation")
	// ErrInvalidToolCall is wrapped by the failure of a turn whose
	// bridged model (NewProviderModel: the workspace's model, an
	// OpenAI-compatible server) answered with a tool call that has no
	// id or no name: provider_invalid_response, as a native agent's
	// turn fails on such an answer, before ADK-Go runs the call or asks
	// its confirmation. No id is made up for it.
	ErrInvalidToolCall = errcat.Sentinel(errcat.ProviderInvalidResponse, "adk: a tool call of the model's answer lacks an id or name")
	// ErrInstructionState is wrapped by the failure of a turn whose
	// instruction ADK-Go's session-state templating could not fill (a
	// {key} placeholder whose key the session state lacks): a
	// configuration error the instruction's author corrects, so
	// prompt_render_error (user-correctable, not retryable), not
	// node_exception. Validate refuses such placeholders when the agent
	// is built, so a turn meets it only when the state it expected is
	// missing at run time.
	ErrInstructionState = errcat.Sentinel(errcat.PromptRenderError, "adk: the instruction's session-state placeholder could not be filled")
)
