package retry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
)

// Orchestrator runs the lifecycle of one call: policy, claim, (reserve,) send,
// finalize. It owns every retry: at most one immediate second attempt per
// cycle, and only by the rules of docs/DESIGN.md, "Attempts and retries".
//
// The zero value is not usable: Store is required. An Orchestrator is safe for
// concurrent use once its fields are set.
type Orchestrator struct {
	// Store keeps the claims. Required.
	Store idempotency.Store

	// SafetyMargin is kept between an attempt's send deadline and the end of
	// its lease, for clock-rate drift, and is the least time a finalize gets.
	// If zero, a tenth of the store's lease. The lease itself is the store's
	// (Store.Lease): there is no second setting to disagree with it.
	SafetyMargin time.Duration

	// Policy is decided before the send: a denied call whose key holds a final
	// record still replays it (the claim decides, docs/DESIGN.md, "Scope and
	// the Redis key"); otherwise the denial is returned and nothing is written.
	// The zero Policy is production: writes without a vendor binding are
	// denied.
	Policy effectspec.Policy

	// StoreRetries is how many times a claim, reserve or finalize whose
	// reply was lost is re-sent with the same operation id (which makes the
	// re-send safe). If zero, 2; negative means none.
	StoreRetries int

	// ClaimWait is how long a caller waits for the claim's answer, its
	// re-sends (StoreRetries) included, before Do returns an error wrapping
	// idempotency.ErrStoreUnavailable (refserver: store_unavailable). The
	// claim runs detached from ctx's cancellation, bounded by ClaimWait
	// alone: once it is on the wire its outcome is always settled (see Do).
	// If zero or negative, DefaultClaimWait (2s). Before it existed, a
	// stalled Redis held a caller for the client's own timeouts: 14.2s
	// measured through refserver with rueidis's defaults, 10s of them its
	// ConnWriteTimeout (Dialer.KeepAlive x 10) on the first send, the rest
	// the two StoreRetries re-sends on fresh connections.
	ClaimWait time.Duration
	// MaxClaimRecoveries caps the claims settled in the background at once
	// (see Do); one more is reported RecoveryDropped and left as Redis has
	// it. If zero, DefaultMaxClaimRecoveries (256); negative means none.
	MaxClaimRecoveries int
	// ClaimRecoveryFor bounds how long a claim is re-sent in the background
	// while the store does not answer. Set it to the store's unknown
	// retention: a record the claim made expires by then. If zero or
	// negative, DefaultClaimRecoveryFor (7 days). Close stops re-senders
	// before.
	ClaimRecoveryFor time.Duration
	// MaxAttempts is the max_attempts of a tool whose spec sets none
	// (effectspec.Spec.MaxAttempts): how many attempts of one slot may
	// reach the vendor over its life. If zero,
	// effectspec.DefaultMaxAttempts.
	MaxAttempts int

	// UnreachableRetryAfter is the wait an UnreachableError suggests before
	// the retry with the same key. If zero or negative,
	// DefaultUnreachableRetryAfter (1s).
	UnreachableRetryAfter time.Duration

	// The hooks are function fields so a gateway can log and count; the
	// errors they get hold no secret.
	//
	// OnClaim, if non-nil, is called with every claim's answer.
	OnClaim func(call *Call, status idempotency.Status)
	// OnAttempt, if non-nil, is called after every attempt with what the
	// wire showed. res's Body and Header are the vendor's as received, not
	// yet scrubbed of the call's secrets: do not log them.
	OnAttempt func(call *Call, number int, res Result, elapsed time.Duration)
	// OnStoreError, if non-nil, is called with every store error (after
	// which the orchestrator either re-sends the same operation or fails closed),
	// except those a background re-sender meets (OnClaimRecovery reports it).
	OnStoreError func(call *Call, op string, err error)
	// OnRenew, if non-nil, is called after every lease renewal of an attempt
	// in flight, with the new lease deadline or the error.
	OnRenew func(call *Call, number int, lease time.Time, err error)
	// OnClaimRecovery, if non-nil, is called when a claim is handed to a
	// background re-sender (RecoveryStarted, or RecoveryDropped when none
	// takes it), and once more, from the re-sender's goroutine, when a
	// started one ends (RecoveryGivenBack, RecoverySettled, RecoveryStale,
	// RecoveryAbandoned).
	OnClaimRecovery func(call *Call, ev ClaimRecovery)

	// Tracer, if non-nil, gets a span for the claim, each attempt, the
	// reservation of a second attempt and the finalize, each a child of the
	// span in Do's ctx. The attempt's span is in the ctx its Target gets,
	// for propagation (HTTPTarget.InjectHeaders, which sends the W3C
	// traceparent). If nil, no spans.
	Tracer Tracer

	recOnce sync.Once
	rec     *recoveries
}

