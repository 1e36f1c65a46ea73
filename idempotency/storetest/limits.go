package storetest

import (
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// limitTests: a slot is dispatched a bounded number of times, spaced
// (docs/DESIGN.md, "The record and its lifecycle": max_attempts, backoff).
var limitTests = []test{
	{"MaxAttempts", testMaxAttempts},
	{"MaxAttemptsReserve", testMaxAttemptsReserve},
	{"MaxAttemptsNotUsedUp", testMaxAttemptsNotUsedUp},
	{"Backoff", testBackoff},
	{"Invalid", testMaxAttemptsInvalid},
}

// testMaxAttempts: once the attempts that may have left reach
// max_attempts, a claim answers outcome_unknown, says why, carries no
// retry-after, reserves nothing, and the record stays listed unknown.
func testMaxAttempts(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	req.MaxAttempts = 2
	e.claimed(req)
	e.finalize(req, 1, effectspec.Unknown, nil)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("first redispatch: token %d, want 2", r.Token)
	}
	e.finalize(req, 2, effectspec.Unknown, nil)
	e.unchanged(req, "a claim past max_attempts", func() {
		r := e.claimWant(req, idempotency.StatusOutcomeUnknown)
		if !r.MaxAttemptsReached || r.RetryAfter != 0 {
			t.Fatalf("past max_attempts: reached %v, retry after %v; want true, 0", r.MaxAttemptsReached, r.RetryAfter)
		}
	})
	found := false
	for _, u := range e.list("ws_test", "", 0).Records {
		found = found || u.Record.Key == req.Key
	}
	if !found {
		t.Fatal("a record past max_attempts is not listed for the operator")
	}
	// A lapsed attempt past it turns unknown and is not sent again.
	e2 := short(t, h)
	one := call(effectspec.BindingHeader)
	one.MaxAttempts = 1
	e2.claimed(one)
	e2.expireLease()
	if r := e2.claimWant(one, idempotency.StatusOutcomeUnknown); !r.MaxAttemptsReached {
		t.Fatal("a lapsed attempt at max_attempts 1: redispatch refused without saying why")
	}
	e2.wantUnknown(one, 1)
}

// testMaxAttemptsReserve: the cycle's second attempt counts too: one that
// would pass max_attempts is not reserved, unless the first never left.
func testMaxAttemptsReserve(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	rr := idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: 1, MaxAttempts: 1}
	e.stale(req, "a second attempt past max_attempts", func() error {
		_, err := e.s.Reserve(e.ctx, rr)
		return err
	})
	rr.PreviousNeverSent = true
	if res, err := e.s.Reserve(e.ctx, rr); err != nil || res.Token != 2 {
		t.Fatalf("Reserve after a first attempt that never left = %+v, %v; want token 2", res, err)
	}
}

// testMaxAttemptsNotUsedUp: attempts that never left (a give-back, a
// never-sent finalize) do not count against max_attempts.
func testMaxAttemptsNotUsedUp(t *testing.T, h Harness) {
	e := std(t, h)
	req := opCall(effectspec.BindingHeader)
	req.MaxAttempts = 1
	e.claimed(req)
	e.giveBack(req, 1)
	again := req
	again.OpID = idempotency.NewOpID()
	if r := e.claimWant(again, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("after a give-back: token %d, want 2", r.Token)
	}
	e.neverSent(again, 2)
	again.OpID = idempotency.NewOpID()
	if r := e.claimWant(again, idempotency.StatusClaimed); r.Token != 3 {
		t.Fatalf("after a never-sent attempt: token %d, want 3", r.Token)
	}
}

// testBackoff: the redispatch after n >= 2 attempts that may have left
// waits lease x 2^(n-1) from the latest reservation: earlier, the claim
// answers outcome_unknown with how long, and reserves nothing; after, it
// dispatches.
func testBackoff(t *testing.T, h Harness) {
	e := short(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	e.finalize(req, 1, effectspec.Unknown, nil)
	e.claimWant(req, idempotency.StatusClaimed) // the first redispatch does not wait
	e.finalize(req, 2, effectspec.Unknown, nil)
	e.unchanged(req, "a redispatch before its backoff", func() {
		b := e.claimWant(req, idempotency.StatusOutcomeUnknown)
		if b.MaxAttemptsReached || b.RetryAfter <= 0 || b.RetryAfter > 2*e.cfg.Lease {
			t.Fatalf("before the backoff: reached %v, retry after %v; want false, in (0, %v]", b.MaxAttemptsReached, b.RetryAfter, 2*e.cfg.Lease)
		}
	})
	// Measured from attempt 2's reservation, before now.
	e.wait(2*e.cfg.Lease + margin)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 3 {
		t.Fatalf("after the backoff: token %d, want 3", r.Token)
	}
}

// testMaxAttemptsInvalid: a negative max_attempts changes nothing.
func testMaxAttemptsInvalid(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	req.MaxAttempts = -1
	if _, err := e.s.Claim(e.ctx, req); err == nil {
		t.Fatal("Claim with a negative max_attempts succeeded")
	}
	e.absent(req)
}
