package idempotency

import (
	"context"
	"time"
)

// Store keeps claim records. Every method is one atomic step on one record,
// except Decide and Ticket, which first resolve the ticket.
//
// A [Store] never dispatches: it tells the caller whether it may. An error from
// Claim or Reserve means "do not send": the step may or may not have been
// applied, so the caller re-sends it with the same OpID (which answers
// AlreadyApplied if it had been) until the store answers. A claimed answer
// that no caller will send is given back (GiveBack), never a token read by
// Lookup (docs/DESIGN.md, "The record and its lifecycle", "Settling a claim").
type Store interface {
	// Claim is one claim of the state table of docs/DESIGN.md, "The record
	// and its lifecycle", in one atomic step; the answer is one of its rows'
	// ([ClaimResult.Status]). A claimed answer carries the token, the lease and
	// attempt deadlines, the record's [VendorKey] (docs/DESIGN.md, "The key on
	// the vendor hop") and its Incarnation; a replay the stored record. A
	// claim whose Timeout plus the lease reaches the store's unknown
	// retention is [ErrRetentionTooShort] and writes nothing.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// Reserve is Reserve-next (docs/DESIGN.md, "The record and its
	// lifecycle"): attempt Token+1, or [ErrStale] (a stale token or
	// incarnation, a lapsed lease, a cycle that had its two attempts);
	// [ErrRetentionTooShort] as for Claim.
	Reserve(ctx context.Context, req ReserveRequest) (Reservation, error)
	// Renew extends the lease of attempt Token and returns its deadline
	// (docs/DESIGN.md, "The record and its lifecycle", leases): [ErrStale]
	// when the compare-and-set fails, [ErrNotFound] when the caller's record
	// is gone (no record, another Incarnation), which is fatal for its
	// attempt.
	Renew(ctx context.Context, req RenewRequest) (time.Time, error)
	// Finalize records the outcome of attempt Token, fenced by the token
	// and Incarnation ([ErrStale] otherwise; docs/DESIGN.md, "The record and
	// its lifecycle"), and returns the record without the result body.
	Finalize(ctx context.Context, req FinalizeRequest) (Record, error)
	// GiveBack takes back the attempt a claim reserved that no caller will
	// send (docs/DESIGN.md, "The record and its lifecycle", "Settling a
	// claim"): nil when given back or re-sent after it was, [ErrStale] when
	// the record moved on, [ErrNotFound] without a record.
	GiveBack(ctx context.Context, req GiveBackRequest) error
	// Lookup reads a record without changing it ([ErrNotFound] if none). An
	// in-flight record whose lease has expired reads as [effectspec.Unknown].
	Lookup(ctx context.Context, scope Scope, key Key) (Record, error)
	// Ticket resolves an approval ticket ([ErrNotFound] if none).
	Ticket(ctx context.Context, id string) (Ticket, error)
	// Decide approves or denies a held or re-held call (docs/DESIGN.md,
	// "The record and its lifecycle", approval): repeating the decision
	// answers the ticket, contradicting it is [ErrDenied] or [ErrStale].
	Decide(ctx context.Context, req DecideRequest) (Ticket, error)
	// Lease returns the lease of a reservation. A caller measures its send
	// deadline with it on its own clock, from just before the reservation.
	Lease() time.Duration
}
