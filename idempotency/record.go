package idempotency

import (
	"net/http"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/receipt"
)

// Record is one claim as stored. Contenders never see it: a [Store] returns a
// Record only to Lookup callers and, on a replay, to the caller being replayed.
type Record struct {
	SchemaVersion int
	ScopeVersion  int
	// State is the record's lifecycle state (docs/DESIGN.md, "The record and
	// its lifecycle"): [effectspec.Held], InProgress (an attempt is reserved
	// under a lease), Accepted, DefinitelyRejected, Unknown (an attempt may
	// have had an effect, see SentAttempts) or Denied.
	State       effectspec.Outcome
	Key         Key
	KeySource   KeySource
	RequestHash string // "sha256:..."
	Binding     effectspec.BindingKind
	// Route is the route the record was created for, its fingerprint
	// ("sha256:...") included: every fact of the fingerprint but the
	// binding, which the record keeps apart. A claim stores it whole when it
	// creates the record; a replay shows the stored one, whatever route the
	// replaying request resolved to.
	Route receipt.RouteRecord
	// VendorKey is the key sent to the vendor (docs/DESIGN.md, "The key on the
	// vendor hop"), for header and body_pointer bindings. Zero for an
	// unsupported binding, and for a record made before vendor keys existed,
	// which keeps sending Key.
	VendorKey    Key
	AttemptCount int // attempts reserved so far; also the current fencing token
	// SentAttempts counts the attempts that may have reached the vendor: every
	// reservation adds one, a finalize with NeverSent takes its attempt back.
	// An unknown record with SentAttempts 0 sent nothing, and its slot
	// re-opens for the next claim (docs/DESIGN.md, "The record and its lifecycle").
	SentAttempts  int
	LeaseDeadline time.Time // in flight only
	// AttemptDeadline is when the reserved attempt times out: the time of its
	// reservation plus its timeout. Renew never moves the lease past it. Set
	// while the attempt may run: in flight, and on a record the lease-expiry
	// path turned unknown (its owner may still finalize it); an owner's
	// finalize clears it.
	AttemptDeadline time.Time
	// EarlierDeadline is the latest attempt deadline of an earlier attempt
	// of the slot that may have left (a redispatch replaced its deadline,
	// or a finalize cleared the later one's): that attempt may still be at
	// the vendor until then, so a settle waits for the later of the two.
	EarlierDeadline time.Time
	Ticket          string // approval ticket, when the call was held
	Approved        bool
	Result          *StoredResult // set once finalized with a vendor answer
	CreatedAt       time.Time
	UpdatedAt       time.Time
	FinalizedAt     time.Time // zero until finalized
	// FirstAttemptAt is when the slot's first attempt that may have left
	// was reserved (CreatedAt, unless the slot was held or sent nothing at
	// first): the vendor's window, in which an unknown slot of a binding
	// the vendor deduplicates may be dispatched again, runs from it.
	FirstAttemptAt time.Time
	// Resolution is set when an operator settled the record ([Settler]).
	Resolution *receipt.Resolution

	// ApprovalDenied says the approval of a record that a claim re-held in
	// another state (it would have dispatched again) was denied: the record
	// keeps its state (an unknown one stays unknown, its effect may have
	// happened), and every claim that would dispatch it answers denied. A
	// held record that is denied turns [effectspec.Denied] instead.
	ApprovalDenied bool
}

// StoredResult is the vendor answer kept for replay.
type StoredResult struct {
	Status int
	Header http.Header // only SafeHeader names
	Body   []byte
	// BodyDropped says the body exceeded the store's size limit: the status
	// and receipt were kept, the body was not.
	BodyDropped bool
}

