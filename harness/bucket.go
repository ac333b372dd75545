package harness

import (
	"github.com/armature-go/armature/errcat"
)

// Bucket is one of the three user-facing error classes of harness §7.
// Buckets are wire identifiers and must not change.
type Bucket string

// The three buckets.
const (
	// SessionTerminating: the session's state is broken; the caller
	// should not retry and the conversation cannot continue (§7.1).
	SessionTerminating Bucket = "session_terminating"
	// RetryableTransient: the same request may succeed later (§7.2).
	RetryableTransient Bucket = "retryable_transient"
	// UserCorrectable: the caller must change its input (§7.3).
	UserCorrectable Bucket = "user_correctable"
)

// buckets is the classification table of harness §7 and harness-chat §10,
// with the spec's inconsistencies settled (see Classify).
var buckets = map[errcat.Category]Bucket{
	// §7.1 / chat §10.1: the session cannot continue.
	errcat.SessionLoadFailed:                   SessionTerminating,
	errcat.SessionStateMigrationMissing:        SessionTerminating,
	errcat.SessionStateMigrationChainAmbiguous: SessionTerminating,
	errcat.SessionStateMigrationFailed:         SessionTerminating,
	errcat.SuspensionPersistenceFailed:         SessionTerminating,
	errcat.HarnessSessionIDUnresolved:          SessionTerminating,

	// §7.2 / chat §10.2: retry may succeed.
	errcat.ProviderUnavailable:             RetryableTransient,
	errcat.ProviderRateLimit:               RetryableTransient,
	errcat.ProviderRateLimited:             RetryableTransient,
	errcat.ProviderTimeout:                 RetryableTransient,
	errcat.ProviderModelNotLoaded:          RetryableTransient,
	errcat.HarnessSignalSubscriptionFailed: RetryableTransient,
	errcat.SessionSaveFailed:               RetryableTransient,
	errcat.SessionWriteConflict:            RetryableTransient,
	errcat.SessionStoreUnavailable:         RetryableTransient,
	errcat.InvocationCancelled:             RetryableTransient,
	errcat.PromptStoreUnavailable:          RetryableTransient,

	// §7.3 / chat §10.3: the caller must change something.
	errcat.ProviderInvalidRequest:             UserCorrectable,
	errcat.ProviderInvalidResponse:            UserCorrectable,
	errcat.ProviderAuthentication:             UserCorrectable,
	errcat.ProviderInvalidModel:               UserCorrectable,
	errcat.ProviderUnsupportedContentBlock:    UserCorrectable,
	errcat.StructuredOutputInvalid:            UserCorrectable,
	errcat.SuspensionResumePayloadInvalid:     UserCorrectable,
	errcat.SuspensionRecordInvalid:            UserCorrectable,
	errcat.HarnessSignalCorrelationFailed:     UserCorrectable,
	errcat.HarnessPathClassificationAmbiguous: UserCorrectable,
	errcat.ChatMessageShapeInvalid:            UserCorrectable,
	errcat.MessageIDReused:                    UserCorrectable,
	errcat.StateValidationError:               UserCorrectable,
	// A managed prompt that is missing or does not render: retrying
	// unchanged cannot help, the prompt or its variables must change.
	errcat.PromptNotFound:     UserCorrectable,
	errcat.PromptRenderError:  UserCorrectable,
	errcat.PromptGroupInvalid: UserCorrectable,
}

// BucketOf returns the bucket of a category. Categories the table does
// not name — programming errors such as routing_error, reducer_error, a
// node_exception whose cause carries no category, checkpoint failures —
// are RetryableTransient: the engine wrote nothing for the failed turn,
// so the session is intact and the caller may try again, but nothing the
// user changes would help.
//
// The table settles three points the spec leaves open:
//
//   - session_save_failed (and session_write_conflict) is
//     RetryableTransient, as harness §7.2 has it, not session-terminating
//     as harness-chat §10.1 lists it: Armature's stores write a turn in
//     one transaction, so a failed save leaves the previous session state
//     intact and the conversation can go on.
//   - provider_rate_limited (harness-chat §10.2's spelling) classifies as
//     llm-provider §7's provider_rate_limit; Armature emits only the
//     latter.
//   - provider_timeout (harness-chat §10.2, absent from llm-provider §7)
//     is RetryableTransient.
func BucketOf(c errcat.Category) Bucket {
	if b, ok := buckets[c]; ok {
		return b
	}
	return RetryableTransient
}

// Classify returns the turn-boundary category and bucket of err: the
// derived category of its cause chain (pipeline-utilities §6.4 — the
// outermost category that is not an engine carrier such as
// node_exception, e.g. provider_unavailable raised inside a node), or the
// carrier's own category when no cause has one. It returns "" and
// RetryableTransient for an uncategorized error.
func Classify(err error) (errcat.Category, Bucket) {
	if err == nil {
		return "", ""
	}
	c, _ := errcat.Derived(err)
	if c == "" {
		c = errcat.Of(err)
	}
	return c, BucketOf(c)
}

// RetrySafe reports whether retrying the same request unchanged is
// expected to help: the category is transient by its spec
// (errcat.Category.Transient), or it is a storage hiccup that left the
// session intact.
func RetrySafe(c errcat.Category) bool {
	switch c {
	case errcat.SessionSaveFailed, errcat.SessionWriteConflict, errcat.SessionStoreUnavailable, errcat.HarnessSignalSubscriptionFailed:
		return true
	}
	return c.Transient()
}
