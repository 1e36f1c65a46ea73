package lifecycle

import (
	"maps"

	"github.com/obol-gateway/obol/effectspec"
)

// redispatchable reports whether a slot with binding b whose attempt may
// have left may be dispatched again (inside the vendor's window): only
// the bindings whose receiver deduplicates on our key. It is an allow-list:
// a binding not named here (unsupported, federated, any new one) is never
// sent twice.
func redispatchable(b effectspec.BindingKind) bool {
	switch b {
	case effectspec.BindingHeader, effectspec.BindingBodyPointer, effectspec.BindingInProcessKeyed, effectspec.BindingMeta:
		return true
	}
	return false
}

// Record is one stored record, its fields by meaning: the state is an
// [effectspec.Outcome] and the binding an [effectspec.BindingKind] (their
// bytes in field m are the store's codec). Times are milliseconds of the
// store's clock; a zero number is a field the record does not hold.
type Record struct {
	State     effectspec.Outcome     // m byte 0
	KeySource byte                   // m byte 1: 's' supplied, 'm' minted
	Binding   effectspec.BindingKind // m byte 2

	ScopeVersion int64  // w
	RequestHash  string // q (32 bytes)
	Fingerprint  string // f (32 bytes)
	Route        string // c p T M H P u, as stored: tag, length, value
	VendorKey    string // k
	Incarnation  string // i ('' for a record made before incarnations, or final)

	Attempts        int64  // n: the attempts reserved, the fencing token
	Sent            int64  // s: the attempts that may have left (stored only when not Attempts)
	Cycle           int64  // y: attempts in this cycle (in flight only)
	Lease           int64  // l: lease deadline (in flight only)
	AttemptDeadline int64  // e: the attempt's give-up time
	RenewOp         string // O: the last renewal's op tag

	Ticket string // t
	// Approved and ApprovalDenied are a: the decision on the ticket. A
	// held record that is denied turns Denied instead; ApprovalDenied is
	// the denial of a record a claim re-held in another state.
	Approved, ApprovalDenied bool

	Created   int64 // C
	Updated   int64 // U (until finalized)
	FirstSent int64 // W: the first attempt that may have left, when not Created
	// ReservedAt is A: when the latest attempt was reserved, when not
	// Created; a redispatch's backoff is measured from it.
	ReservedAt int64
	// EarlierDeadline is E: the latest attempt deadline of an earlier
	// attempt that may have left, kept when a reservation replaces
	// AttemptDeadline (and when a finalize clears it): a settle waits for
	// the later of the two.
	EarlierDeadline int64
	// Finalized is F present: finalized or settled (not turned unknown by
	// the lease-expiry path); FinalizedAfter is F, ms after Created.
	Finalized      bool
	FinalizedAfter int64

	Result EncodedResult // x D B z and the header fields

	Op         string // o: the last operation's op tag
	ClaimOp    string // K: the claim that made the current cycle ('' none)
	ClaimToken int64  // K: its token
	GivenBack  bool   // K: its token was given back
	Resolution string // R: who, time, note joined by 0x1f

	// Expires is the record's expiry (the key's TTL, not a field of the
	// stored string); 0: none.
	Expires int64
}

// EncodedResult is a result in its stored encoding, as the record holds
// it: the decoded form callers see is [idempotency.StoredResult].
type EncodedResult struct {
	Status  string            // x: decimal, '' none
	Dropped bool              // D
	Body    string            // B, '' none
	Size    string            // z: the body's size before compression, '' stored as sent
	Headers map[string]string // kept headers by field name ("0".."9", "J", ":Name")
}

// Clone returns a copy of r that shares nothing with it.
func (r *Record) Clone() *Record {
	if r == nil {
		return nil
	}
	c := *r
	c.Result.Headers = maps.Clone(r.Result.Headers)
	return &c
}

// head is r without its body, as the finalize and settle replies carry
// it (the caller has the body it sent).
func (r *Record) head() *Record {
	c := r.Clone()
	c.Result.Body, c.Result.Size = "", ""
	return c
}

// first is when the slot's first attempt that may have left was reserved:
// the start of the vendor's window.
func (r *Record) first() int64 {
	if r.FirstSent != 0 {
		return r.FirstSent
	}
	return r.Created
}

// open reports whether the record's current token still takes its
// owner's finalize or give-back: in flight, or turned unknown by the
// lease-expiry path (no F).
func (r *Record) open() bool {
	return r.State == effectspec.InProgress || r.State == effectspec.Unknown && !r.Finalized
}

// fenced reports whether a caller's incarnation inc is another record's;
// a caller's ” and a record without one are not compared.
func (r *Record) fenced(inc string) bool {
	return inc != "" && r.Incarnation != "" && r.Incarnation != inc
}

// dropCycle drops what a final record no longer keeps (encode in
// lua/common.lua): its incarnation, its cycle's claim and the times of its
// attempts. A caller's
// incarnation is then not compared (fenced), as for a record made before
// incarnations: an old worker's renewal of it is stale, not not_found.
func (r *Record) dropCycle() {
	if r.State.Final() {
		r.Incarnation = ""
		r.ClaimOp, r.ClaimToken, r.GivenBack = "", 0, false
		r.ReservedAt, r.EarlierDeadline = 0, 0
	}
}

// reserved is when the latest attempt was reserved.
func (r *Record) reserved() int64 {
	if r.ReservedAt != 0 {
		return r.ReservedAt
	}
	return r.Created
}

// keepDeadline keeps the current attempt's deadline among the earlier
// attempts' before a reservation replaces it.
func (r *Record) keepDeadline() {
	r.EarlierDeadline = max(r.EarlierDeadline, r.AttemptDeadline)
}

// runsUntil is the latest deadline of an attempt of r that may still run
// at its gateway: the current one's or an earlier one's; 0 none.
func (r *Record) runsUntil() int64 {
	return max(r.AttemptDeadline, r.EarlierDeadline)
}

// clearResult drops a stored result and the finalize time (clear_result).
func (r *Record) clearResult() {
	r.Result = EncodedResult{}
	r.Finalized, r.FinalizedAfter = false, 0
}

// endAttempt drops what only an attempt in flight needs.
func (r *Record) endAttempt() {
	r.Lease, r.Cycle, r.AttemptDeadline, r.RenewOp, r.Updated = 0, 0, 0, "", 0
}

// setResult stores res (set_result): an empty status or body is none.
func (r *Record) setResult(res EncodedResult) {
	r.Result = EncodedResult{Status: res.Status, Dropped: res.Dropped}
	if res.Body != "" {
		r.Result.Body, r.Result.Size = res.Body, res.Size
	}
	if len(res.Headers) > 0 {
		r.Result.Headers = maps.Clone(res.Headers)
	}
}
