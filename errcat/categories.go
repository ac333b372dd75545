package errcat

import "strings"

// Graph-engine compile-time categories (graph-engine §2).
const (
	// NoDeclaredEntry: no entry node was declared.
	NoDeclaredEntry Category = "no_declared_entry"
	// UnreachableNode: a declared node has no path from the entry.
	UnreachableNode Category = "unreachable_node"
	// DanglingEdge: an edge references a node name that is not declared.
	DanglingEdge Category = "dangling_edge"
	// MultipleOutgoingEdges: a node has more than one outgoing edge.
	MultipleOutgoingEdges Category = "multiple_outgoing_edges"
	// ConflictingReducers: a state field has more than one declared reducer.
	ConflictingReducers Category = "conflicting_reducers"
	// MappingReferencesUndeclaredField: a subgraph projection names a field
	// missing from the relevant schema.
	MappingReferencesUndeclaredField Category = "mapping_references_undeclared_field"
	// ConflictingProjectionForms: a subgraph node declares both the
	// same-name projection sets and an explicit inputs/outputs mapping.
	ConflictingProjectionForms Category = "conflicting_projection_forms"
	// ReducerConfigurationInvalid: a reducer factory got invalid parameters.
	ReducerConfigurationInvalid Category = "reducer_configuration_invalid"
	// InvalidGraph covers structural mistakes the spec does not name, such
	// as a duplicate node or field name or an empty node name
	// (Armature extension).
	InvalidGraph Category = "invalid_graph"
)

// Graph-engine compile-time warning categories (graph-engine §2).
const (
	// ProjectionReducerRoundTrip: a projection copies a field into a
	// subgraph and merges it back through a reducer that is not
	// round-trip-idempotent.
	ProjectionReducerRoundTrip Category = "projection_reducer_round_trip"
)

// Graph-engine runtime categories (graph-engine §4).
const (
	// NodeException: a node raised; the user's error is the cause.
	NodeException Category = "node_exception"
	// EdgeException: an edge function raised.
	EdgeException Category = "edge_exception"
	// ReducerError: a reducer raised while merging an update.
	ReducerError Category = "reducer_error"
	// RoutingError: a conditional edge returned a destination that is
	// neither a declared node nor END.
	RoutingError Category = "routing_error"
	// StateValidationError: state failed schema validation.
	StateValidationError Category = "state_validation_error"
	// InvocationCancelled: the invocation's context was cancelled or its
	// deadline passed between steps (Armature extension; the cause is the
	// context error).
	InvocationCancelled Category = "invocation_cancelled"
)

// Fan-out categories (pipeline-utilities §9).
const (
	// FanOutEmpty: the resolved instance count is zero and on_empty is
	// "raise" (run time; a node_exception subtype).
	FanOutEmpty Category = "fan_out_empty"
	// FanOutInvalidCount: a count callable returned a negative value.
	FanOutInvalidCount Category = "fan_out_invalid_count"
	// FanOutInvalidConcurrency: the resolved concurrency is zero or
	// negative.
	FanOutInvalidConcurrency Category = "fan_out_invalid_concurrency"
	// FanOutFieldNotList: items_field is not a list-typed field (compile).
	FanOutFieldNotList Category = "fan_out_field_not_list"
	// FanOutCountModeAmbiguous: both or neither of items_field and count
	// are configured (compile).
	FanOutCountModeAmbiguous Category = "fan_out_count_mode_ambiguous"
	// FanOutDegradedUpdateMissingCollectField: a static degraded update of
	// instance failure isolation omits collect_field (compile).
	FanOutDegradedUpdateMissingCollectField Category = "fan_out_degraded_update_missing_collect_field"
)

// Parallel-branches categories (pipeline-utilities §11.9).
const (
	// ParallelBranchesNoBranches: the branches mapping is empty (compile).
	ParallelBranchesNoBranches Category = "parallel_branches_no_branches"
	// ParallelBranchesInvalidBranchSpec: a branch declares both or neither
	// of subgraph and call (compile).
	ParallelBranchesInvalidBranchSpec Category = "parallel_branches_invalid_branch_spec"
	// ParallelBranchesBranchFailed: a branch failed under fail_fast (run
	// time; a node_exception carrier subtype).
	ParallelBranchesBranchFailed Category = "parallel_branches_branch_failed"
)

// LLM provider categories (llm-provider §7).
const (
	ProviderAuthentication          Category = "provider_authentication"
	ProviderUnavailable             Category = "provider_unavailable"
	ProviderInvalidModel            Category = "provider_invalid_model"
	ProviderModelNotLoaded          Category = "provider_model_not_loaded"
	ProviderRateLimit               Category = "provider_rate_limit"
	ProviderInvalidResponse         Category = "provider_invalid_response"
	ProviderInvalidRequest          Category = "provider_invalid_request"
	ProviderUnsupportedContentBlock Category = "provider_unsupported_content_block"
	StructuredOutputInvalid         Category = "structured_output_invalid"
)