// InProgressError refuses a call whose key has an attempt in flight under a
// live lease. It matches idempotency.ErrInProgress.
type InProgressError struct {
	// RetryAfter is how long until the running attempt's deadline (not its
	// lease, which its owner renews): by then it has an outcome or is
	// unknown. Measured against the gateway's clock; zero if unknown.
	RetryAfter time.Duration
}

func (e *InProgressError) Error() string { return idempotency.ErrInProgress.Error() }

// Unwrap returns idempotency.ErrInProgress.
func (e *InProgressError) Unwrap() error { return idempotency.ErrInProgress }

// DefaultUnreachableRetryAfter is Orchestrator.UnreachableRetryAfter when
// it is not set.
const DefaultUnreachableRetryAfter = time.Second

// UnreachableError refuses a call whose vendor could not be reached: its
// last attempt failed to connect (the attempt's error wraps
// idempotency.ErrVendorUnreachable) and, after its finalize, no attempt of
// the slot may have left over all its cycles. Nothing was sent, and the slot
// stays open: a retry with the same key dispatches it again, so a new key is
// safe too (docs/DESIGN.md, "Attempts and retries"). It matches
// idempotency.ErrVendorUnreachable.
type UnreachableError struct {
	// RetryAfter is how long to wait before the retry with the same key
	// (Orchestrator.UnreachableRetryAfter).
	RetryAfter time.Duration
	// Cause is the last attempt's error (an *Error from an Executor, whose
	// message is fixed vocabulary); for a log, never a caller.
	Cause error
}

func (e *UnreachableError) Error() string {
	if e.Cause == nil {
		return idempotency.ErrVendorUnreachable.Error()
	}
	return idempotency.ErrVendorUnreachable.Error() + ": " + e.Cause.Error()
}

// Unwrap returns idempotency.ErrVendorUnreachable.
func (e *UnreachableError) Unwrap() error { return idempotency.ErrVendorUnreachable }

// OutcomeUnknownError refuses a call whose earlier attempt may have
// reached the vendor and that is not sent again now. It matches
// idempotency.ErrOutcomeUnknown.
type OutcomeUnknownError struct {
	// RetryAfter, when not zero, says the slot may be dispatched again
	// (its vendor deduplicates on the key) but its backoff has not ended:
	// a retry with the same key after it may be sent. Zero: no retry with
	// the key is sent (the vendor cannot deduplicate, its window passed, or
	// MaxAttemptsReached).
	RetryAfter time.Duration
	// MaxAttemptsReached says the slot's attempts that may have reached
	// the vendor reached its max_attempts: only an operator's settle
	// resolves it.
	MaxAttemptsReached bool
}

func (e *OutcomeUnknownError) Error() string { return idempotency.ErrOutcomeUnknown.Error() }

// Unwrap returns idempotency.ErrOutcomeUnknown.
func (e *OutcomeUnknownError) Unwrap() error { return idempotency.ErrOutcomeUnknown }

// DeniedError refuses a call whose slot was denied by an approver. It
// matches idempotency.ErrDenied.
type DeniedError struct {
	// SafeNewKey, read from the record after the denial: true when nothing
	// under the key may have reached the vendor (a held call denied, or a
	// re-held one none of whose attempts may have left), false when an
	// attempt may have (a re-held unknown record), nil when the record
	// could not be read.
	SafeNewKey *bool
}

