package retry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// concurrent use once its fields are set, and its fields must not change then.
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
	// [idempotency.ErrStoreUnavailable] (refserver: store_unavailable). The
	// claim runs detached from ctx's cancellation, bounded by ClaimWait
	// alone: once it is on the wire its outcome is always settled (see Do).
	// A claim is one round trip; one that has not answered in 2s is stalled
	// or failing over, and its caller is better told so than held for the
	// store client's own timeouts. If zero or negative, 2s.
	ClaimWait time.Duration
	// MaxClaimRecoveries caps the claims settled in the background at once
	// (see Do); one more is reported [RecoveryDropped] and left as Redis has
	// it. If zero, 256; negative means none.
	MaxClaimRecoveries int
	// ClaimRecoveryFor bounds how long a claim is re-sent in the background
	// while the store does not answer. Set it to the store's unknown
	// retention: a record the claim made expires by then. If zero or
	// negative, 7 days, redisstore's default unknown retention. Close stops
	// re-senders before.
	ClaimRecoveryFor time.Duration
	// MaxAttempts is the max_attempts of a tool whose spec sets none
	// ([effectspec.Spec].MaxAttempts): how many attempts of one slot may
	// reach the vendor over its life. If zero,
	// [effectspec.DefaultMaxAttempts].
	MaxAttempts int

	// UnreachableRetryAfter is the wait a [RefusalError] for
	// [idempotency.ErrVendorUnreachable] suggests before the retry with the
	// same key. If zero or negative, 1s.
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
	// background re-sender ([RecoveryStarted], or [RecoveryDropped] when
	// none takes it), and once more, from the re-sender's goroutine, when a
	// started one ends ([RecoveryGivenBack], [RecoverySettled],
	// [RecoveryStale], [RecoveryAbandoned]).
	OnClaimRecovery func(call *Call, ev ClaimRecovery)

	// Tracer, if non-nil, gets a span for the claim, each attempt, the
	// reservation of a second attempt and the finalize, each a child of the
	// span in Do's ctx. The attempt's span is in the ctx its Target gets,
	// for propagation ([HTTPTarget].InjectHeaders, which sends the W3C
	// traceparent). If nil, no spans.
	Tracer Tracer

	recOnce sync.Once
	rec     *recoveries
}

const defaultUnreachableRetryAfter = time.Second

// Call is one tool call to run.
type Call struct {
	Scope     idempotency.Scope
	Key       idempotency.Key
	KeySource idempotency.KeySource
	// Arguments are the call's JSON arguments; nil or empty means {}.
	Arguments json.RawMessage
	// Dispatch, if non-nil, is the tool's Spec, Route, Target and Secrets,
	// checked once by [NewDispatch]: leave those four unset (Do refuses a
	// Call with both), and Do fills Spec, Route and Target from it before
	// any hook sees the call. If nil, Do checks the four on every call.
	Dispatch *Dispatch
	// Spec is the tool's EffectSpec, from [effectspec.Parse], ParseList or
	// New: Do refuses any other with [effectspec.ErrUnvalidated].
	Spec effectspec.Spec
	// Route holds the non-secret dispatch facts (the URL's scheme, host and
	// path template, the method, where the key goes, the vendor account); it
	// is fingerprinted and pinned by the claim. Build it with
	// [idempotency.NewRoute] from Spec and the target, or take a federated
	// one from broker.Prepare: Do refuses one that lacks a fact its
	// fingerprint needs ([idempotency.ErrWeakRoute]), before anything is
	// read or written.
	Route idempotency.Route
	// Target sends one attempt. Required, even for a call that will replay.
	// If it is a [SecretHolder], its Secrets are scrubbed from the answer.
	Target Target
	// Secrets are scrubbed from the vendor's answer (body and kept headers)
	// before it is stored or returned, with those the Target reports as a
	// SecretHolder: for credentials a [TargetFunc] sends, or that travel in
	// a query or body. Each must be at least [receipt.MinSecretLen] bytes
	// long. If nil, only the Target's.
	Secrets []string
	// Ticket resumes a call held for approval. The ticket carries its key: a
	// minted Key is replaced by the ticket's, a supplied Key that differs is
	// [idempotency.ErrApprovalKeyMismatch].
	Ticket string
	// Refuse, if non-nil, is a refusal decided before the claim (the
	// arguments break the tool's schema, say). A final record under the key
	// still replays; otherwise Do returns Refuse and writes nothing.
	Refuse error
	// NoCreate, if non-nil, forbids the claim to create a record
	// ([idempotency.ClaimRequest].NoCreate: a quota or a store near its
	// memory limit refuses new calls only). Any existing record under the
	// key is claimed as without it; with none, Do returns NoCreate, having
	// written and sent nothing.
	NoCreate error
}

