package retry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// slot is a reserved attempt: its fencing token, the incarnation of the
// record it reserved (every reserve, renewal and finalize of the call
// carries it), the key the vendor receives, and when it was reserved.
type slot struct {
	token      int
	inc        string
	vendorKey  idempotency.Key
	reservedAt time.Time
}

// attempts sends the reserved attempt s and, when the rules of
// docs/DESIGN.md, "Attempts and retries" allow, reserves and sends a second
// one. It returns the last attempt's slot and result, to finalize. ctx no
// longer carries the caller's cancellation. Each attempt must start sending
// before its lease ends (minus the margin), measured on the gateway's clock
// from just before its reservation; once sent, it may run until the tool's
// timeout while the lease is renewed every lease/3 (docs/DESIGN.md, "The
// record and its lifecycle").
//
// A renewal that finds no record of s's incarnation (the record expired or
// was deleted under the attempt, and may have been made again with its
// tokens restarted) loses the lease for good: no second attempt, no
// finalize over another record, and an error.
func (o *Orchestrator) attempts(ctx context.Context, r *run, s slot) (slot, Result, error) {
	first := s.token
	for {
		res, gone := o.attempt(ctx, r, s)
		if gone {
			// ErrNotFound as well: the caller can tell the store lost the
			// record (expired, deleted, Redis lost data) from a take-over.
			return s, res, fmt.Errorf("retry: attempt %d: its record is gone (expired, deleted or lost by the store under the attempt): %w (%w)",
				s.token, idempotency.ErrStale, idempotency.ErrNotFound)
		}
		if s.token != first || !secondAttempt(r.d, res) {
			return s, res, nil
		}
		next, err := o.reserve(ctx, r, s, res)
		if err != nil {
			// No reservation, no send: finalize what the first attempt showed.
			return s, res, nil
		}
		s = next
	}
}

// reserve reserves the attempt after s, whose result was res. A first
// attempt proven unsent is taken back in the same step, so it never burns
// the slot (docs/DESIGN.md, "The record and its lifecycle").
func (o *Orchestrator) reserve(ctx context.Context, r *run, s slot, res Result) (slot, error) {
	call := r.call
	req := idempotency.ReserveRequest{Scope: call.Scope, Key: call.Key, Token: s.token,
		Timeout: r.req.Timeout, PreviousNeverSent: res.Phase == BeforeSend, Incarnation: s.inc,
		MaxAttempts: r.req.MaxAttempts, OpID: idempotency.NewOpID()}
	at := time.Now()
	var rsv idempotency.Reservation
	rctx, end := o.span(ctx, spanReserve, Attr{attrAttempt, s.token + 1})
	err := o.storeOp(rctx, call, "reserve", func(ctx context.Context) (err error) {
		rsv, err = o.Store.Reserve(ctx, req)
		return err
	})
	end(err)
	if err != nil {
		return s, err
	}
	s.token, s.reservedAt = rsv.Token, at
	return s, nil
}

// attempt sends the attempt of s, renewing its lease while it runs. gone
// says a renewal found no record of s's incarnation: the lease is lost.
func (o *Orchestrator) attempt(ctx context.Context, r *run, s slot) (res Result, gone bool) {
	call := r.call
	lease := o.Store.Lease()
	sendBy := s.reservedAt.Add(lease - o.margin())
	sctx, end := o.span(ctx, spanAttempt, Attr{attrAttempt, s.token}, Attr{attrBinding, string(call.Route.Binding)})
	actx, cancel := context.WithDeadline(WithSendDeadline(sctx, sendBy), s.reservedAt.Add(r.req.Timeout))
	defer cancel()
	stop := o.renew(ctx, call, s.token, s.inc, lease)
	began := time.Now()
	if time.Now().Before(sendBy) {
		res = call.Target.Send(actx, Attempt{Key: s.vendorKey, Number: s.token, Arguments: call.Arguments, Spec: call.Spec})
	} else {
		res = Result{Phase: BeforeSend, Err: newError(BeforeSend, "request", ErrSendDeadline)}
	}
	gone = stop()
	attrs := []Attr{{attrPhase, string(res.Phase)}}
	if res.Phase == Responded {
		attrs = append(attrs, Attr{attrStatus, res.Status})
	}
	end(res.Err, attrs...)
	if o.OnAttempt != nil {
		o.OnAttempt(call, s.token, res, time.Since(began))
	}
	return res, gone
}

// renew renews the lease of attempt token every lease/3 until stop is called or
// a renewal fails. A failed renewal stops nothing already sent: the finalize's
// compare-and-set decides (docs/DESIGN.md, "The record and its lifecycle"),
// except that a renewal answered ErrNotFound (no record of incarnation inc: it
// expired or was deleted under the attempt) is fatal: stop reports it, and the
// attempt finalizes nothing.
//
// Renewals run on a timer rather than a goroutine of their own: almost every
// attempt ends long before its first renewal, and starting, waking and
// waiting for a goroutine per attempt costs each call a scheduler hand-off.
// stop waits for a renewal that is running.
func (o *Orchestrator) renew(ctx context.Context, call *Call, token int, inc string, lease time.Duration) (stop func() (gone bool)) {
	every := lease / 3
	r := &renewal{}
	next := time.Now().Add(every)
	r.mu.Lock()
	r.t = time.AfterFunc(every, func() {
		r.mu.Lock()
		if r.stopped {
			r.mu.Unlock()
			return
		}
		running := make(chan struct{})
		r.running = running
		r.mu.Unlock()

		rctx, cancel := context.WithTimeout(ctx, every)
		dl, err := o.Store.Renew(rctx, idempotency.RenewRequest{Scope: call.Scope, Key: call.Key, Token: token, Incarnation: inc, OpID: idempotency.NewOpID()})
		cancel()
		if o.OnRenew != nil {
			o.OnRenew(call, token, dl, err)
		}

		r.mu.Lock()
		defer r.mu.Unlock()
		r.running = nil
		close(running)
		gone := errors.Is(err, idempotency.ErrNotFound)
		r.gone = r.gone || gone
		// ErrStale: the slot is another's now, or the attempt deadline
		// passed; nothing is left to renew. ErrNotFound: the record is gone.
		if !r.stopped && !errors.Is(err, idempotency.ErrStale) && !gone {
			// Keep the cadence of a ticker: a slow renewal does not push
			// the next one later.
			next = next.Add(every)
			if now := time.Now(); next.Before(now) {
				next = now
			}
			r.t.Reset(time.Until(next))
		}
	})
	r.mu.Unlock()
	return r.stop
}