func (e *DeniedError) Error() string { return idempotency.ErrDenied.Error() }

// Unwrap returns idempotency.ErrDenied.
func (e *DeniedError) Unwrap() error { return idempotency.ErrDenied }

// Call is one tool call to run.
type Call struct {
	Scope     idempotency.Scope
	Key       idempotency.Key
	KeySource idempotency.KeySource
	// Arguments are the call's JSON arguments; nil or empty means {}.
	Arguments json.RawMessage
	// Dispatch, if non-nil, is the tool's Spec, Route, Target and Secrets,
	// checked once by NewDispatch: leave those four unset (Do refuses a
	// Call with both), and Do fills Spec, Route and Target from it before
	// any hook sees the call. If nil, Do checks the four on every call.
	Dispatch *Dispatch
	// Spec is the tool's EffectSpec, from effectspec.Parse, ParseList or New:
	// Do refuses any other with effectspec.ErrUnvalidated.
	Spec effectspec.Spec
	// Route holds the non-secret dispatch facts (the URL's scheme, host and
	// path template, the method, where the key goes, the vendor account); it
	// is fingerprinted and pinned by the claim. Build it with
	// idempotency.NewRoute from Spec and the target, or take a federated one
	// from broker.Prepare: Do refuses one that lacks a fact its fingerprint needs
	// (idempotency.ErrWeakRoute), before anything is read or written.
	Route idempotency.Route
	// Target sends one attempt. Required, even for a call that will replay.
	// If it is a SecretHolder, its Secrets are scrubbed from the answer.
	Target Target
	// Secrets are scrubbed from the vendor's answer (body and kept headers)
	// before it is stored or returned, with those the Target reports as a
	// SecretHolder: for credentials a TargetFunc sends, or that travel in a
	// query or body. Each must be at least receipt.MinSecretLen bytes long.
	// If nil, only the Target's.
	Secrets []string
	// Ticket resumes a call held for approval. The ticket carries its key: a
	// minted Key is replaced by the ticket's, a supplied Key that differs is
	// ErrApprovalKeyMismatch.
	Ticket string
	// Refuse, if non-nil, is a refusal decided before the claim (the
	// arguments break the tool's schema, say). A final record under the key
	// still replays; otherwise Do returns Refuse and writes nothing.
	Refuse error
	// NoCreate, if non-nil, forbids the claim to create a record
	// (idempotency.ClaimRequest.NoCreate: a quota or a store near its memory
	// limit refuses new calls only). Any existing record under the key is
	// claimed as without it; with none, Do returns NoCreate, having written
	// and sent nothing.
	NoCreate error
}

// Answer is what Do answers for a call: its receipt and the vendor's
// answer, fresh or replayed.
type Answer struct {
	// Receipt describes the call; its Outcome is effectspec.Held for a held
	// call.
	Receipt receipt.Receipt
	// Result is the vendor's answer, fresh or replayed; nil when no answer
	// arrived (held, or an attempt that failed on the wire).
	Result *idempotency.StoredResult
	// Ticket is the approval ticket of a held call.
	Ticket string
	// Key is the effective key (the ticket's on a resume).
	Key idempotency.Key
}

