package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// refusal is a call refused before or instead of dispatch. On /mcp it is a
// JSON-RPC error with error.data {"reason", "status", "idempotency_key"}
// (rpcError); the /v1 endpoints (mcpgateway/admin) answer {"reason",
// "status", "message"} with the same reasons, plus already_decided (409)
// for a ticket decided the other way.
//
// Reasons beyond docs/DESIGN.md, "refserver wire contract": unauthorized (401),
// method_not_allowed (405), method_not_found (404: a JSON-RPC method the
// server does not serve), invalid_request (400), invalid_arguments (400:
// arguments that are not one JSON object, duplicate names, lone
// surrogates, or break the tool's input schema), arguments_too_large (413,
// over maxArgBytes), request_too_large (413), not_found (404: an approval
// ticket that does not exist or belongs to another workspace or tool),
// scope_version_conflict (409 for a record of another scope version; 503
// once the fleet's scope version changed), store_unavailable (503),
// quota_exceeded (429), store_full (503) and vendor_unreachable (503: no
// attempt of the call's slot may have left and this one could not connect),
// each with retry_after_ms and a Retry-After header, internal (500).
type refusal struct {
	reason string
	status int
	// msg is what the caller reads. For a refusal classified from an error
	// whose text may come from the store (store_unavailable, internal,
	// scope_version_conflict, ...) it is fixed text (tenantText), never
	// the error's.
	msg string
	// detail, if not empty, is the error's own text, redacted: for the
	// server's log only.
	detail string
	// retryAfter, for in_progress: until the running attempt's deadline;
	// for quota_exceeded, store_full and vendor_unreachable: before a retry
	// with the same key; for outcome_unknown: until the redispatch's backoff
	// ends (zero: no redispatch).
	retryAfter time.Duration
	// denied, for denied: whether a new key is safe, read from the record
	// (retry.RefusalError); nil when it could not be read.
	denied *bool
	// unread: decided before the key's record was read, which may hold an
	// attempt that left; safe_new_key is false whatever the reason.
	unread bool
}

// safeNewKey is error.data.safe_new_key of r (docs/DESIGN.md, "refserver wire
// contract"): true only when nothing under the key may have had an effect,
// false when the call ran or may have run (or the key may hold such a record),
// nil (absent) when this refusal does not know.
func (r refusal) safeNewKey() *bool {
	if r.reason == "denied" {
		return r.denied
	}
	if r.unread {
		return receipt.Safe(false)
	}
	switch safeByReason[r.reason] {
	case safeTrue:
		return receipt.Safe(true)
	case safeFalse:
		return receipt.Safe(false)
	}
	return nil
}

type safeness int

const (
	safeAbsent safeness = iota
	safeFalse
	safeTrue
)

// safeByReason is the table of docs/DESIGN.md, "refserver wire contract" for
// every reason whose answer does not depend on the record (denied does). A
// reason not listed is absent: nothing of the key was read.
var safeByReason = map[string]safeness{
	// The key holds a record whose call ran, may have run or may still.
	"request_mismatch":     safeFalse,
	"in_progress":          safeFalse,
	"destination_conflict": safeFalse,
	"outcome_unknown":      safeFalse,
	"lease_lost":           safeFalse,
	// The key (or the ticket's) may hold a record that nobody read.
	"malformed_key":         safeFalse,
	"approval_key_mismatch": safeFalse,
	"store_unavailable":     safeFalse,
	"store_data_lost":       safeFalse,
	// Nothing under the key may have reached the vendor: the slot's record
	// says no attempt may have left, and this one could not connect.
	"vendor_unreachable": safeTrue,
	// Refused before the claim's record was read: the key may hold one.
	"quota_exceeded":         safeFalse,
	"store_full":             safeFalse,
	"scope_version_conflict": safeFalse,
	"internal":               safeFalse,
}

// refusalError carries a refusal decided before the claim through the
// orchestrator (retry.Call.Refuse), so that a final record still replays.
type refusalError struct{ r refusal }

func (e *refusalError) Error() string { return e.r.msg }

