package mcpgateway

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// TestClassifyLifecycleErrors: every error the orchestrator returns maps to
// its wire reason: a stale finalize (the slot was taken over) is lease_lost,
// not internal; in_progress carries retry_after_ms; a schema refusal carried
// through the claim comes back as it was decided.
func TestClassifyLifecycleErrors(t *testing.T) {
	s := &Gateway{cfg: Config{Redact: func(s string) string { return s }}}
	schema := refusal{reason: "invalid_arguments", status: 400, msg: "arguments do not match the tool's input schema"}
	for _, tc := range []struct {
		err    error
		reason string
		status int
	}{
		{fmt.Errorf("retry: finalize attempt 1: %w", idempotency.ErrStale), "lease_lost", 409},
		{&retry.RefusalError{Err: idempotency.ErrInProgress, RetryAfter: 1500 * time.Millisecond}, "in_progress", 409},
		{fmt.Errorf("%w: bad pointer", idempotency.ErrInvalidRequest), "invalid_request", 400},
		{effectspec.ErrPolicyDenied, "policy_denied", 403},
		{&refusalError{schema}, "invalid_arguments", 400},
		{errors.New("something else"), "internal", 500},
		{&retry.RefusalError{Err: idempotency.ErrVendorUnreachable, RetryAfter: time.Second}, "vendor_unreachable", 503},
	} {
		r := s.classify(tc.err)
		if r.reason != tc.reason || r.status != tc.status {
			t.Errorf("classify(%v) = %s/%d, want %s/%d", tc.err, r.reason, r.status, tc.reason, tc.status)
		}
	}
	r := s.classify(&retry.RefusalError{Err: idempotency.ErrInProgress, RetryAfter: 1500 * time.Millisecond})
	e := rpcError(r, "idt_00000000000000000000000000000001")
	if string(e.Data) != `{"reason":"in_progress","status":409,"idempotency_key":"idt_00000000000000000000000000000001","retry_after_ms":1500,"safe_new_key":false}` {
		t.Errorf("in_progress error.data %s", e.Data)
	}
}

// TestClassifyFixedText: what a caller reads of a refusal classified from
// an error is fixed text wherever the error's may come from the store: an
// address, the dialer's words, a stored scope version, a record's decoding.
// The error's text is the refusal's detail, for the log.
func TestClassifyFixedText(t *testing.T) {
	s := &Gateway{cfg: Config{Redact: func(s string) string { return s }}}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("redisstore: claim: %w: dial tcp 10.1.2.3:6390: connect: connection refused", idempotency.ErrStoreUnavailable), storeUnavailableText},
		{fmt.Errorf("redisstore: lookup: %w", context.DeadlineExceeded), storeUnavailableText},
		{fmt.Errorf("ERR user_script:12: bad 10.1.2.3:6390"), internalText},
		{fmt.Errorf("obol:meta:scope_version now holds 10.1.2.3: %w", idempotency.ErrScopeVersionChanged),
			"the fleet's key scope version changed: this gateway no longer claims"},
		{fmt.Errorf("retry: finalize attempt 1: %w: 10.1.2.3", idempotency.ErrStale), "the call's slot was taken over by another attempt"},
		{fmt.Errorf("retry: attempt 1: its record is gone: %w (%w): 10.1.2.3", idempotency.ErrStale, idempotency.ErrNotFound), recordLostText},
	} {
		r := s.classify(tc.err)
		if r.msg != tc.want || strings.Contains(r.msg, "10.1.2.3") || r.detail != tc.err.Error() {
			t.Errorf("classify(%v): msg %q detail %q, want msg %q and the error as detail", tc.err, r.msg, r.detail, tc.want)
		}
	}
	// Messages written from the request alone stay as they are.
	if r := s.classify(fmt.Errorf("%w: bad pointer /a/b", idempotency.ErrInvalidRequest)); !strings.Contains(r.msg, "bad pointer /a/b") {
		t.Errorf("invalid_request message %q", r.msg)
	}
}

// TestClassifyVendorUnreachable: a call whose vendor was never reached is
// refused vendor_unreachable: 503, retry_after_ms (rounded up to the
// millisecond), safe_new_key true, a fixed text that says nothing was sent
// and to retry with the same key; the attempt's error is the log's detail.
func TestClassifyVendorUnreachable(t *testing.T) {
	s := &Gateway{cfg: Config{Redact: func(s string) string { return s }}}
	err := &retry.RefusalError{Err: idempotency.ErrVendorUnreachable, RetryAfter: 1500*time.Millisecond + time.Microsecond,
		Cause: fmt.Errorf("retry: before_send: round trip: connection refused")}
	r := s.classify(err)
	if r.reason != "vendor_unreachable" || r.status != 503 || !strings.Contains(r.msg, "nothing was sent") ||
		!strings.Contains(r.msg, "retry with the same key") || !strings.Contains(r.detail, "connection refused") {
		t.Fatalf("classify: %+v", r)
	}
	e := rpcError(r, "idt_00000000000000000000000000000001")
	if string(e.Data) != `{"reason":"vendor_unreachable","status":503,"idempotency_key":"idt_00000000000000000000000000000001","retry_after_ms":1501,"safe_new_key":true}` {
		t.Errorf("vendor_unreachable error.data %s", e.Data)
	}
}

// TestClassifyOutcomeUnknownLimits: an outcome_unknown refused by its
// backoff carries retry_after_ms (rounded up); one past max_attempts says
// so and carries none; a plain one carries none either.
func TestClassifyOutcomeUnknownLimits(t *testing.T) {
	s := &Gateway{cfg: Config{Redact: func(s string) string { return s }}}
	const key = "idt_00000000000000000000000000000001"
	for _, tc := range []struct {
		err  error
		data string
		msg  string
	}{
		{&retry.RefusalError{Err: idempotency.ErrOutcomeUnknown, RetryAfter: 1500*time.Millisecond + 1}, `{"reason":"outcome_unknown","status":409,"idempotency_key":"` + key + `","retry_after_ms":1501,"safe_new_key":false}`, backoffText},
		{&retry.RefusalError{Err: idempotency.ErrOutcomeUnknown, MaxAttemptsReached: true}, `{"reason":"outcome_unknown","status":409,"idempotency_key":"` + key + `","safe_new_key":false}`, maxAttemptsText},
		{&retry.RefusalError{Err: idempotency.ErrOutcomeUnknown}, `{"reason":"outcome_unknown","status":409,"idempotency_key":"` + key + `","safe_new_key":false}`, tenantText("outcome_unknown", 409)},
		{idempotency.ErrOutcomeUnknown, `{"reason":"outcome_unknown","status":409,"idempotency_key":"` + key + `","safe_new_key":false}`, tenantText("outcome_unknown", 409)},
	} {
		r := s.classify(tc.err)
		if e := rpcError(r, key); string(e.Data) != tc.data || r.msg != tc.msg {
			t.Errorf("classify(%+v): error.data %s, message %q; want %s, %q", tc.err, e.Data, r.msg, tc.data, tc.msg)
		}
	}
}
