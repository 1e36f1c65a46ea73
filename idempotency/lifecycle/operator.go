package lifecycle

import (
	"strconv"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/storereply"
)

// SettleRequest is an operator's resolution of an unknown record
// (internal/scriptargs.Settle, by meaning).
type SettleRequest struct {
	Attempts     int64              // the attempt count the operator saw
	State        effectspec.Outcome // effectspec.Accepted or effectspec.DefinitelyRejected
	Op           string
	Retention    int64
	Who, Note    string
	Margin       int64 // the store's lease
	ScopeVersion int64
	Result       EncodedResult
}

// Settle resolves the record cur at now.
//
// DESIGN, section "The record and its lifecycle", "Resolving unknown": a
// compare-and-set on the state (unknown, or in_progress under a lapsed
// lease; not_unknown otherwise), the scope version
// (scope_version_conflict) and the attempt count (stale); a record that
// still has its attempt deadline, or the deadline of an earlier attempt
// that may have left, is not settled until the later one plus one lease
// (in_progress {settleable at, now}); the resolution goes to the
// record, the index entry goes, the TTL never shrinks. Reply: settled
// {record without body[, applied]}.
func Settle(cur *Record, q SettleRequest, now int64) (Result, Write) {
	switch {
	case cur == nil:
		return Result{Status: storereply.NotFound}, Write{}
	case cur.Op == q.Op:
		return Result{Status: storereply.Settled, Record: cur.head(), Applied: true}, Write{}
	case cur.ScopeVersion != q.ScopeVersion:
		return Result{Status: idempotency.StatusScopeVersionConflict}, Write{}
	case !(cur.State == effectspec.Unknown || Lapsed(cur, now)):
		return Result{Status: storereply.NotUnknown}, Write{}
	case cur.Attempts != q.Attempts:
		return Result{Status: storereply.Stale}, Write{}
	case cur.runsUntil() != 0 && now <= cur.runsUntil()+q.Margin:
		return Result{Status: idempotency.StatusInProgress, SettleAt: cur.runsUntil() + q.Margin, Now: now}, Write{}
	}
	r := cur.Clone()
	r.clearResult()
	r.endAttempt()
	r.State, r.Finalized, r.FinalizedAfter, r.Op = q.State, true, now-r.Created, q.Op
	r.dropCycle()
	r.Resolution = q.Who + "\x1f" + strconv.FormatInt(now, 10) + "\x1f" + q.Note
	r.setResult(q.Result)
	if r.Expires != 0 && r.Expires-now < q.Retention {
		r.Expires = now + q.Retention
	}
	return Result{Status: storereply.Settled, Record: r.head()}, written(r, IndexRemove, false)
}

// DecideRequest is an approval decision on a ticket
// (internal/scriptargs.Decide).
type DecideRequest struct {
	Ticket       string
	Approve      bool
	Op           string
	Retention    int64
	ScopeVersion int64
}

// Decide approves or denies the ticket of the record cur at now.
//
// DESIGN, section "The record and its lifecycle", "Approval on a
// redispatch" and "Approval": the first decision is final (repeating it
// answers it again, contradicting it answers conflict with the decision
// that stands); a held record is approved (its claim with the ticket then
// dispatches) or denied (final: it leaves the index, TTL retention); a
// re-held record keeps its state, TTL and index entry and gets only its
// flag. A record of another scope version is scope_version_conflict. A
// final record that kept a re-hold's ticket without a decision answers
// not_found and writes nothing.
// Replies: approved or denied [applied], conflict {standing}.
func Decide(cur *Record, q DecideRequest, now int64) (Result, Write) {
	if cur == nil || cur.Ticket == "" || cur.Ticket != q.Ticket {
		return Result{Status: storereply.NotFound}, Write{}
	}
	if cur.ScopeVersion != q.ScopeVersion {
		return Result{Status: idempotency.StatusScopeVersionConflict}, Write{}
	}
	var standing idempotency.Status
	switch {
	case cur.State == effectspec.Denied || cur.ApprovalDenied:
		standing = idempotency.StatusDenied
	case cur.Approved:
		standing = storereply.Approved
	}
	decision := idempotency.StatusDenied
	if q.Approve {
		decision = storereply.Approved
	}
	if standing != "" {
		switch {
		case cur.Op == q.Op:
			return Result{Status: standing, Applied: true}, Write{}
		case standing == decision:
			return Result{Status: standing}, Write{}
		}
		return Result{Status: storereply.Conflict, Standing: standing}, Write{}
	}
	if cur.State.Final() {
		// Settled while re-held, say: nothing awaits a decision, and
		// nothing is written.
		return Result{Status: storereply.NotFound}, Write{}
	}
	r := cur.Clone()
	if r.State != effectspec.Held {
		r.Approved, r.ApprovalDenied = q.Approve, !q.Approve
		return Result{Status: decision}, Write{Record: r}
	}
	r.Updated, r.Op, r.Expires = now, q.Op, now+q.Retention
	if q.Approve {
		r.Approved = true
		return Result{Status: decision}, Write{Record: r}
	}
	r.State = effectspec.Denied
	return Result{Status: decision}, Write{Record: r, Index: IndexRemove}
}