// Do runs call. A Route that lacks a fact its fingerprint needs, or whose
// kind or binding name disagrees with Spec, is refused with an error
// wrapping idempotency.ErrWeakRoute before any store call (see
// idempotency.NewRoute). A refusal (mismatch, in progress, conflict, outcome unknown,
// denied, policy, a vendor never reached: UnreachableError) is an error
// matched with errors.Is against the sentinels of idempotency and
// effectspec; nothing was sent. A vendor's rejection or an
// unknown outcome is not an error: it is in Answer.Receipt.
//
// Once an attempt is reserved, sending and finalizing no longer follow ctx's
// cancellation (only its values): a caller that goes away must not turn an
// answered call into unknown; the outcome is recorded and replayed to the
// next call with the key. They are bounded by the lease instead.
//
// Do checks the policy, hashes the arguments, claims the key, and when the
// claim reserved an attempt sends it through the Target and finalizes the
// record with the fencing token it holds. The rules it keeps are those of
// docs/DESIGN.md, "Attempts and retries" (one immediate second attempt at
// most, reserved before it is sent; a proven BeforeSend attempt finalized
// as never sent; a send only before the lease minus SafetyMargin, see
// WithSendDeadline; renewals every lease/3) and "The record and its
// lifecycle" ("Settling a claim": the claim runs detached, bounded by
// ClaimWait, and an attempt nobody will send is given back by
// Store.GiveBack, re-sent by a background re-sender when the store did not
// answer). A store that stays unavailable (StoreRetries) fails a claim or
// reserve closed (no send), and a finalize with an error wrapping
// idempotency.ErrStoreUnavailable beside the vendor's answer; a finalize
// answered ErrStale is reported, never overwritten; a renewal that finds
// no record of the claim's incarnation is fatal (ErrStale, lease lost).
// So attempt_count on a receipt is never lower than what the vendor saw.
func (o *Orchestrator) Do(ctx context.Context, call Call) (Answer, error) {
	if o.Store == nil {
		return Answer{}, errors.New("retry: Orchestrator.Store is nil")
	}
	route, err := prepare(&call)
	if err != nil {
		return Answer{}, err
	}
	if err := o.Policy.Check(call.Spec); err != nil && call.Refuse == nil {
		call.Refuse = err
	}
	if err := call.Scope.Validate(); err != nil {
		return Answer{}, err
	}
	hash, previous, err := idempotency.RequestHashes(call.Arguments)
	if err != nil {
		return Answer{}, err
	}
	if call.Ticket != "" {
		if err := o.resolveTicket(ctx, &call); err != nil {
			return Answer{}, err
		}
	}
	if call.Key.IsZero() {
		return Answer{}, fmt.Errorf("%w: no key", idempotency.ErrMalformedKey)
	}
	req := idempotency.ClaimRequest{
		Scope:            call.Scope,
		Key:              call.Key,
		KeySource:        call.KeySource,
		RequestHash:      hash,
		Binding:          call.Route.Binding,
		Route:            route,
		ApprovalRequired: call.Spec.Approval == effectspec.ApprovalRequired,
		Ticket:           call.Ticket,
		Refuse:           call.Refuse != nil,
		NoCreate:         call.NoCreate != nil,
		Timeout:          call.Spec.AttemptTimeout(),
		VendorWindow:     call.Spec.VendorWindow(),
		MaxAttempts:      o.maxAttempts(call.Spec),
		OpID:             idempotency.NewOpID(),
	}
	if err := ctx.Err(); err != nil {
		// Nothing sent yet: a caller that is gone claims nothing.
		return Answer{}, err
	}
	start := time.Now()
	var claim idempotency.ClaimResult
	cctx, end := o.span(ctx, SpanClaim, Attr{AttrWorkspace, call.Scope.Workspace}, Attr{AttrTool, call.Scope.Tool},
		Attr{AttrConnection, call.Scope.Connection}, Attr{AttrKeySource, string(call.KeySource)}, Attr{AttrBinding, string(req.Binding)})
	// Once sent, the claim is finished whatever the caller does: a claim
	// abandoned on the wire may still run and reserve an attempt nobody sends,
	// which burns an unsupported call's slot (docs/DESIGN.md, "The record and
	// its lifecycle", "Settling a claim").
	cctx, cancel := context.WithTimeout(context.WithoutCancel(cctx), o.claimWait())
	err = o.storeOp(cctx, &call, "claim", func(ctx context.Context) (err error) {
		claim, err = o.Store.Claim(ctx, req)
		return err
	})
	// The claim in doubt, if any, is the one claimPrevious sent last.
	claim, req, err = o.claimPrevious(cctx, &call, req, previous, claim, err)
	hash = req.RequestHash
	cancel()
	if err != nil {
		end(err)
		if errors.Is(err, idempotency.ErrStoreUnavailable) {
			// It may have been applied: settle it in the background.
			o.settleClaim(&call, req, 0, "")
		}
		return Answer{}, err
	}
	end(nil, Attr{AttrClaimStatus, string(claim.Status)})
	if o.OnClaim != nil {
		o.OnClaim(&call, claim.Status)
	}
	if err := ctx.Err(); err != nil && claim.Status == idempotency.StatusClaimed {
		// The caller went away while the claim was on the wire: nothing
		// was sent, so the attempt is given back rather than sent for
		// nobody.
		o.settleClaim(&call, req, claim.Token, claim.Incarnation)
		return Answer{}, err
	}
	switch claim.Status {
	case idempotency.StatusClaimed:
	case idempotency.StatusReplay:
		claim.Record = scrubbedRecord(&call, claim.Record) // also records stored before scrubbing existed
		return o.answer(&call, hash, *claim.Record, true), nil
	case idempotency.StatusHeld:
		out := o.answer(&call, hash, idempotency.Record{State: effectspec.Held, KeySource: call.KeySource,
			Binding: req.Binding, Route: req.Route, CreatedAt: start}, false)
		out.Ticket = claim.Ticket
		return out, nil
	case idempotency.StatusRefused:
		return Answer{}, call.Refuse
	case idempotency.StatusNoRecord:
		if call.NoCreate == nil {
			return Answer{}, claim.Err()
		}
		return Answer{}, call.NoCreate
	case idempotency.StatusInProgress:
		e := &InProgressError{}
		if !claim.AttemptDeadline.IsZero() {
			e.RetryAfter = max(time.Until(claim.AttemptDeadline), 0)
		}
		return Answer{}, e
	case idempotency.StatusDenied:
		return Answer{}, o.denied(ctx, &call)
	case idempotency.StatusOutcomeUnknown:
		return Answer{}, &OutcomeUnknownError{RetryAfter: claim.RetryAfter, MaxAttemptsReached: claim.MaxAttemptsReached}
	default:
		return Answer{}, claim.Err()
	}
	if call.Refuse != nil {
		// A store that ignored Refuse reserved an attempt: give it back
		// unsent rather than send a refused call.
		o.finalize(ctx, &call, hash, claim.Token, start, Result{Phase: BeforeSend, Err: call.Refuse})
		return Answer{}, call.Refuse
	}
	return o.dispatch(ctx, &call, hash, sendKey(call.Key, claim.VendorKey), claim.Token, claim.Incarnation, start)
}

