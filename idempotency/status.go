package idempotency

// Status is the word a store step answers with: the first element of a
// Lua script's reply, a [lifecycle] transition's Result.Status, and
// [ClaimResult.Status] (docs/DESIGN.md, "The record and its lifecycle").
// The claim's answers are below; the other steps' words ("reserved",
// "stale", "not_found", ...) are the stores' own, and a store turns them
// into results or errors ([ErrStale], [ErrNotFound], ...).
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