// renewal is the timer state of renew.
type renewal struct {
	mu      sync.Mutex
	t       *time.Timer
	stopped bool
	gone    bool          // a renewal found no record of the attempt's incarnation
	running chan struct{} // closed when the renewal running now ends; nil if none
}

// stop ends the renewals, waits for one that is running, and reports
// whether one found the record gone.
func (r *renewal) stop() bool {
	r.mu.Lock()
	r.stopped = true
	r.t.Stop()
	running := r.running
	r.mu.Unlock()
	if running != nil {
		<-running
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gone
}

// secondAttempt is the rule of docs/DESIGN.md, "Attempts and retries": a proven
// before_send failure, or a complete response with a retryable status and a
// vendor binding, or one its Target found retryable (Result.Retryable). The
// second attempt has a reservation, and so a lease, of its own.
func secondAttempt(d *Dispatch, res Result) bool {
	switch res.Phase {
	case BeforeSend:
		// A deadline that fired before a byte left means no time, not a
		// fault, and an invalid request stays invalid.
		return !errors.Is(res.Err, context.DeadlineExceeded) && !errors.Is(res.Err, context.Canceled) &&
			!errors.Is(res.Err, idempotency.ErrInvalidRequest) && !errors.Is(res.Err, ErrSendDeadline)
	case Responded:
		// A Target's own Retryable still needs a binding the vendor
		// deduplicates on.
		return !res.Truncated && (slices.Contains(d.retryable, res.Status) || res.Retryable && d.dedup)
	}
	return false
}

// finalize records the outcome of the attempt of s, which showed res, and
// answers the call.
func (o *Orchestrator) finalize(ctx context.Context, r *run, s slot, res Result) (Answer, error) {
	call := r.call
	state := effectspec.Unknown
	var stored *idempotency.StoredResult
	if res.Phase == Responded {
		outcome := res.Outcome
		if outcome == "" {
			outcome = call.Spec.Classify(res.Status)
		}
		switch outcome {
		case effectspec.Accepted:
			state = effectspec.Accepted
		case effectspec.DefinitelyRejected:
			state = effectspec.DefinitelyRejected
		}
		stored = &idempotency.StoredResult{Status: res.Status, Header: safeHeaders(res.Header), Body: res.Body, BodyDropped: res.Truncated}
		stored = scrubbed(r.d, stored)
	}
	// A proven before_send attempt never left: it counts on the receipt but
	// does not burn the slot (docs/DESIGN.md, "The record and its lifecycle").
	neverSent := res.Phase == BeforeSend
	freq := idempotency.FinalizeRequest{Scope: call.Scope, Key: call.Key, Token: s.token, Outcome: state, Result: stored,
		NeverSent: neverSent, Incarnation: s.inc, OpID: idempotency.NewOpID()}
	ctx, end := o.span(ctx, spanFinalize, Attr{attrAttempt, s.token})
	// The lease was renewed while the attempt ran; a finalize by the current
	// token applies even after it, while nobody took the slot over.
	fctx, cancel := context.WithDeadline(ctx, latest(s.reservedAt.Add(o.Store.Lease()), time.Now().Add(max(o.margin(), o.Store.Lease()/2))))
	defer cancel()
	var rec idempotency.Record
	err := o.storeOp(fctx, call, "finalize", func(ctx context.Context) (err error) {
		rec, err = o.Store.Finalize(ctx, freq)
		return err
	})
	if err != nil {
		end(err)
		// The vendor's answer is real but unrecorded; the record reads unknown
		// once the lease ends. Say so rather than guess.
		return Answer{Key: call.Key, Result: stored}, fmt.Errorf("retry: finalize attempt %d: %w", s.token, err)
	}
	end(nil, Attr{attrOutcome, string(rec.State)}, Attr{attrAttemptCount, rec.AttemptCount})
	if neverSent && errors.Is(res.Err, idempotency.ErrInvalidRequest) {
		// It fails the same way every time: a refusal, not an outcome.
		return Answer{Key: call.Key}, res.Err
	}
	if neverSent && errors.Is(res.Err, idempotency.ErrVendorUnreachable) && rec.State == effectspec.Unknown && rec.SentAttempts == 0 {
		// The record's count covers every cycle: only a slot that never
		// sent is refused so; a redispatch of one whose earlier attempt
		// may have left stays unknown.
		return Answer{Key: call.Key}, &RefusalError{Err: idempotency.ErrVendorUnreachable, RetryAfter: o.unreachableRetryAfter(), Cause: res.Err}
	}
	rec.Result = stored
	return o.answer(call, r.req.RequestHash, rec, false), nil
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func safeHeaders(h http.Header) http.Header {
	var out http.Header
	for k, v := range h {
		if idempotency.SafeHeader(k) {
			if out == nil {
				out = http.Header{}
			}
			out[k] = append([]string(nil), v...)
		}
	}
	return out
}
