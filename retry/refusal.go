package retry

import (
	"context"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
)

// RefusalError is a refusal of [Orchestrator.Do] that says more than its
// sentinel: when to retry, or whether a new key is safe. Err is the
// sentinel, which errors.Is matches:
//
//   - [idempotency.ErrInProgress]: the key has an attempt in flight under a
//     live lease. RetryAfter is how long until that attempt's deadline (not
//     its lease, which its owner renews): by then it has an outcome or is
//     unknown. Measured on the gateway's clock; zero if unknown.
//   - [idempotency.ErrVendorUnreachable]: the last attempt failed to connect
//     and, after its finalize, no attempt of the slot may have left over all
//     its cycles. Nothing was sent and the slot stays open: a retry with the
//     same key dispatches it again, so a new key is safe too
//     (docs/DESIGN.md, "Attempts and retries"). RetryAfter is
//     [Orchestrator.UnreachableRetryAfter]; Cause is the last attempt's
//     error.
//   - [idempotency.ErrOutcomeUnknown]: an earlier attempt may have reached
//     the vendor and is not sent again now. A RetryAfter above zero says the
//     slot may be dispatched again (its vendor deduplicates on the key) once
//     its backoff ends; zero says no retry with the key is sent (the vendor
//     cannot deduplicate, its window passed, or MaxAttemptsReached: the
//     attempts that may have reached the vendor reached its max_attempts,
//     and only an operator's settle resolves it).
//   - [idempotency.ErrDenied]: an approver denied the slot. SafeNewKey, read
//     from the record after the denial, is true when nothing under the key
//     may have reached the vendor, false when an attempt may have, nil when
//     the record could not be read.
type RefusalError struct {
	Err                error
	RetryAfter         time.Duration
	MaxAttemptsReached bool
	SafeNewKey         *bool
	// Cause is for a log, never a caller: an [*Error] from an [Executor],
	// whose message is fixed vocabulary, or a Target's own error.
	Cause error
}

func (e *RefusalError) Error() string {
	msg := "retry: refused"
	if e.Err != nil {
		msg = e.Err.Error()
	}
	if e.Cause == nil {
		return msg
	}
	return msg + ": " + e.Cause.Error()
}

// Unwrap returns Err.
func (e *RefusalError) Unwrap() error { return e.Err }

// denied is the refusal of a claim answered denied. The answer does not
// say whether the slot sent anything (a held call denied sent nothing, a
// re-held unknown one may have), so the record is read once (bounded by
// ClaimWait) to tell the agent whether a new key is safe.
func (o *Orchestrator) denied(ctx context.Context, call *Call) error {
	e := &RefusalError{Err: idempotency.ErrDenied}
	lctx, cancel := context.WithTimeout(ctx, o.claimWait())
	defer cancel()
	if rec, err := o.Store.Lookup(lctx, call.Scope, call.Key); err == nil {
		e.SafeNewKey = receipt.Safe(rec.State == effectspec.Denied || rec.SentAttempts == 0 && !rec.State.Final())
	}
	return e
}