// Answer is what Do answers for a call: its receipt and the vendor's
// answer, fresh or replayed.
type Answer struct {
	// Receipt describes the call; its Outcome is [effectspec.Held] for a
	// held call.
	Receipt receipt.Receipt
	// Result is the vendor's answer, fresh or replayed; nil when no answer
	// arrived (held, or an attempt that failed on the wire).
	Result *idempotency.StoredResult
	// Ticket is the approval ticket of a held call.
	Ticket string
	// Key is the effective key (the ticket's on a resume).
	Key idempotency.Key
}

// Do runs call: it claims the key, and when the claim reserved an attempt
// sends it through the Target and finalizes the record with the fencing
// token it holds.
//
// A refusal is an error, and nothing was sent: errors.Is matches it against
// the sentinels of idempotency and effectspec (a Route that lacks a fact its
// fingerprint needs, or whose kind or binding name disagrees with Spec,
// wraps [idempotency.ErrWeakRoute] before any store call; a mismatch, an
// attempt in progress, a conflict, an outcome unknown, a denial, the policy,
// a vendor never reached: see [RefusalError]). A vendor's rejection or an
// unknown outcome is not an error: it is in Answer.Receipt.
//
// Once the claim is sent it is finished whatever ctx does, bounded by
// ClaimWait; an attempt nobody will send is given back (Store.GiveBack),
// re-sent by a background re-sender when the store did not answer. Once an
// attempt is reserved, sending and finalizing follow ctx's values but not
// its cancellation, bounded by the lease instead: a caller that goes away
// must not turn an answered call into unknown. Attempts follow
// docs/DESIGN.md, "Attempts and retries": one immediate second attempt at
// most, reserved before it is sent; a proven [BeforeSend] attempt
// finalized as never sent; a send only before the lease minus
// SafetyMargin (see [WithSendDeadline]); renewals every lease/3. A store
// that stays unavailable (StoreRetries) fails a claim or reserve closed
// (no send), and a finalize with an error wrapping
// [idempotency.ErrStoreUnavailable] beside the vendor's answer; a finalize
// answered ErrStale is reported, never overwritten; a renewal that finds no
// record of the claim's incarnation is fatal (ErrStale, lease lost). So
// attempt_count on a receipt is never lower than what the vendor saw.
func (o *Orchestrator) Do(ctx context.Context, call Call) (Answer, error) {
	r, err := o.begin(ctx, &call)
	if err != nil {
		return Answer{}, err
	}
	claim, err := o.claim(ctx, r)
	switch {
	case err != nil:
		return Answer{}, err
	case claim.Status != idempotency.StatusClaimed:
		return o.unclaimed(ctx, r, claim)
	case call.Refuse != nil:
		return o.giveBack(ctx, r, claim)
	}
	ctx = context.WithoutCancel(ctx) // the attempt is reserved: see above
	s, res, err := o.attempts(ctx, r, slot{token: claim.Token, inc: claim.Incarnation,
		vendorKey: sendKey(call.Key, claim.VendorKey), reservedAt: r.start})
	if err != nil {
		return Answer{Key: call.Key}, err
	}
	return o.finalize(ctx, r, s, res)
}

// run is one call of Do on its way: the call, its Dispatch and its claim.
type run struct {
	call     *Call
	d        *Dispatch
	req      idempotency.ClaimRequest // as last sent: its RequestHash is the one the record pins
	previous string                   // the arguments' hash under the previous number rule
	start    time.Time                // just before the claim: the first attempt's reservation
}

// begin makes call ready for its claim. What a [Dispatch] proves is taken
// from it (or proven now, for a call that names none); what is checked here
// depends on the call: its scope, its arguments, its ticket and its key.
func (o *Orchestrator) begin(ctx context.Context, call *Call) (*run, error) {
	if o.Store == nil {
		return nil, errors.New("retry: Orchestrator.Store is nil")
	}
	d, err := dispatchOf(call)
	if err != nil {
		return nil, err
	}
	if d.deny != nil && call.Refuse == nil {
		call.Refuse = d.decide(o.Policy)
	}
	if err := d.checkScope(call.Scope); err != nil {
		return nil, err
	}
	hash, previous, err := requestHashes(d.route.Binding, d.spec.Idempotency.Pointer, call.Arguments)
	if err != nil {
		return nil, err
	}
	if call.Ticket != "" {
		if err := o.resolveTicket(ctx, call); err != nil {
			return nil, err
		}
	}
	if call.Key.IsZero() {
		return nil, fmt.Errorf("%w: no key", idempotency.ErrMalformedKey)
	}
	if err := ctx.Err(); err != nil {
		// Nothing sent yet: a caller that is gone claims nothing.
		return nil, err
	}
	req := d.claim
	req.Scope, req.Key, req.KeySource, req.RequestHash = call.Scope, call.Key, call.KeySource, hash
	req.Ticket, req.Refuse, req.NoCreate = call.Ticket, call.Refuse != nil, call.NoCreate != nil
	req.MaxAttempts, req.OpID = o.maxAttempts(d.spec), idempotency.NewOpID()
	return &run{call: call, d: d, req: req, previous: previous}, nil
}