// JSON-RPC error codes: -32602 (invalid params) for a call that names no
// tool or carries bad arguments, -32603 for internal and store failures,
// -32000 for every refusal of the idempotency contract. (-32600 and -32700
// are the front's, for a message it refuses: parseEnvelope.)
func (r refusal) code() int64 {
	switch r.reason {
	case "unknown_tool", "invalid_arguments", "arguments_too_large", "invalid_request":
		return -32602
	case "internal", "store_unavailable":
		return -32603
	}
	return -32000
}

// ErrorData is error.data of every refusal (DESIGN, section "refserver wire
// contract").
type ErrorData struct {
	Reason         string `json:"reason"`
	Status         int    `json:"status"`
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// RetryAfterMS, on in_progress: until the running attempt's deadline;
	// on quota_exceeded and store_full: until a new record may be taken;
	// on vendor_unreachable: before the retry with the same key; on
	// outcome_unknown, only when the slot may be dispatched again: until its
	// backoff ends.
	RetryAfterMS *int64 `json:"retry_after_ms,omitempty"`
	// SafeNewKey: whether calling again under a new key is safe; absent
	// when not known (refusal.safeNewKey).
	SafeNewKey *bool `json:"safe_new_key,omitempty"`
}

func rpcError(r refusal, key string) *jsonrpcError {
	d := ErrorData{Reason: r.reason, Status: r.status, IdempotencyKey: key, SafeNewKey: r.safeNewKey()}
	switch {
	case r.reason == "in_progress", r.reason == "quota_exceeded", r.reason == "store_full",
		r.reason == "vendor_unreachable", r.reason == "outcome_unknown" && r.retryAfter > 0:
		ms := r.retryAfter.Milliseconds()
		if r.reason != "in_progress" {
			// Rounded up: a client that waits exactly this long finds
			// the allowance refilled.
			ms = (r.retryAfter + time.Millisecond - 1).Milliseconds()
		}
		d.RetryAfterMS = &ms
	}
	data, _ := json.Marshal(d)
	return &jsonrpcError{Code: r.code(), Message: r.msg, Data: data}
}

// classify maps an error of the orchestrator to its wire refusal. The
// caller reads fixed text for every reason but invalid_request,
// invalid_arguments and malformed_key, whose messages this module writes
// from the request alone: a store error's text (a Redis address, "dial tcp ...", an OOM reply
// naming a script and its line) or a stored scope version never reaches a
// tenant. The error's own text, redacted, is the refusal's detail, which
// only the server logs.
func (g *Gateway) classify(err error) refusal {
	var re *refusalError
	if errors.As(err, &re) {
		return re.r
	}
	detail := g.cfg.Redact(err.Error())
	if reason, status := idempotency.Reason(err); reason != "" {
		r := refusal{reason: reason, status: status, msg: detail, detail: detail}
		switch reason {
		case "invalid_request", "invalid_arguments", "malformed_key":
		case "store_unavailable":
			r.msg = storeUnavailableText
			if g.cfg.OutOfMemory != nil && g.cfg.OutOfMemory(err) {
				r.msg = outOfMemoryText
			}
		case "lease_lost":
			r.msg = tenantText(reason, status)
			if errors.Is(err, idempotency.ErrNotFound) {
				// Not another attempt's take-over: the record vanished
				// under the attempt (a store that lost data, an expiry).
				r.msg = recordLostText
			}
		default:
			r.msg = tenantText(reason, status)
		}
		var re *retry.RefusalError
		if errors.As(err, &re) {
			r.retryAfter, r.denied = re.RetryAfter, re.SafeNewKey
			switch {
			case reason != "outcome_unknown":
			case re.MaxAttemptsReached:
				r.retryAfter, r.msg = 0, maxAttemptsText
			case re.RetryAfter > 0:
				r.msg = backoffText
			}
		}
		return r
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// A store call that ran out of its bound.
		return refusal{reason: "store_unavailable", status: http.StatusServiceUnavailable, msg: storeUnavailableText, detail: detail}
	}
	return refusal{reason: "internal", status: http.StatusInternalServerError, msg: internalText, detail: detail}
}

// The fixed text of store failures. out_of_memory is a store_unavailable
// whose cause is Redis refusing writes for lack of memory: the operator's
// to fix, and retrying at once does not help.
const (
	storeUnavailableText = "store_unavailable: the idempotency store is unavailable; retry with the same key"
	outOfMemoryText      = "out_of_memory: the idempotency store is out of memory; retry later with the same key"
	internalText         = "internal: the gateway failed; retry with the same key"
)

