package idempotency

import (
	"errors"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/internal/canonical"
)

// Refusals. Each is returned (possibly wrapped) by the claim lifecycle and
// names a stable reason for the wire; see [Reason].
var (
	// ErrMalformedKey: an Idempotency-Key that is not an idt_ key. It is never
	// replaced by a minted key.
	ErrMalformedKey = errors.New("idempotency: malformed key")
	// ErrInvalidScope: a workspace, connection, tool or prefix that cannot be
	// rendered into a storage key without ambiguity.
	ErrInvalidScope = errors.New("idempotency: invalid scope")
	// ErrInvalidJSON: arguments that are not one valid JSON value (see
	// [Canonicalize]).
	ErrInvalidJSON = canonical.ErrInvalidJSON
	// ErrRequestMismatch: the key was claimed for a different request.
	ErrRequestMismatch = errors.New("idempotency: request hash mismatch")
	// ErrDestinationConflict: the key was claimed for another binding or route.
	ErrDestinationConflict = errors.New("idempotency: destination conflict")
	// ErrInProgress: another caller holds a live lease on the key.
	ErrInProgress = errors.New("idempotency: request in progress")
	// ErrOutcomeUnknown: an earlier attempt may have reached the vendor and the
	// vendor cannot deduplicate on our key (no vendor binding, or its window
	// has passed), so no new attempt is made.
	ErrOutcomeUnknown = errors.New("idempotency: outcome unknown")
	// ErrVendorUnreachable: no connection to the vendor (or broker) could be
	// made: the dial was refused or timed out, the host lookup or the TLS
	// handshake failed. It marks such a before_send attempt's error, and
	// refuses a call none of whose attempts may have left
	// (docs/DESIGN.md, "Attempts and retries"): nothing was sent, and a
	// retry with the same key dispatches again.
	ErrVendorUnreachable = errors.New("idempotency: vendor unreachable, nothing was sent")
	// ErrDenied: the call was denied (approval denied).
	ErrDenied = errors.New("idempotency: denied")
	// ErrApprovalKeyMismatch: a resume supplied a key other than the ticket's.
	// It changes nothing: the held record stays as it was. (A resume that
	// supplies no key takes the ticket's.)
	ErrApprovalKeyMismatch = errors.New("idempotency: approval key mismatch")
	// ErrScopeVersionConflict: a live record was written under another key-scope
	// version; it is neither rewritten nor redispatched.
	ErrScopeVersionConflict = errors.New("idempotency: scope version conflict")
	// ErrScopeVersionChanged: the fleet's scope version is not this
	// gateway's [ScopeVersion]. It changed while this gateway ran, so it
	// stops claiming (another gateway may serve), or a store refuses to
	// start on a fleet of another version, or on records of a version it
	// cannot tell. Nothing was written.
	ErrScopeVersionChanged = errors.New("idempotency: the fleet's scope version is not this gateway's")
	// ErrStoreDataLost: the store lost data under a running gateway (a Redis
	// restarted empty, a failover to an empty replica, a FLUSHALL), so a
	// retry could dispatch a call that already ran; the store stops claiming
	// until an operator acknowledges the loss. Nothing was written.
	ErrStoreDataLost = errors.New("idempotency: the store lost data")
	// ErrStale: the caller's fencing token is no longer current; nothing changed.
	ErrStale = errors.New("idempotency: stale fencing token")
	// ErrNotFound: no record (or ticket) exists.
	ErrNotFound = errors.New("idempotency: not found")
	// ErrRefused: a claim with ClaimRequest.Refuse found no final record to
	// replay. The refusal's own reason (policy, arguments) is the caller's,
	// so [Reason] does not name it.
	ErrRefused = errors.New("idempotency: refused")
	// ErrNoRecord is a claim with NoCreate that found no record to claim
	// ([StatusNoRecord]): nothing was written.
	ErrNoRecord = errors.New("idempotency: no record under the key")
	// ErrHeld: the call awaits approval.
	ErrHeld = errors.New("idempotency: awaiting approval")
	// ErrInvalidRequest: a request that cannot be built or is not a valid
	// call (a body pointer the key cannot be written at, an invalid scope);
	// it fails the same way every time, so it is never retried.
	ErrInvalidRequest = errors.New("idempotency: invalid request")
	// ErrRetentionTooShort: a claim or reservation whose attempt (its
	// timeout plus the lease) could outlive the record's retention: the
	// record would expire under a live attempt and re-open its slot with
	// the fencing token restarted. Nothing was written.
	ErrRetentionTooShort = errors.New("idempotency: unknown retention shorter than the attempt timeout plus the lease")
	// ErrStoreUnavailable: the store failed or timed out during a mutating step.
	// The step may or may not have been applied; the caller must not send and
	// should settle the state with a read-only Lookup.
	ErrStoreUnavailable = errors.New("idempotency: store unavailable")
	// ErrWeakRoute: a [Route] that lacks a fact its fingerprint needs
	// (docs/DESIGN.md, "Request hash and dispatch fingerprint"), or that
	// NewRoute cannot derive from its target. A claim pinned with it would let
	// another destination (another vendor account, http instead of https) pass
	// as the same one, so it is refused before the claim.
	ErrWeakRoute = errors.New("idempotency: route lacks a dispatch fact")
)

// Reason returns the stable wire reason and the equivalent HTTP status (as in
// the IETF Idempotency-Key draft) for a refusal, or ("", 0) when err is not one.
// It is the one mapping of the lifecycle's sentinels (these, and effectspec's
// policy denial) to the reasons of docs/DESIGN.md, "refserver wire contract".
func Reason(err error) (reason string, status int) {
	switch {
	case err == nil:
		return "", 0
	case errors.Is(err, ErrMalformedKey):
		return "malformed_key", 400
	case errors.Is(err, ErrRequestMismatch):
		return "request_mismatch", 422
	case errors.Is(err, ErrInProgress):
		return "in_progress", 409
	case errors.Is(err, ErrDestinationConflict):
		return "destination_conflict", 409
	case errors.Is(err, ErrApprovalKeyMismatch):
		return "approval_key_mismatch", 422
	case errors.Is(err, ErrOutcomeUnknown):
		return "outcome_unknown", 409
	case errors.Is(err, ErrVendorUnreachable):
		return "vendor_unreachable", 503
	case errors.Is(err, ErrScopeVersionChanged):
		return "scope_version_conflict", 503
	case errors.Is(err, ErrScopeVersionConflict):
		return "scope_version_conflict", 409
	case errors.Is(err, ErrDenied):
		return "denied", 403
	case errors.Is(err, ErrStoreDataLost):
		return "store_data_lost", 503
	case errors.Is(err, ErrStoreUnavailable):
		return "store_unavailable", 503
	case errors.Is(err, ErrStale):
		// A finalize whose lease was taken over: the slot's new owner
		// decides the call's outcome.
		return "lease_lost", 409
	case errors.Is(err, effectspec.ErrPolicyDenied):
		return effectspec.ReasonPolicyDenied, 403
	case errors.Is(err, ErrInvalidJSON):
		return "invalid_arguments", 400
	case errors.Is(err, ErrInvalidScope), errors.Is(err, ErrInvalidRequest):
		return "invalid_request", 400
	case errors.Is(err, ErrNotFound):
		return "not_found", 404
	case errors.Is(err, ErrNotUnknown):
		return "not_unknown", 409
	}
	return "", 0
}