// claim sends r's claim. Once sent, it is finished whatever the caller
// does: a claim abandoned on the wire may still run and reserve an attempt
// nobody sends, which burns an unsupported call's slot (docs/DESIGN.md,
// "The record and its lifecycle", "Settling a claim"). So it runs detached
// from ctx's cancellation, bounded by ClaimWait, and a claim whose reply
// was lost, or whose caller went away while it reserved an attempt, is
// settled in the background.
func (o *Orchestrator) claim(ctx context.Context, r *run) (idempotency.ClaimResult, error) {
	call := r.call
	r.start = time.Now()
	var claim idempotency.ClaimResult
	cctx, end := o.span(ctx, spanClaim, Attr{attrWorkspace, call.Scope.Workspace}, Attr{attrTool, call.Scope.Tool},
		Attr{attrConnection, call.Scope.Connection}, Attr{attrKeySource, string(call.KeySource)}, Attr{attrBinding, string(r.req.Binding)})
	cctx, cancel := context.WithTimeout(context.WithoutCancel(cctx), o.claimWait())
	err := o.storeOp(cctx, call, "claim", func(ctx context.Context) (err error) {
		claim, err = o.Store.Claim(ctx, r.req)
		return err
	})
	// The claim in doubt, if any, is the one claimPrevious sent last.
	claim, r.req, err = o.claimPrevious(cctx, call, r.req, r.previous, claim, err)
	cancel()
	if err != nil {
		end(err)
		if errors.Is(err, idempotency.ErrStoreUnavailable) {
			// It may have been applied: settle it in the background.
			o.settleClaim(call, r.req, 0, "")
		}
		return claim, err
	}
	end(nil, Attr{attrClaimStatus, string(claim.Status)})
	if o.OnClaim != nil {
		o.OnClaim(call, claim.Status)
	}
	if err := ctx.Err(); err != nil && claim.Status == idempotency.StatusClaimed {
		// The caller went away while the claim was on the wire: nothing
		// was sent, so the attempt is given back rather than sent for
		// nobody.
		o.settleClaim(call, r.req, claim.Token, claim.Incarnation)
		return claim, err
	}
	return claim, nil
}

// claimPrevious answers a claim refused as request_mismatch by claiming again
// under the request hash of the previous number rule, when the arguments hash
// otherwise under it (previous, from [idempotency.RequestHashes]): a record
// pinned under the previous number rule (docs/DESIGN.md, "Request hash and
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

// unclaimed answers a claim that reserved no attempt: a replay, a held
// call, or a refusal.
func (o *Orchestrator) unclaimed(ctx context.Context, r *run, claim idempotency.ClaimResult) (Answer, error) {
	call := r.call
	switch claim.Status {
	case idempotency.StatusReplay:
		rec := scrubbedRecord(r.d, claim.Record) // also one stored unscrubbed
		return o.answer(call, r.req.RequestHash, *rec, true), nil
	case idempotency.StatusHeld:
		out := o.answer(call, r.req.RequestHash, idempotency.Record{State: effectspec.Held, KeySource: call.KeySource,
			Binding: r.req.Binding, Route: r.req.Route, CreatedAt: r.start}, false)
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
		e := &RefusalError{Err: idempotency.ErrInProgress}
		if !claim.AttemptDeadline.IsZero() {
			e.RetryAfter = max(time.Until(claim.AttemptDeadline), 0)
		}
		return Answer{}, e
	case idempotency.StatusDenied:
		return Answer{}, o.denied(ctx, call)
	case idempotency.StatusOutcomeUnknown:
		return Answer{}, &RefusalError{Err: idempotency.ErrOutcomeUnknown, RetryAfter: claim.RetryAfter, MaxAttemptsReached: claim.MaxAttemptsReached}
	}
	return Answer{}, claim.Err()
}

// giveBack answers a refused call whose claim reserved an attempt anyway
// (a store that ignored Refuse): the attempt is finalized unsent rather
// than sent.
func (o *Orchestrator) giveBack(ctx context.Context, r *run, claim idempotency.ClaimResult) (Answer, error) {
	o.finalize(ctx, r, slot{token: claim.Token, reservedAt: r.start}, Result{Phase: BeforeSend, Err: r.call.Refuse})
	return Answer{}, r.call.Refuse
}

// sendKey is the key a vendor receives: the record's vendor key, or the
// client's key for a record that holds no vendor key.
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

func (o *Orchestrator) unreachableRetryAfter() time.Duration {
	if o.UnreachableRetryAfter > 0 {
		return o.UnreachableRetryAfter
	}
	return defaultUnreachableRetryAfter
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
