package storetest

import (
	"errors"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// attemptTests cover Reserve and Finalize: compare-and-set on the fencing
// token, and at most two attempts per claim cycle.
var attemptTests = []test{
	{"ReserveSecond", testReserveSecond},
	{"ReserveStaleToken", testReserveStaleToken},
	{"ReserveNewCycle", testReserveNewCycle},
	{"ReserveNotInFlight", testReserveNotInFlight},
	{"FinalizeStaleToken", testFinalizeStaleToken},
	{"FinalizeTwice", testFinalizeTwice},
	{"FinalizeMissing", testFinalizeMissing},
}

func isStale(err error) bool { return errors.Is(err, idempotency.ErrStale) }

// stale runs f, which must fail with ErrStale and change nothing.
func (e *env) stale(req idempotency.ClaimRequest, what string, f func() error) {
	e.t.Helper()
	e.unchanged(req, what, func() {
		if err := f(); !isStale(err) {
			e.t.Fatalf("%s: %v, want ErrStale", what, err)
		}
	})
}

func (e *env) finalizeErr(req idempotency.ClaimRequest, token int, outcome effectspec.Outcome) error {
	_, err := e.s.Finalize(e.ctx, idempotency.FinalizeRequest{Scope: req.Scope, Key: req.Key, Token: token, Outcome: outcome, Result: result(200, `{"late":true}`)})
	return err
}

func (e *env) reserveErr(req idempotency.ClaimRequest, token int) error {
	_, err := e.reserve(req, token)
	return err
}

func testReserveSecond(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	res, err := e.reserve(req, 1)
	if err != nil {
		t.Fatalf("Reserve(1): %v", err)
	}
	if res.Token != 2 || res.LeaseDeadline.IsZero() || res.AlreadyApplied {
		t.Fatalf("Reserve(1) = %+v; want token 2 with a lease", res)
	}
	rec := e.lookup(req)
	if rec.State != effectspec.InProgress || rec.AttemptCount != 2 || !rec.LeaseDeadline.Equal(res.LeaseDeadline) {
		t.Fatalf("after Reserve: state %q, attempts %d, lease %v; want in_progress, 2, %v", rec.State, rec.AttemptCount, rec.LeaseDeadline, res.LeaseDeadline)
	}
	e.stale(req, "a third attempt in one cycle (Reserve(2))", func() error { return e.reserveErr(req, 2) })
	e.stale(req, "Reserve with the superseded token 1", func() error { return e.reserveErr(req, 1) })
	e.stale(req, "Finalize with the superseded token 1", func() error { return e.finalizeErr(req, 1, effectspec.Accepted) })
	want := result(201, `{"id":"ch_2"}`)
	e.finalize(req, 2, effectspec.Accepted, want)
	r := e.claimWant(req, idempotency.StatusReplay)
	if r.Record == nil || r.Record.AttemptCount != 2 {
		t.Fatal("replay does not count the two attempts")
	}
	sameResult(t, r.Record.Result, want)
}

func testReserveStaleToken(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	for _, tok := range []int{2, 3, 1000} {
		e.stale(req, "Reserve with a token never issued", func() error { return e.reserveErr(req, tok) })
	}
	// Token 0 was never issued either; a store may call it stale or invalid.
	e.unchanged(req, "Reserve(0)", func() {
		if err := e.reserveErr(req, 0); err == nil {
			t.Fatal("Reserve(0) succeeded")
		}
	})
}

func testReserveNewCycle(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	// The first attempt never left, so the re-claim below is the slot's
	// first redispatch (which no backoff delays).
	if _, err := e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: 1, PreviousNeverSent: true}); err != nil {
		t.Fatalf("Reserve(1): %v", err)
	}
	e.finalize(req, 2, effectspec.Unknown, nil)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 3 {
		t.Fatalf("re-claim of an unknown record after two attempts: token %d, want 3", r.Token)
	}
	// A new cycle may reserve its own second attempt, and no third.
	res, err := e.reserve(req, 3)
	if err != nil || res.Token != 4 {
		t.Fatalf("Reserve(3) in a new cycle = %+v, %v; want token 4", res, err)
	}
	e.stale(req, "a third attempt in the second cycle", func() error { return e.reserveErr(req, 4) })
}

func testReserveNotInFlight(t *testing.T, h Harness) {
	e := std(t, h)
	for _, outcome := range []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected, effectspec.Unknown} {
		req := call(effectspec.BindingHeader)
		e.claimed(req)
		e.finalize(req, 1, outcome, result(503, `{}`))
		e.stale(req, "Reserve after Finalize "+string(outcome), func() error { return e.reserveErr(req, 1) })
	}
	req := held(call(effectspec.BindingHeader))
	e.hold(req)
	e.unchanged(req, "Reserve on a held record", func() {
		if err := e.reserveErr(req, 0); err == nil {
			t.Fatal("Reserve on a held record succeeded")
		}
		if err := e.reserveErr(req, 1); err == nil {
			t.Fatal("Reserve(1) on a held record succeeded")
		}
	})
	missing := call(effectspec.BindingHeader)
	if err := e.reserveErr(missing, 1); err == nil {
		t.Fatal("Reserve on a missing record succeeded")
	}
	e.absent(missing)
}

func testFinalizeStaleToken(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	for _, tok := range []int{2, 7} {
		e.stale(req, "Finalize with a token never issued", func() error { return e.finalizeErr(req, tok, effectspec.Accepted) })
	}
	e.unchanged(req, "Finalize(0)", func() {
		if err := e.finalizeErr(req, 0, effectspec.Accepted); err == nil {
			t.Fatal("Finalize(0) succeeded")
		}
	})
	e.finalize(req, 1, effectspec.Accepted, result(201, `{}`))
}

func testFinalizeTwice(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	want := result(201, `{"id":"ch_1"}`)
	e.finalize(req, 1, effectspec.Accepted, want)
	// A second, different finalize (another op id) is not a re-send: the
	// first outcome stands.
	e.stale(req, "a second Finalize", func() error { return e.finalizeErr(req, 1, effectspec.DefinitelyRejected) })
	r := e.claimWant(req, idempotency.StatusReplay)
	if r.Record == nil || r.Record.State != effectspec.Accepted {
		t.Fatal("the first outcome did not stand")
	}
	sameResult(t, r.Record.Result, want)
}

func testFinalizeMissing(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	if err := e.finalizeErr(req, 1, effectspec.Accepted); err == nil {
		t.Fatal("Finalize of a missing record succeeded")
	}
	e.absent(req)
}