// denied is the refusal of a claim answered denied. The answer does not
// say whether the slot sent anything (a held call denied sent nothing, a
// re-held unknown one may have), so the record is read once (bounded by
// ClaimWait) to tell the agent whether a new key is safe.
func (o *Orchestrator) denied(ctx context.Context, call *Call) error {
	e := &DeniedError{}
	lctx, cancel := context.WithTimeout(ctx, o.claimWait())
	defer cancel()
	if rec, err := o.Store.Lookup(lctx, call.Scope, call.Key); err == nil {
		e.SafeNewKey = receipt.Safe(rec.State == effectspec.Denied || rec.SentAttempts == 0 && !rec.State.Final())
	}
	return e
}

// claimPrevious answers a claim refused as request_mismatch by claiming again
// under the request hash of the previous number rule, when the arguments hash
// otherwise under it (previous, from idempotency.RequestHashes): a record
// pinned by a release before printed doubles (docs/DESIGN.md, "Request hash and
// dispatch fingerprint") still matches its own retries. It returns the claim to
// act on and the request it was made with: its hash is the one the record pins
// and the receipt shows, and it is the claim to settle if its reply never came.
// Any other claim (or error) it returns as it is.
//
// The second claim is a claim of its own (another operation id). If the
// record is gone between the two (expired), it makes a fresh record
// pinned under previous, which this rule matches again on a retry.
func (o *Orchestrator) claimPrevious(ctx context.Context, call *Call, req idempotency.ClaimRequest, previous string,
	claim idempotency.ClaimResult, err error) (idempotency.ClaimResult, idempotency.ClaimRequest, error) {
	if err != nil || previous == "" || claim.Status != idempotency.StatusRequestMismatch {
		return claim, req, err
	}
	req.RequestHash, req.OpID = previous, idempotency.NewOpID()
	var again idempotency.ClaimResult
	if err := o.storeOp(ctx, call, "claim", func(ctx context.Context) (err error) {
		again, err = o.Store.Claim(ctx, req)
		return err
	}); err != nil {
		return claim, req, err
	}
	return again, req, nil
}

