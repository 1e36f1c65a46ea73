package idempotency

import (
	"context"
	"time"
)

// Store keeps claim records. Every method is one atomic step on one record,
// except Decide and Ticket, which first resolve the ticket.
//
// A Store never dispatches: it tells the caller whether it may. An error from
// Claim or Reserve means "do not send": the step may or may not have been
// applied, so the caller re-sends it with the same OpID (which answers
// AlreadyApplied if it had been) until the store answers. A claimed answer
// that no caller will send is given back (GiveBack), never a token read by
// Lookup (docs/DESIGN.md, "The record and its lifecycle", "Settling a claim").
type Store interface {
	// Claim applies the state table of docs/DESIGN.md, "The record and its
	// lifecycle" in one atomic step, its rows tried top to bottom: a new key is
	// claimed with attempt 1 reserved (or held for approval); a different
	// request under the same key is request_mismatch; a live lease is
	// in_progress (with the attempt's deadline); a final record is replayed
	// with its original route record, whatever the request resolves to now. The
	// route and binding are compared only where the answer would dispatch (an
	// approved resume, an unknown record, an in-flight one whose lease
	// expired): another one there is destination_conflict. A slot none of whose
	// attempts may have left (Record.SentAttempts 0) is claimed with the next
	// token for every binding; otherwise an unknown record gets one new attempt
	// only when the vendor deduplicates on our key and still remembers it (the
	// new attempt's lease ends inside VendorWindow from the slot's first
	// attempt that may have left), and is outcome_unknown otherwise. A claim
	// that would dispatch an existing record again for a tool that requires
	// approval needs the record's approval (one covers every redispatch of the
	// slot): without it the record is held again (held, with its ticket; state,
	// TTL and unknown-index entry kept), and once that is denied such a claim
	// answers denied. A claim with Refuse replays a final record and otherwise
	// answers refused, writing nothing.
	//
	// A record of a header or body_pointer binding is created with its
	// VendorKey (docs/DESIGN.md, "The key on the vendor hop"), which every
	// claimed answer returns unchanged. A record is created with an
	// incarnation, which every claimed answer returns
	// (ClaimResult.Incarnation). Every lease ends at the attempt deadline at
	// the latest. A claim whose Timeout plus the lease reaches the store's
	// unknown retention is ErrRetentionTooShort and writes nothing.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)
	// Reserve reserves attempt Token+1 if Token is current and in flight, and
	// the cycle has had only one attempt; otherwise ErrStale (also for
	// another record's Incarnation). A Timeout whose attempt could outlive
	// the record is ErrRetentionTooShort, as for Claim.
	Reserve(ctx context.Context, req ReserveRequest) (Reservation, error)
	// Renew extends the lease of attempt Token to min(now + Lease(), its
	// attempt deadline) and returns the new lease deadline. It is a
	// compare-and-set on state in_flight, the current token and a lease that
	// has not lapsed: it never revives a lapsed lease (ErrStale). A renewed
	// lease keeps the slot; it never allows a send that was not allowed. No
	// record, or another record's Incarnation, is ErrNotFound: the caller's
	// record is gone, which is fatal for its attempt.
	Renew(ctx context.Context, req RenewRequest) (time.Time, error)
	// Finalize records the outcome if Token (and Incarnation) is current;
	// otherwise ErrStale: the token, not the clock, is the fence.
	// It also applies when the lease-expiry path turned the record unknown
	// without a new token (never over a final record): the owner holds the
	// answer. It returns the record without the result body.
	Finalize(ctx context.Context, req FinalizeRequest) (Record, error)
	// GiveBack takes back the attempt a claim reserved when no caller will
	// send it (see GiveBackRequest): nil when given back (or a re-send of a
	// give-back that was), ErrStale when the record moved on (another token,
	// a finalize, a settle, another claim's reservation), ErrNotFound if
	// there is no record. Like Finalize it is fenced by the token, and also
	// by the claim's op id, which Claim records with every reservation it
	// makes: a re-sent claim whose op id is the record's claim op id answers
	// claimed with its token (AlreadyApplied) while that token is still in
	// flight or unknown without a finalize, and outcome_unknown
	// (AlreadyApplied) once it was given back, so a late copy of a claim
	// never reserves a second attempt over its give-back.
	GiveBack(ctx context.Context, req GiveBackRequest) error
	// Lookup reads a record without changing it (ErrNotFound if none). An
	// in-flight record whose lease has expired reads as StateUnknown.
	Lookup(ctx context.Context, scope Scope, key Key) (Record, error)
	// Ticket resolves an approval ticket (ErrNotFound if none).
	Ticket(ctx context.Context, id string) (Ticket, error)
	// Decide approves or denies a held call. The first decision is final:
	// repeating it answers the ticket, contradicting it is ErrDenied or
	// ErrStale. A record that a claim held again in another state keeps
	// that state and TTL: approving sets Record.Approved, denying
	// Record.ApprovalDenied (an unknown record stays unknown).
	Decide(ctx context.Context, req DecideRequest) (Ticket, error)
	// Lease returns the lease of a reservation. A caller measures its send
	// deadline with it on its own clock, from just before the reservation.
	Lease() time.Duration
}