// The text of an outcome_unknown whose redispatch its limits refused
// (docs/DESIGN.md, "The record and its lifecycle": max_attempts, backoff).
const (
	maxAttemptsText = "outcome_unknown: the call's max_attempts attempts may have reached the vendor: not sent again; an operator must settle it"
	backoffText     = "outcome_unknown: an earlier attempt may have reached the vendor; retry with the same key after retry_after_ms"
)

// recordLostText is lease_lost's text when the store lost the call's record
// while its attempt ran.
const recordLostText = "the store lost the call's record while its attempt ran (Redis lost data, or the record expired): " +
	"whether the vendor acted is not known"

// policyDeniedText is policy_denied's text for a call of spec: the binding
// that makes the write unsafe to allow, in the tenant's terms.
func policyDeniedText(spec effectspec.Spec) string {
	switch {
	case spec.Route == effectspec.RouteFederated:
		return "the policy denies this call: a write on a federated route cannot be deduplicated"
	case spec.Idempotency.Kind == effectspec.BindingInProcess:
		return "the policy denies this call: binding in_process cannot be redispatched (a call whose outcome is unknown never runs again)"
	case spec.Idempotency.Kind == "" || spec.Idempotency.Kind == effectspec.BindingUnsupported:
		return "the policy denies this call: binding unsupported: its vendor cannot deduplicate writes"
	}
	return tenantText(effectspec.ReasonPolicyDenied, http.StatusForbidden)
}

// tenantText is the fixed text of a lifecycle refusal.
func tenantText(reason string, status int) string {
	switch reason {
	case "request_mismatch":
		return "the key was used with other arguments"
	case "in_progress":
		return "a call with this key is in progress"
	case "destination_conflict":
		return "the key's call went to another destination, whose outcome is not known"
	case "approval_key_mismatch":
		return "the key is not the approval ticket's"
	case "outcome_unknown":
		return "an earlier attempt may have reached the vendor, which cannot deduplicate: not sent again"
	case "scope_version_conflict":
		if status == http.StatusServiceUnavailable {
			return "the fleet's key scope version changed: this gateway no longer claims"
		}
		return "the key's record was made under another key scope version"
	case "vendor_unreachable":
		return "vendor_unreachable: the vendor could not be reached (no connection was made), so nothing was sent; retry with the same key"
	case "store_data_lost":
		return "store_data_lost: the idempotency store lost data; no call is dispatched until an operator acknowledges; retry later with the same key"
	case "denied":
		return "the call was denied"
	case "lease_lost":
		return "the call's slot was taken over by another attempt"
	case effectspec.ReasonPolicyDenied:
		return "the policy denies this call: its vendor cannot deduplicate writes"
	case "not_found":
		return "not found"
	case "not_unknown":
		return "the call is not unknown"
	}
	return reason
}

// logText is what the server logs of r: the error's text if it came from
// one, else the message.
func (r refusal) logText() string {
	if r.detail != "" {
		return r.detail
	}
	return r.msg
}

// Refusal is what the gateway answers for an error: the wire reason and
// HTTP status of DESIGN, section "refserver wire contract", the message a
// caller reads, and the error's own text (redacted), for a log only.
type Refusal struct {
	Reason  string
	Status  int
	Message string
	Detail  string
	// SafeNewKey is error.data.safe_new_key of the reason (DESIGN,
	// section "refserver wire contract"): nil when absent. A REST answer
	// of the refusal carries it too.
	SafeNewKey *bool
	// RetryAfter, for in_progress, quota_exceeded, store_full and
	// vendor_unreachable, and for an outcome_unknown under a backoff: how
	// long to wait before a retry with the same key.
	RetryAfter time.Duration
}

// Classify maps an error of the orchestrator or the store to its refusal,
// as a tools/call answers it: fixed text for every reason whose error may
// quote the store.
func (g *Gateway) Classify(err error) Refusal {
	r := g.classify(err)
	return Refusal{Reason: r.reason, Status: r.status, Message: r.msg, Detail: r.detail, SafeNewKey: r.safeNewKey(), RetryAfter: r.retryAfter}
}