// sendKey is the key a vendor receives: the record's vendor key, or the
// client's key for a record made before vendor keys existed.
func sendKey(client, vendor idempotency.Key) idempotency.Key {
	if vendor.IsZero() {
		return client
	}
	return vendor
}

// resolveTicket binds a resume to the ticket's key and scope.
func (o *Orchestrator) resolveTicket(ctx context.Context, call *Call) error {
	t, err := o.Store.Ticket(ctx, call.Ticket)
	if err != nil {
		return err
	}
	if t.Scope != call.Scope {
		// Another workspace's (or tool's) ticket does not exist for this caller.
		return fmt.Errorf("%w: approval ticket", idempotency.ErrNotFound)
	}
	if call.KeySource == idempotency.KeySupplied && call.Key != t.Key {
		return idempotency.ErrApprovalKeyMismatch
	}
	// The receipt keeps the source the key had when the call was held.
	call.Key = t.Key
	return nil
}

func (o *Orchestrator) unreachableRetryAfter() time.Duration {
	if o.UnreachableRetryAfter > 0 {
		return o.UnreachableRetryAfter
	}
	return DefaultUnreachableRetryAfter
}

// maxAttempts is the max_attempts of a call of spec: its own, else the
// gateway's, else the default.
func (o *Orchestrator) maxAttempts(spec effectspec.Spec) int {
	switch {
	case spec.MaxAttempts > 0:
		return spec.MaxAttempts
	case o.MaxAttempts > 0:
		return o.MaxAttempts
	}
	return effectspec.DefaultMaxAttempts
}

func (o *Orchestrator) margin() time.Duration {
	if o.SafetyMargin > 0 {
		return o.SafetyMargin
	}
	return o.Store.Lease() / 10
}

// dispatch sends the reserved attempt(s) and finalizes. It runs detached from
// the caller's cancellation. Each attempt must start sending before its lease
// ends (minus the margin), measured on the gateway's clock from just before its
// reservation; once sent, it may run until the tool's timeout while the lease
// is renewed every lease/3 (docs/DESIGN.md, "The record and its lifecycle").
//
// inc is the record's incarnation (idempotency.ClaimResult.Incarnation),
// which every reserve, renewal and finalize of the call carries. A renewal
// that finds no record of it (the record expired or was deleted under the
// attempt, and may have been made again with its tokens restarted) loses the
// lease for good: no second attempt, no finalize over another record.
func (o *Orchestrator) dispatch(ctx context.Context, call *Call, hash string, vendorKey idempotency.Key, token int, inc string, reservedAt time.Time) (Answer, error) {
	ctx = context.WithoutCancel(ctx)
	first := token
	var res Result
	for {
		var gone bool
		res, gone = o.attempt(ctx, call, vendorKey, token, inc, reservedAt)
		if gone {
			// ErrNotFound as well: the caller can tell the store lost the
			// record (expired, deleted, Redis lost data) from a take-over.
			return Answer{Key: call.Key}, fmt.Errorf("retry: attempt %d: its record is gone (expired, deleted or lost by the store under the attempt): %w (%w)",
				token, idempotency.ErrStale, idempotency.ErrNotFound)
		}
		if token != first || !o.secondAttempt(call.Spec, res) {
			break
		}
		// A first attempt proven unsent is taken back in the same step, so
		// it never burns the slot (docs/DESIGN.md, "The record and its lifecycle").
		rreq := idempotency.ReserveRequest{Scope: call.Scope, Key: call.Key, Token: token,
			Timeout: call.Spec.AttemptTimeout(), PreviousNeverSent: res.Phase == BeforeSend, Incarnation: inc,
			MaxAttempts: o.maxAttempts(call.Spec), OpID: idempotency.NewOpID()}
		at := time.Now()
		var rsv idempotency.Reservation
		rctx, end := o.span(ctx, SpanReserve, Attr{AttrAttempt, token + 1})
		err := o.storeOp(rctx, call, "reserve", func(ctx context.Context) (err error) {
			rsv, err = o.Store.Reserve(ctx, rreq)
			return err
		})
		end(err)
		if err != nil {
			// No reservation, no send: finalize what the first attempt showed.
			break
		}
		token, reservedAt = rsv.Token, at
	}
	return o.finalizeInc(ctx, call, hash, token, inc, reservedAt, res)
}

