package lifecycle

import (
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/storereply"
)

// ClaimRequest is a claim's input (internal/scriptargs.Claim, by meaning).
// Durations are milliseconds.
type ClaimRequest struct {
	ScopeVersion     int64
	RequestHash      string
	Binding          effectspec.BindingKind
	Fingerprint      string
	Route            string // the route fields as the record stores them
	KeySource        byte
	ApprovalRequired bool   // the tool requires approval
	Ticket           string // the caller's ticket, or ''
	NewTicket        string // a new ticket, used if the claim holds
	Op               string // op tag
	Lease            int64
	Retention        int64
	VendorKey        string // '' for an unsupported binding
	UnknownRetention int64
	Timeout          int64 // the attempt timeout
	Refuse           bool  // answer refused rather than write a record that is not final
	NoCreate         bool  // answer no_record rather than create a record (the row "none")
	Window           int64 // how long the vendor deduplicates on the key
	Incarnation      string
	MaxAttempts      int64 // the tool's max_attempts (at least 1)
}

// Claim is one claim of the slot whose record is cur (nil: none) at now.
//
// DESIGN, section "The record and its lifecycle": the claim table, tried
// top to bottom after the scope version, the request hash and a re-sent
// claim (the same op id as the record's last operation: its answer
// again); then the copy of the cycle's claim (field K); then "none",
// "accepted / definitely_rejected" (replay), "in_progress, lease live",
// "held", "denied", "route or binding now differs" (destination_conflict,
// an expired lease first becoming unknown), "no attempt may have left"
// and "unknown ... binding header/body_pointer" inside the vendor's window
// (claimed, subject to "Approval on a redispatch", then "max_attempts"
// and "Backoff"), and last outcome_unknown. Replies: claimed {token,
// lease, applied, vendor key, attempt deadline, incarnation}, held
// {ticket[, applied]}, replay {record}, in_progress {attempt deadline},
// outcome_unknown [applied] or {0, limit[, retry after]}, and bare
// refusals (no_record: the row "none" under NoCreate).
func Claim(cur *Record, q ClaimRequest, now int64) (Result, Write) {
	if cur == nil {
		return claimFresh(q, now)
	}
	r := cur.Clone()
	if r.ScopeVersion != q.ScopeVersion {
		return Result{Status: idempotency.StatusScopeVersionConflict}, Write{}
	}
	if r.RequestHash != q.RequestHash {
		return Result{Status: idempotency.StatusRequestMismatch}, Write{}
	}
	sameRoute := r.Binding == q.Binding && r.Fingerprint == q.Fingerprint

	// A re-sent claim whose first send was applied answers what it answered.
	if r.Op == q.Op {
		switch r.State {
		case effectspec.InProgress:
			r.Expires = now + q.UnknownRetention
			return claimed(r, true), written(r, IndexAdd, false)
		case effectspec.Held:
			r.Expires = now + q.Retention
			return Result{Status: idempotency.StatusHeld, Ticket: r.Ticket, Applied: true}, Write{Record: r}
		case effectspec.Unknown:
			if holdsClaim(r, q.Op) {
				break // another claim's lease-expiry path kept o: the copy below answers the token
			}
			r.Expires = now + q.UnknownRetention
			return Result{Status: idempotency.StatusOutcomeUnknown, Applied: true}, written(r, IndexAdd, false)
		}
	}
	if r.State.Final() {
		return Result{Status: idempotency.StatusReplay, Record: cur.Clone()}, Write{}
	}
	if q.Refuse {
		return Result{Status: idempotency.StatusRefused}, Write{}
	}
	// A copy of the claim that made this cycle: its open token again, or,
	// after its give-back, outcome_unknown; otherwise judged by the rows.
	if r.ClaimOp != "" && r.ClaimOp == q.Op && r.GivenBack {
		return Result{Status: idempotency.StatusOutcomeUnknown, Applied: true}, Write{}
	}
	if holdsClaim(r, q.Op) {
		r.Expires = now + q.UnknownRetention
		return claimed(r, true), written(r, IndexAdd, false)
	}

	switch {
	case r.State == effectspec.InProgress && r.Lease > now:
		return Result{Status: idempotency.StatusInProgress, AttemptDeadline: r.AttemptDeadline}, Write{}
	case r.State == effectspec.Held:
		if q.Ticket != "" && q.Ticket == r.Ticket && r.Approved {
			if !sameRoute {
				return Result{Status: idempotency.StatusDestinationConflict}, Write{}
			}
			return reserveNext(r, q, now)
		}
		return Result{Status: idempotency.StatusHeld, Ticket: r.Ticket}, Write{}
	case r.State == effectspec.Denied:
		return Result{Status: idempotency.StatusDenied}, Write{}
	case r.State != effectspec.Unknown && r.State != effectspec.InProgress:
		return Result{Status: storereply.Corrupt}, Write{}
	}

	// Unknown, or in flight with an expired lease.
	if !sameRoute {
		if r.State == effectspec.InProgress {
			lapse(r, q, now, false)
			return Result{Status: idempotency.StatusDestinationConflict}, written(r, IndexAdd, false)
		}
		return Result{Status: idempotency.StatusDestinationConflict}, Write{}
	}
	if r.Sent == 0 || redispatchable(q.Binding) && now+q.Lease < r.first()+q.Window {
		switch {
		case r.ApprovalDenied:
			return Result{Status: idempotency.StatusDenied}, Write{}
		case q.ApprovalRequired && !r.Approved:
			// Held again: a ticket (once); state, TTL and index entry stay.
			if r.Ticket == "" {
				r.Ticket = q.NewTicket
				return Result{Status: idempotency.StatusHeld, Ticket: r.Ticket}, Write{Record: r}
			}
			return Result{Status: idempotency.StatusHeld, Ticket: r.Ticket}, Write{}
		}
		if res, w, refused := limited(r, q, now); refused {
			return res, w
		}
		return reserveNext(r, q, now)
	}
	if r.State == effectspec.InProgress {
		lapse(r, q, now, true)
		return Result{Status: idempotency.StatusOutcomeUnknown}, written(r, IndexAdd, false)
	}
	return Result{Status: idempotency.StatusOutcomeUnknown}, Write{}
}