// Transient reports whether a category is transient by its carrying spec:
// retrying the same call may succeed (pipeline-utilities §6.1).
func (c Category) Transient() bool {
	switch c {
	case ProviderUnavailable, ProviderRateLimit, ProviderRateLimited, ProviderTimeout, ProviderModelNotLoaded,
		PromptStoreUnavailable:
		return true
	}
	return false
}

// Session categories (sessions §10).
const (
	SessionLoadFailed                   Category = "session_load_failed"
	SessionSaveFailed                   Category = "session_save_failed"
	SessionStateMigrationMissing        Category = "session_state_migration_missing"
	SessionStateMigrationChainAmbiguous Category = "session_state_migration_chain_ambiguous"
	SessionStateMigrationFailed         Category = "session_state_migration_failed"
	SessionWriteConflict                Category = "session_write_conflict"
	// SessionStoreUnavailable (an extension, retryable): the session
	// store could not be reached to load a session (a lost or refused
	// connection, a store timeout, a database shutting down or out of
	// connections). The session is intact: unlike session_load_failed,
	// whose store raised an unrecoverable error, the conversation goes on
	// once the store answers again.
	SessionStoreUnavailable Category = "session_store_unavailable"
)

// Checkpoint categories (pipeline-utilities §10.10).
const (
	CheckpointNotFound                     Category = "checkpoint_not_found"
	CheckpointRecordInvalid                Category = "checkpoint_record_invalid"
	CheckpointSaveFailed                   Category = "checkpoint_save_failed"
	CheckpointStateMigrationMissing        Category = "checkpoint_state_migration_missing"
	CheckpointStateMigrationChainAmbiguous Category = "checkpoint_state_migration_chain_ambiguous"
	CheckpointStateMigrationFailed         Category = "checkpoint_state_migration_failed"
)

// Suspension categories (suspension §9).
const (
	SuspensionPersistenceFailed    Category = "suspension_persistence_failed"
	SuspensionRecordInvalid        Category = "suspension_record_invalid"
	SuspensionResumePayloadInvalid Category = "suspension_resume_payload_invalid"
	SuspensionInUnsupportedContext Category = "suspension_in_unsupported_context"
)

// Framework reports whether c is a framework category that surfaces
// unwrapped, never inside a node_exception carrier: failures of the
// engine's own machinery (suspension, sessions) rather than of user code.
func (c Category) Framework() bool {
	return strings.HasPrefix(string(c), "suspension_") || strings.HasPrefix(string(c), "session_")
}

// ProviderTimeout: a provider call timed out (harness-chat §10.2 lists it
// among the retryable transients; llm-provider §7 has no such category, so
// Armature's providers report a timeout as provider_unavailable and this
// category only classifies errors other code reports under that name).
const ProviderTimeout Category = "provider_timeout"

// ProviderRateLimited is the spelling harness-chat §10.2 uses for
// llm-provider §7's provider_rate_limit. Armature never emits it; bucket
// classification treats it as provider_rate_limit, so errors decoded from
// other implementations classify the same.
const ProviderRateLimited Category = "provider_rate_limited"

// Harness categories (harness §10) and the chat harness's own
// (harness-chat §10.4).
const (
	// HarnessSessionIDUnresolved: a sessioned transmission's session id
	// could not be resolved (missing or malformed).
	HarnessSessionIDUnresolved Category = "harness_session_id_unresolved"
	// HarnessSignalSubscriptionFailed: at suspend time the signal
	// subscription could not be registered.
	HarnessSignalSubscriptionFailed Category = "harness_signal_subscription_failed"
	// HarnessSignalCorrelationFailed: an arriving signal maps to no paused
	// invocation (or to more than one).
	HarnessSignalCorrelationFailed Category = "harness_signal_correlation_failed"
	// HarnessPathClassificationAmbiguous: a transmission fits more than
	// one dispatch path, or none.
	HarnessPathClassificationAmbiguous Category = "harness_path_classification_ambiguous"
	// ChatMessageShapeInvalid: the message given to the chat harness's
	// Send fails llm-provider §3 validation.
	ChatMessageShapeInvalid Category = "chat_message_shape_invalid"
	// MessageIDReused: a message id (chat.WithMessageID: a REST
	// message_id, an Idempotency-Key, an OpenHarness request_id) given
	// again with another message than the one it first named (Armature
	// extension: the spec leaves a retransmission's contents to the
	// implementation).
	MessageIDReused Category = "message_id_reused"
)

// Observability categories (observability §3.4; Armature extension: the
// spec leaves the API-boundary error idiom to each language).
const (
	// InvalidInvocationMetadata: caller-supplied invocation metadata has
	// a reserved key (openarmature.* / gen_ai.* or a reserved OA metadata
	// name) or a value that is not an OTel attribute value.
	InvalidInvocationMetadata Category = "invalid_invocation_metadata"
)