// ClaimRequest asks for the key in [Scope] for one request.
type ClaimRequest struct {
	Scope       Scope
	Key         Key
	KeySource   KeySource
	RequestHash string // RequestHash of the arguments
	Binding     effectspec.BindingKind
	Route       receipt.RouteRecord // Route.Record of the dispatch facts, with their fingerprint
	// ApprovalRequired holds a new record for approval instead of reserving
	// attempt 1. A claim that would dispatch an existing record again (a slot
	// that never sent, an unknown record with a vendor binding) needs the
	// record's approval too: without it the record is held again (StatusHeld
	// with its ticket), keeping its state; an approval covers every later
	// redispatch of the slot, a denial answers [StatusDenied] wherever a claim
	// would dispatch (docs/DESIGN.md, "The record and its lifecycle").
	ApprovalRequired bool
	// Ticket resumes a held record: only a claim that presents the record's
	// ticket, after approval, reserves attempt 1; a plain repeat of the call
	// stays held.
	Ticket string
	// Refuse says the call was refused before the claim (policy, argument
	// schema). A final record still replays; otherwise the claim answers
	// StatusRefused and writes nothing, and creates no record.
	Refuse bool
	// NoCreate forbids the claim to create a record: when no live record
	// is under the key (the row "none"), it answers [StatusNoRecord] and
	// writes nothing. Any existing record is claimed as without it (a
	// replay, in_progress, a redispatch, an approved resume): a retry of a
	// call that may have acted always reaches its record. A gateway sets it
	// to refuse new calls only (a quota, a store near its memory limit;
	// docs/DESIGN.md, "Quotas and headroom"). Refuse is answered first.
	NoCreate bool
	// Timeout is how long the attempt a claim reserves may take (the tool's
	// timeout): the reservation stores its attempt deadline, which bounds
	// every renewal. If zero, DefaultAttemptTimeout; over MaxAttemptTimeout
	// or negative, an error that changes nothing.
	Timeout time.Duration
	// VendorWindow is how long the vendor deduplicates on the vendor key
	// ([effectspec.Spec.VendorWindow]), for a header or body_pointer binding:
	// an unknown record whose first attempt that may have left is older
	// (the new attempt's lease would end outside it) answers
	// StatusOutcomeUnknown instead of another attempt. If zero,
	// [effectspec.DefaultVendorWindow]; negative, [ErrInvalidRequest] (nothing changes).
	VendorWindow time.Duration
	// MaxAttempts bounds the attempts of the slot that may reach the vendor
	// over its whole life (SentAttempts, not tokens: attempts that never
	// left do not count; effectspec.Spec.MaxAttempts). A redispatch past it
	// answers [StatusOutcomeUnknown] with MaxAttemptsReached; one before its
	// backoff ends (Lease x 2^(n-1) after the latest reservation, n the
	// attempts that may have left, at most an hour) StatusOutcomeUnknown
	// with RetryAfter. If zero, DefaultMaxAttempts; negative,
	// [ErrInvalidRequest] (nothing changes).
	MaxAttempts int
	// OpID identifies this operation. Sending the same claim again with the
	// same OpID after a lost reply answers the original result with
	// AlreadyApplied set, instead of acting twice. If empty, the store mints one.
	OpID string
}

// ClaimResult is the answer of a Claim.
type ClaimResult struct {
	Status Status
	// Token is the fencing token (the attempt number) reserved, when Claimed.
	Token int
	// VendorKey is the record's vendor key, when Claimed: the key every
	// attempt of the slot propagates. Zero for an unsupported binding and for
	// a record made before vendor keys existed (send Key then).
	VendorKey Key
	// LeaseDeadline bounds the dispatch, when Claimed (Redis server time).
	LeaseDeadline time.Time
	// AttemptDeadline is the reserved attempt's deadline, when Claimed; when
	// InProgress it is the running attempt's, so that a refusal can say when
	// to retry (an in-progress answer carries nothing else of the owner's).
	AttemptDeadline time.Time
	// Ticket is the approval ticket, when Held.
	Ticket string
	// Record is the stored record, only when Replay.
	Record *Record
	// AlreadyApplied says this OpID had been applied before (a re-sent claim).
	AlreadyApplied bool
	// Incarnation names the record, when Claimed: a nonce written when the
	// record was created. Reserve, Renew and Finalize carry it, so that a
	// token that restarts on a record made again (the old one expired or
	// was deleted) never matches an old worker's. Empty for a record made
	// before incarnations existed. An empty one in a request, and a record
	// without one, are not compared.
	Incarnation string
	// RetryAfter, when OutcomeUnknown, is how long until the redispatch its
	// backoff refused is allowed (measured on the store's clock); zero when
	// the answer is not a backoff's.
	RetryAfter time.Duration
	// MaxAttemptsReached, when OutcomeUnknown, says the redispatch was
	// refused because the slot's attempts that may have left reached
	// ClaimRequest.MaxAttempts: no retry dispatches it, an operator
	// settles it.
	MaxAttemptsReached bool
}

// Err returns the refusal sentinel of a non-dispatching status, or nil for
// Claimed and Replay. Held returns [ErrHeld].
func (r ClaimResult) Err() error {
	switch r.Status {
	case StatusClaimed, StatusReplay:
		return nil
	case StatusHeld:
		return ErrHeld
	case StatusRequestMismatch:
		return ErrRequestMismatch
	case StatusDestinationConflict:
		return ErrDestinationConflict
	case StatusInProgress:
		return ErrInProgress
	case StatusDenied:
		return ErrDenied
	case StatusOutcomeUnknown:
		return ErrOutcomeUnknown
	case StatusScopeVersionConflict:
		return ErrScopeVersionConflict
	case StatusRefused:
		return ErrRefused
	case StatusNoRecord:
		return ErrNoRecord
	}
	return ErrStoreUnavailable
}