// holdsClaim reports whether the claim op made r's current cycle and its
// token is still open (in flight, or unknown without a finalize).
func holdsClaim(r *Record, op string) bool {
	return r.ClaimOp != "" && r.ClaimOp == op && !r.GivenBack && r.ClaimToken == r.Attempts && r.open()
}

// claimFresh is the row "none": claimed with token 1, or held when the
// tool requires approval; refused (nothing written) when asked to refuse,
// then no_record (nothing written) when asked not to create a record.
func claimFresh(q ClaimRequest, now int64) (Result, Write) {
	if q.Refuse {
		return Result{Status: idempotency.StatusRefused}, Write{}
	}
	if q.NoCreate {
		return Result{Status: idempotency.StatusNoRecord}, Write{}
	}
	r := &Record{KeySource: q.KeySource, Binding: q.Binding, ScopeVersion: q.ScopeVersion, RequestHash: q.RequestHash,
		Fingerprint: q.Fingerprint, Route: q.Route, VendorKey: q.VendorKey, Incarnation: q.Incarnation,
		Created: now, Updated: now, Op: q.Op}
	if q.ApprovalRequired {
		r.State, r.Ticket, r.Expires = effectspec.Held, q.NewTicket, now+q.Retention
		return Result{Status: idempotency.StatusHeld, Ticket: q.NewTicket}, Write{Record: r}
	}
	r.State, r.Attempts, r.Sent, r.Cycle = effectspec.InProgress, 1, 1, 1
	r.Lease, r.AttemptDeadline = minLease(now, q.Lease, q.Timeout)
	r.ClaimOp, r.ClaimToken = q.Op, 1
	r.Expires = now + q.UnknownRetention
	return claimed(r, false), written(r, IndexAdd, true)
}

// claimed is the claimed reply for r's current token.
func claimed(r *Record, applied bool) Result {
	return Result{Status: idempotency.StatusClaimed, Token: r.Attempts, Lease: r.Lease, AttemptDeadline: r.AttemptDeadline,
		Applied: applied, VendorKey: r.VendorKey, Incarnation: r.Incarnation}
}

// limited refuses a redispatch past the slot's max_attempts (the attempts
// that may have left, not tokens) or before its backoff ends: lease x
// 2^(n-1) after the latest reservation, n >= 2 the attempts that may have
// left, at most backoffCap (the first redispatch goes once no lease is
// live, as ever). A slot that sent at most one attempt, and the copy of
// the cycle's claim, do not wait. The refusal records no op; a lapsed record
// first becomes unknown.
func limited(r *Record, q ClaimRequest, now int64) (Result, Write, bool) {
	res := Result{Status: idempotency.StatusOutcomeUnknown}
	switch {
	case r.Sent >= q.MaxAttempts:
		res.Limit = storereply.MaxAttempts
	case r.Sent > 1 && r.ClaimOp != q.Op:
		if wait := r.reserved() + backoff(q.Lease, r.Sent) - now; wait > 0 {
			res.Limit, res.RetryAfter = storereply.Backoff, wait
		}
	}
	if res.Limit == "" {
		return Result{}, Write{}, false
	}
	if r.State == effectspec.InProgress {
		lapse(r, q, now, false)
		return res, written(r, IndexAdd, false), true
	}
	return res, Write{}, true
}

// reserveNext reserves attempt n+1 as a new cycle of the claim q. The
// attempt it replaces may still run until its deadline, which the record
// keeps among the earlier ones'.
func reserveNext(r *Record, q ClaimRequest, now int64) (Result, Write) {
	r.clearResult()
	r.keepDeadline()
	r.ReservedAt = now
	r.Lease, r.AttemptDeadline = minLease(now, q.Lease, q.Timeout)
	if r.Sent == 0 {
		r.FirstSent = now // the first attempt that may leave
	}
	r.State, r.Attempts, r.Sent, r.Cycle = effectspec.InProgress, r.Attempts+1, r.Sent+1, 1
	r.Updated, r.Op, r.RenewOp = now, q.Op, ""
	r.ClaimOp, r.ClaimToken, r.GivenBack = q.Op, r.Attempts, false
	r.Expires = now + q.UnknownRetention
	return claimed(r, false), written(r, IndexAdd, true)
}

// lapse turns an in-flight record whose lease lapsed unknown: TTL and
// index entry refreshed, the attempt deadline kept (the attempt may still
// run at its gateway). setOp records the claim's op, so that its re-send
// answers outcome_unknown again.
func lapse(r *Record, q ClaimRequest, now int64, setOp bool) {
	r.State, r.Updated, r.Lease, r.Cycle, r.RenewOp = effectspec.Unknown, now, 0, 0, ""
	if setOp {
		r.Op = q.Op
	}
	r.Expires = now + q.UnknownRetention
}
