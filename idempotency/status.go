package idempotency

// Status is the word a store step answers with: the first element of a
// Lua script's reply, a [lifecycle] transition's Result.Status, and
// [ClaimResult.Status] (docs/DESIGN.md, "The record and its lifecycle").
// Each step answers a few of them, as its documentation says; a store
// turns the others into errors ([ErrStale], [ErrNotFound], ...).
//
// [lifecycle]: https://pkg.go.dev/github.com/obol-gateway/obol/idempotency/lifecycle
type Status string

// The answers of a claim ([Store.Claim]).
const (
	StatusClaimed              Status = "claimed" // dispatch: an attempt is reserved
	StatusHeld                 Status = "held"    // awaiting approval; no dispatch
	StatusReplay               Status = "replay"  // final result stored; replay it
	StatusRequestMismatch      Status = "request_mismatch"
	StatusDestinationConflict  Status = "destination_conflict"
	StatusInProgress           Status = "in_progress" // also a settle's: the attempt may still run
	StatusDenied               Status = "denied"      // also a decide's: the ticket is denied
	StatusOutcomeUnknown       Status = "outcome_unknown"
	StatusScopeVersionConflict Status = "scope_version_conflict" // also a settle's and a decide's
	// StatusRefused answers a claim with Refuse set whose record is not
	// final: nothing was written.
	StatusRefused Status = "refused"
	// StatusNoRecord answers a claim with NoCreate set when no live record
	// is under its key: nothing was written.
	StatusNoRecord Status = "no_record"
)

// The limits of a claim's [StatusOutcomeUnknown] that refused a redispatch
// the vendor could deduplicate ([ClaimResult.MaxAttemptsReached],
// [ClaimResult.RetryAfter]); [StatusMaxAttempts] is also a reservation's
// refusal.
const (
	StatusMaxAttempts Status = "max_attempts" // the slot's attempts that may leave are used up
	StatusBackoff     Status = "backoff"      // the redispatch waits for its backoff
)

// The answers of the steps after a claim.
const (
	StatusReserved       Status = "reserved"        // Reserve: the next attempt
	StatusRenewed        Status = "renewed"         // Renew
	StatusFinalized      Status = "finalized"       // Finalize
	StatusGivenBack      Status = "given_back"      // GiveBack
	StatusSettled        Status = "settled"         // Settle
	StatusApproved       Status = "approved"        // Decide
	StatusConflict       Status = "conflict"        // Decide: another decision stands
	StatusFound          Status = "found"           // Lookup
	StatusNotFound       Status = "not_found"       // no record, or another incarnation's
	StatusNotUnknown     Status = "not_unknown"     // Settle: the record is not unknown
	StatusStale          Status = "stale"           // the fencing token or incarnation moved on
	StatusCycleExhausted Status = "cycle_exhausted" // Reserve: the cycle had its two attempts
	StatusLeaseExpired   Status = "lease_expired"   // Reserve, Renew: the lease lapsed
	// StatusCorrupt is a claim on a record whose state no step knows: the
	// script fails rather than answer it.
	StatusCorrupt Status = "error"
)
