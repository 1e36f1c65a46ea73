package lifecycle

import (
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/internal/storereply"
)

// ReserveRequest is the one immediate second attempt of a cycle
// (internal/scriptargs.Reserve, by meaning).
type ReserveRequest struct {
	Token            int64 // the owner's current token
	Op               string
	Lease            int64
	UnknownRetention int64
	Timeout          int64
	PrevNever        bool   // the previous attempt never left
	Incarnation      string // the owner's, '' not compared
	MaxAttempts      int64  // the tool's max_attempts (at least 1)
}

// Reserve is Reserve-next at now.
//
// DESIGN, section "The record and its lifecycle": "Reserve-next ... and
// Finalize are compare-and-set on the fencing token" (stale otherwise),
// "Incarnations" (another record's is stale), one immediate second attempt
// per cycle (cycle_exhausted), a lapsed lease is never extended
// (lease_expired), "Tokens never restart" and the count of attempts that
// may have left (PrevNever takes the previous one back; the vendor's
// window then starts at this one), "max_attempts" (an attempt that would
// be one more than it to leave is not reserved). Reply: reserved {token,
// lease, attempt deadline[, applied]}.
func Reserve(cur *Record, q ReserveRequest, now int64) (Result, Write) {
	if cur == nil {
		return Result{Status: storereply.NotFound}, Write{}
	}
	if cur.fenced(q.Incarnation) {
		return Result{Status: storereply.Stale}, Write{}
	}
	r := cur.Clone()
	if r.Op == q.Op {
		r.Expires = now + q.UnknownRetention
		return Result{Status: storereply.Reserved, Token: r.Attempts, Lease: r.Lease, AttemptDeadline: r.AttemptDeadline, Applied: true},
			written(r, IndexAdd, false)
	}
	switch {
	case r.State != effectspec.InProgress || r.Attempts != q.Token:
		return Result{Status: storereply.Stale}, Write{}
	case r.Cycle >= 2:
		return Result{Status: storereply.CycleExhausted}, Write{}
	case r.Lease <= now:
		return Result{Status: storereply.LeaseExpired}, Write{}
	case !q.PrevNever && r.Sent >= q.MaxAttempts:
		return Result{Status: storereply.MaxAttempts}, Write{}
	}
	if !q.PrevNever {
		r.keepDeadline() // the attempt replaced may have left
	}
	r.ReservedAt = now
	r.Lease, r.AttemptDeadline = minLease(now, q.Lease, q.Timeout)
	r.Attempts, r.Cycle, r.Updated, r.Op, r.RenewOp = r.Attempts+1, r.Cycle+1, now, q.Op, ""
	if q.PrevNever {
		if r.Sent <= 1 {
			r.FirstSent = now // the first attempt that may leave
		}
	} else {
		r.Sent++
	}
	r.Expires = now + q.UnknownRetention
	return Result{Status: storereply.Reserved, Token: r.Attempts, Lease: r.Lease, AttemptDeadline: r.AttemptDeadline},
		written(r, IndexAdd, true)
}

// RenewRequest is a lease renewal (internal/scriptargs.Renew).
type RenewRequest struct {
	Token       int64
	Op          string
	Lease       int64
	Incarnation string
}

// Renew extends the lease of the attempt with token q.Token at now.
//
// DESIGN, section "The record and its lifecycle", "Leases": a
// compare-and-set on state in_progress, the token, the incarnation (another
// record's is not_found: the owner's is gone) and a lease that has not
// lapsed (lease_expired: never revived); the lease becomes min(now +
// lease, attempt deadline) and never shrinks; the TTL is kept. A re-sent
// renewal answers the lease it set. Reply: renewed {lease[, applied]}.
func Renew(cur *Record, q RenewRequest, now int64) (Result, Write) {
	if cur == nil || cur.fenced(q.Incarnation) {
		return Result{Status: storereply.NotFound}, Write{}
	}
	switch {
	case cur.State != effectspec.InProgress || cur.Attempts != q.Token:
		return Result{Status: storereply.Stale}, Write{}
	case cur.Lease <= now:
		return Result{Status: storereply.LeaseExpired}, Write{}
	case cur.RenewOp == q.Op:
		return Result{Status: storereply.Renewed, Lease: cur.Lease, Applied: true}, Write{}
	}
	r := cur.Clone()
	nl := now + q.Lease
	if r.AttemptDeadline != 0 && nl > r.AttemptDeadline {
		nl = r.AttemptDeadline // a record made before attempt deadlines has none
	}
	r.Lease = max(r.Lease, nl)
	r.RenewOp = q.Op
	return Result{Status: storereply.Renewed, Lease: r.Lease}, Write{Record: r}
}