// attempt sends attempt token, renewing its lease while it runs. gone says
// a renewal found no record of incarnation inc: the lease is lost.
func (o *Orchestrator) attempt(ctx context.Context, call *Call, vendorKey idempotency.Key, token int, inc string, reservedAt time.Time) (res Result, gone bool) {
	lease := o.Store.Lease()
	sendBy := reservedAt.Add(lease - o.margin())
	sctx, end := o.span(ctx, SpanAttempt, Attr{AttrAttempt, token}, Attr{AttrBinding, string(call.Route.Binding)})
	actx, cancel := context.WithDeadline(WithSendDeadline(sctx, sendBy), reservedAt.Add(call.Spec.AttemptTimeout()))
	defer cancel()
	stop := o.renew(ctx, call, token, inc, lease)
	began := time.Now()
	if time.Now().Before(sendBy) {
		res = call.Target.Send(actx, Attempt{Key: vendorKey, Number: token, Arguments: call.Arguments, Spec: call.Spec})
	} else {
		res = Result{Phase: BeforeSend, Err: newError(BeforeSend, "request", ErrSendDeadline)}
	}
	gone = stop()
	attrs := []Attr{{AttrPhase, string(res.Phase)}}
	if res.Phase == Responded {
		attrs = append(attrs, Attr{AttrStatus, res.Status})
	}
	end(res.Err, attrs...)
	if o.OnAttempt != nil {
		o.OnAttempt(call, token, res, time.Since(began))
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
// vendor binding. The second attempt has a reservation, and so a lease, of its
// own.
func (o *Orchestrator) secondAttempt(spec effectspec.Spec, res Result) bool {
	switch res.Phase {
	case BeforeSend:
		// A deadline that fired before a byte left means no time, not a
		// fault, and an invalid request stays invalid.
		return !errors.Is(res.Err, context.DeadlineExceeded) && !errors.Is(res.Err, context.Canceled) &&
			!errors.Is(res.Err, idempotency.ErrInvalidRequest) && !errors.Is(res.Err, ErrSendDeadline)
	case Responded:
		return !res.Truncated && spec.Retryable(res.Status)
	}
	return false
}

func (o *Orchestrator) finalize(ctx context.Context, call *Call, hash string, token int, reservedAt time.Time, res Result) (Answer, error) {
	return o.finalizeInc(ctx, call, hash, token, "", reservedAt, res)
}

// finalizeInc is finalize of the attempt of record incarnation inc.
func (o *Orchestrator) finalizeInc(ctx context.Context, call *Call, hash string, token int, inc string, reservedAt time.Time, res Result) (Answer, error) {
	state := effectspec.Unknown
	var stored *idempotency.StoredResult
	if res.Phase == Responded {
		switch call.Spec.Classify(res.Status) {
		case effectspec.Accepted:
			state = effectspec.Accepted
		case effectspec.DefinitelyRejected:
			state = effectspec.DefinitelyRejected
		}
		stored = &idempotency.StoredResult{Status: res.Status, Header: safeHeaders(res.Header), Body: res.Body, BodyDropped: res.Truncated}
		stored = scrubbed(call, stored)
	}
	// A proven before_send attempt never left: it counts on the receipt but
	// does not burn the slot (docs/DESIGN.md, "The record and its lifecycle").
	neverSent := res.Phase == BeforeSend
	freq := idempotency.FinalizeRequest{Scope: call.Scope, Key: call.Key, Token: token, Outcome: state, Result: stored,
		NeverSent: neverSent, Incarnation: inc, OpID: idempotency.NewOpID()}
	ctx, end := o.span(ctx, SpanFinalize, Attr{AttrAttempt, token})
	// The lease was renewed while the attempt ran; a finalize by the current
	// token applies even after it, while nobody took the slot over.
	fctx, cancel := context.WithDeadline(ctx, latest(reservedAt.Add(o.Store.Lease()), time.Now().Add(max(o.margin(), o.Store.Lease()/2))))
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
		return Answer{Key: call.Key, Result: stored}, fmt.Errorf("retry: finalize attempt %d: %w", token, err)
	}
	end(nil, Attr{AttrOutcome, string(rec.State)}, Attr{AttrAttemptCount, rec.AttemptCount})
	if neverSent && errors.Is(res.Err, idempotency.ErrInvalidRequest) {
		// It fails the same way every time: a refusal, not an outcome.
		return Answer{Key: call.Key}, res.Err
	}
	if neverSent && errors.Is(res.Err, idempotency.ErrVendorUnreachable) && rec.State == effectspec.Unknown && rec.SentAttempts == 0 {
		// The record's count covers every cycle: only a slot that never
		// sent is refused so; a redispatch of one whose earlier attempt
		// may have left stays unknown.
		return Answer{Key: call.Key}, &UnreachableError{RetryAfter: o.unreachableRetryAfter(), Cause: res.Err}
	}
	rec.Result = stored
	return o.answer(call, hash, rec, false), nil
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// storeOp runs a mutating store call, re-sending it with the same request
// (and so the same operation id) when its reply was lost. It returns nil, a
// store refusal (ErrStale, ...), or an error wrapping ErrStoreUnavailable.
func (o *Orchestrator) storeOp(ctx context.Context, call *Call, name string, op func(context.Context) error) error {
	tries := o.StoreRetries
	if tries == 0 {
		tries = 2
	}
	if tries < 0 {
		tries = 0
	}
	var err error
	for i := 0; ; i++ {
		err = op(ctx)
		if err == nil || !errors.Is(err, idempotency.ErrStoreUnavailable) {
			return err
		}
		if o.OnStoreError != nil {
			o.OnStoreError(call, name, err)
		}
		if i >= tries || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(time.Duration(i+1) * 50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// answer builds the answer of a call from its record. A record read back
// from a store carries its key and request hash; a held call's, made here,
// takes the call's.
func (o *Orchestrator) answer(call *Call, hash string, rec idempotency.Record, replayed bool) Answer {
	rec.Key, rec.RequestHash = call.Key, hash
	if rec.KeySource == "" {
		rec.KeySource = call.KeySource
	}
	return Answer{Receipt: rec.Receipt(call.Scope, replayed), Result: rec.Result, Key: call.Key}
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

// checkRoute refuses a Route that lacks a fact of its kind (Route.Check),
// is of another kind than spec's route, or names another place for the key
// than spec's binding: its fingerprint would not tell this call's
// destination from another.
func checkRoute(spec effectspec.Spec, r idempotency.Route) error {
	if err := r.Check(); err != nil {
		return fmt.Errorf("retry: Call.Route: %w", err)
	}
	federated := spec.Route == effectspec.RouteFederated
	if federated != (r.Kind() == idempotency.RouteFederated) {
		return fmt.Errorf("retry: Call.Route: %w: %s: a %s route for a %s spec", idempotency.ErrWeakRoute, spec.Tool, r.Kind(), routeOf(spec))
	}
	if federated {
		return nil
	}
	var name string
	switch spec.Idempotency.Kind {
	case effectspec.BindingHeader:
		name = strings.ToLower(spec.Idempotency.Header)
	case effectspec.BindingBodyPointer:
		name = spec.Idempotency.Pointer
	}
	if r.BindingName != name {
		return fmt.Errorf("retry: Call.Route: %w: %s: BindingName is not the spec's binding", idempotency.ErrWeakRoute, spec.Tool)
	}
	return nil
}

func routeOf(spec effectspec.Spec) effectspec.RouteKind {
	if spec.Route == "" {
		return effectspec.RouteNative
	}
	return spec.Route
}
