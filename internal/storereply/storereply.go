// Package storereply holds the words of a store step's answer that only
// the stores exchange: the Lua scripts, redisstore's reply decoder, the
// lifecycle transitions and the models built on them (docs/DESIGN.md, "The
// record and its lifecycle"). They are [idempotency.Status] values, so a
// step's answer has one type; the words a caller of a Store sees, a
// claim's answers, stay in idempotency. A store turns these into a
// result or an error ([idempotency.ErrStale], [idempotency.ErrNotFound],
// ...) before its caller sees them.
package storereply

import "github.com/obol-gateway/obol/idempotency"

// The limits of a claim's outcome_unknown that refused a redispatch the
// vendor could deduplicate ([idempotency.ClaimResult.MaxAttemptsReached],
// [idempotency.ClaimResult.RetryAfter]); MaxAttempts is also a
// reservation's refusal.
const (
	MaxAttempts idempotency.Status = "max_attempts" // the slot's attempts that may leave are used up
	Backoff     idempotency.Status = "backoff"      // the redispatch waits for its backoff
)

// The answers of the steps after a claim.
const (
	Reserved       idempotency.Status = "reserved"        // Reserve: the next attempt
	Renewed        idempotency.Status = "renewed"         // Renew
	Finalized      idempotency.Status = "finalized"       // Finalize
	GivenBack      idempotency.Status = "given_back"      // GiveBack
	Settled        idempotency.Status = "settled"         // Settle
	Approved       idempotency.Status = "approved"        // Decide
	Conflict       idempotency.Status = "conflict"        // Decide: another decision stands
	Found          idempotency.Status = "found"           // Lookup
	NotFound       idempotency.Status = "not_found"       // no record, or another incarnation's
	NotUnknown     idempotency.Status = "not_unknown"     // Settle: the record is not unknown
	Stale          idempotency.Status = "stale"           // the fencing token or incarnation moved on
	CycleExhausted idempotency.Status = "cycle_exhausted" // Reserve: the cycle had its two attempts
	LeaseExpired   idempotency.Status = "lease_expired"   // Reserve, Renew: the lease lapsed
	// Corrupt is a claim on a record whose state no step knows: the
	// script fails rather than answer it.
	Corrupt idempotency.Status = "error"
)