// FinalizeRequest is an attempt's outcome (internal/scriptargs.Finalize).
type FinalizeRequest struct {
	Token       int64
	State       effectspec.Outcome // effectspec.Accepted, effectspec.DefinitelyRejected or effectspec.Unknown
	Op          string
	TTL         int64 // the record's retention from now
	Never       bool  // the attempt never left
	Incarnation string
	Result      EncodedResult
}

// Finalize stores the outcome of the attempt with token q.Token at now.
//
// DESIGN, section "The record and its lifecycle": a compare-and-set on
// the token and incarnation (stale otherwise), which "also applies when
// the lease-expiry path turned the record unknown without a new token
// (never over a settled or final record)"; the attempt's fields are
// dropped; "never sent" takes the attempt back only from an in_progress
// record ("Tokens never restart"); "Listing": a final outcome leaves the
// unknown index, unknown keeps its entry; "TTLs". Reply: finalized
// {record without body[, applied]}.
func Finalize(cur *Record, q FinalizeRequest, now int64) (Result, Write) {
	if cur == nil {
		return Result{Status: storereply.NotFound}, Write{}
	}
	if cur.Op == q.Op {
		return Result{Status: storereply.Finalized, Record: cur.head(), Applied: true}, Write{}
	}
	if cur.Attempts != q.Token || cur.fenced(q.Incarnation) || !cur.open() {
		return Result{Status: storereply.Stale}, Write{}
	}
	r := cur.Clone()
	was := r.State
	r.clearResult()
	r.endAttempt()
	r.State, r.Finalized, r.FinalizedAfter, r.Op = q.State, true, now-r.Created, q.Op
	r.dropCycle()
	r.setResult(q.Result)
	if q.Never && was == effectspec.InProgress && r.Sent > 0 {
		r.Sent--
	}
	r.Expires = now + q.TTL
	w := written(r, IndexRemove, false)
	if q.State == effectspec.Unknown {
		w = written(r, IndexAdd, false)
	}
	return Result{Status: storereply.Finalized, Record: r.head()}, w
}

// GiveBackRequest gives back a claim's attempt that nobody sent
// (internal/scriptargs.GiveBack).
type GiveBackRequest struct {
	Token            int64
	ClaimOp          string // the claim's op tag
	Op               string
	UnknownRetention int64
	Incarnation      string
}

// GiveBack is the give-back of the claim q.ClaimOp's token at now.
//
// DESIGN, section "The record and its lifecycle", "Settling a claim": a
// finalize-never-sent of the claim's own token, guarded by the claim op
// (K): it applies when the record is in_progress on that token or unknown on
// it without a finalize or settle, K is that claim with that token and the
// incarnation matches; the record becomes unknown (finalized), the attempt
// taken back, K marked given back, the index entry kept. Anything else is
// stale. Reply: given_back [applied].
func GiveBack(cur *Record, q GiveBackRequest, now int64) (Result, Write) {
	if cur == nil {
		return Result{Status: storereply.NotFound}, Write{}
	}
	if cur.Op == q.Op {
		return Result{Status: storereply.GivenBack, Applied: true}, Write{}
	}
	if cur.fenced(q.Incarnation) {
		return Result{Status: storereply.Stale}, Write{}
	}
	if cur.ClaimOp == "" || cur.ClaimOp != q.ClaimOp || cur.GivenBack || cur.ClaimToken != q.Token ||
		cur.Attempts != q.Token || !cur.open() {
		return Result{Status: storereply.Stale}, Write{}
	}
	r := cur.Clone()
	r.endAttempt()
	r.State, r.Finalized, r.FinalizedAfter, r.Op, r.GivenBack = effectspec.Unknown, true, now-r.Created, q.Op, true
	if r.Sent > 0 {
		r.Sent--
	}
	r.Expires = now + q.UnknownRetention
	return Result{Status: storereply.GivenBack}, written(r, IndexAdd, false)
}

// Expire is the record cur at now: nil once its retention ran out.
//
// DESIGN, section "The record and its lifecycle", "TTLs": a record lives
// its retention from its last change (unknown_retention from a
// reservation); once it expires the slot is as if never claimed, and a
// next claim starts again at token 1 in a new incarnation.
func Expire(cur *Record, now int64) *Record {
	if cur != nil && cur.Expires != 0 && now >= cur.Expires {
		return nil
	}
	return cur
}

// Lapsed reports whether r is in flight under a lease that ran out at
// now: it counts as unknown for listing and settling.
func Lapsed(r *Record, now int64) bool {
	return r.State == effectspec.InProgress && r.Lease <= now
}