// ReserveRequest asks for the next attempt (the one immediate second attempt)
// under the caller's current fencing token.
type ReserveRequest struct {
	Scope Scope
	Key   Key
	Token int // the caller's current token
	// Timeout is the new attempt's timeout, as in ClaimRequest.Timeout.
	Timeout time.Duration
	// PreviousNeverSent reports that attempt Token proved before_send: it is
	// taken back (SentAttempts) in the same step, as a finalize with
	// NeverSent would, so a second attempt that never leaves either leaves
	// the slot open (docs/DESIGN.md, "The record and its lifecycle").
	PreviousNeverSent bool
	// Incarnation is ClaimResult.Incarnation of the claim that reserved
	// Token: another one answers [ErrStale].
	Incarnation string
	// MaxAttempts is ClaimRequest.MaxAttempts: an attempt that would be one
	// more than it to leave is not reserved ([ErrStale], no second attempt).
	MaxAttempts int
	OpID        string
}

// Reservation is a reserved attempt.
type Reservation struct {
	Token           int
	LeaseDeadline   time.Time
	AttemptDeadline time.Time
	AlreadyApplied  bool
}

// RenewRequest extends the lease of the attempt that Token names.
type RenewRequest struct {
	Scope Scope
	Key   Key
	Token int
	// Incarnation is ClaimResult.Incarnation of the claim that reserved
	// Token: another one answers [ErrNotFound] (the worker's record is gone).
	Incarnation string
	OpID        string
}

// FinalizeRequest records the outcome of the attempt that Token names.
type FinalizeRequest struct {
	Scope   Scope
	Key     Key
	Token   int
	Outcome effectspec.Outcome // Accepted, DefinitelyRejected or Unknown
	Result  *StoredResult
	// NeverSent reports that the attempt never left (it failed before
	// sending, or its reservation was not to be trusted). Outcome must be
	// effectspec.Unknown or zero and Result nil. On an in-flight record it takes
	// the attempt back (SentAttempts), so the next claim re-opens the slot
	// if no other attempt may have left; the token is never reused.
	NeverSent bool
	// Incarnation is ClaimResult.Incarnation of the claim that reserved
	// Token: another one answers [ErrStale] and changes nothing.
	Incarnation string
	OpID        string
}

// GiveBackRequest gives back the attempt that a claim reserved but nobody sent:
// its caller went away, or its reply was lost and a re-send of the same claim
// (same OpID) returned the token later (docs/DESIGN.md, "The record and its
// lifecycle", "Settling a claim"). It is a finalize of Token as never sent,
// guarded by the claim's op id, which the record keeps in a field of its own:
// it applies only while the record is in flight on Token, or unknown on Token
// with no finalize or settle since (the lease-expiry path), and only when the
// claim that reserved Token had ClaimOpID. The record becomes unknown with the
// attempt taken back, so the next claim re-opens the slot if no other attempt
// may have left. Anything else is [ErrStale] and changes nothing.
//
// Token must come from a [StatusClaimed] answer to the claim with ClaimOpID,
// never from Lookup: a token read from a record may be one that a client's
// retry claimed and sent meanwhile.
type GiveBackRequest struct {
	Scope     Scope
	Key       Key
	Token     int    // the token the claim with ClaimOpID answered
	ClaimOpID string // the OpID of that claim
	// Incarnation is ClaimResult.Incarnation of that claim: a record made
	// again under the key since is another's, and the give-back is stale.
	Incarnation string
	// OpID identifies the give-back itself: re-sent after a lost reply it
	// answers nil again instead of acting twice.
	OpID string
}

// Ticket is an approval ticket: "apt_" + 32 hex, bound to the key it was
// minted under.
type Ticket struct {
	ID     string
	Scope  Scope
	Key    Key
	Status TicketStatus
	// KeySource is the source of Key as the held call's record keeps it
	// (its receipt's key_source): a resume that sends only the ticket runs
	// under Key, which its gateway did not mint. Empty when the store did
	// not read the record.
	KeySource KeySource
}

// TicketStatus is the decision state of a ticket.
type TicketStatus string

const (
	TicketPending  TicketStatus = "pending"
	TicketApproved TicketStatus = "approved"
	TicketDenied   TicketStatus = "denied"
)

// DecideRequest approves or denies a held call.
type DecideRequest struct {
	Ticket  string
	Approve bool
	OpID    string
}

// SafeHeader reports whether a response header may be kept in a stored
// result and replayed. It is an allowlist: vendor replies can carry cookies,
// tokens and signed URLs, none of which may be stored.
func SafeHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Content-Type", "Content-Language", "Content-Encoding", "Etag", "Last-Modified",
		"Retry-After", "Idempotency-Key", "Idempotent-Replayed", "X-Request-Id", "Request-Id":
		return true
	}
	return false
}
