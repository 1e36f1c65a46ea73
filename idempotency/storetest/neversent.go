package storetest

import (
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// neverSentTests: an attempt finalized as never sent counts on the receipt
// (AttemptCount) but does not burn the slot (docs/DESIGN.md, "The record and
// its lifecycle").
var neverSentTests = []test{
	{"ReopensEveryBinding", testNeverSentReopens},
	{"TokensNeverRestart", testNeverSentTokens},
	{"LateStaleFinalize", testNeverSentLateStale},
	{"CountsOnlyItsAttempt", testNeverSentCountsOnlyItsAttempt},
	{"RouteChanged", testNeverSentRouteChanged},
	{"NotInFlight", testNeverSentNotInFlight},
	{"SecondAttemptBothUnsent", testNeverSentSecondAttempt},
}

// testNeverSentSecondAttempt: a first attempt that proved before_send is
// followed at once by a second one (Reserve with PreviousNeverSent); when
// that one never leaves either, the unsupported slot re-opens: neither
// attempt may have reached the vendor.
func testNeverSentSecondAttempt(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingUnsupported)
	e.claimed(req)
	rsv, err := e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: 1, PreviousNeverSent: true})
	if err != nil || rsv.Token != 2 {
		t.Fatalf("Reserve after an unsent first attempt: %+v %v, want token 2", rsv, err)
	}
	if rec := e.lookup(req); rec.SentAttempts != 1 || rec.AttemptCount != 2 {
		t.Fatalf("after the second reservation: sent %d, attempts %d; want 1 (only the second may leave), 2", rec.SentAttempts, rec.AttemptCount)
	}
	// The finalize's reply carries the count: the orchestrator reads it
	// there to refuse a call that never reached its vendor as
	// vendor_unreachable, with no further round trip.
	if fin := e.neverSent(req, 2); fin.State != effectspec.Unknown || fin.SentAttempts != 0 || fin.AttemptCount != 2 {
		t.Fatalf("Finalize of the second unsent attempt returned state %q, sent %d, attempts %d; want unknown, 0, 2",
			fin.State, fin.SentAttempts, fin.AttemptCount)
	}
	e.wantNothingSent(req, 2)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 3 {
		t.Fatalf("claim after two unsent attempts: token %d, want 3", r.Token)
	}

	// Without the flag the first attempt may have left: the slot stays burnt.
	req = call(effectspec.BindingUnsupported)
	e.claimed(req)
	if _, err := e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: 1}); err != nil {
		t.Fatal(err)
	}
	if fin := e.neverSent(req, 2); fin.SentAttempts != 1 {
		t.Fatalf("Finalize of the second unsent attempt after one that may have left returned sent %d, want 1", fin.SentAttempts)
	}
	if rec := e.lookup(req); rec.SentAttempts != 1 {
		t.Fatalf("second attempt unsent, first unknown: sent %d, want 1", rec.SentAttempts)
	}
	e.claimWant(req, idempotency.StatusOutcomeUnknown)
}

func (e *env) neverSent(req idempotency.ClaimRequest, token int) idempotency.Record {
	e.t.Helper()
	rec, err := e.s.Finalize(e.ctx, idempotency.FinalizeRequest{Scope: req.Scope, Key: req.Key, Token: token, NeverSent: true})
	if err != nil {
		e.t.Fatalf("Finalize(token %d, never sent): unexpected error: %v", token, err)
	}
	return rec
}

func (e *env) neverSentErr(req idempotency.ClaimRequest, token int) error {
	_, err := e.s.Finalize(e.ctx, idempotency.FinalizeRequest{Scope: req.Scope, Key: req.Key, Token: token, Outcome: effectspec.Unknown, NeverSent: true})
	return err
}

// wantNothingSent checks the stored form of an attempt that never left:
// unknown, every reservation counted, none sent.
func (e *env) wantNothingSent(req idempotency.ClaimRequest, attempts int) {
	e.t.Helper()
	rec := e.lookup(req)
	if rec.State != effectspec.Unknown || rec.AttemptCount != attempts || rec.SentAttempts != 0 || rec.Result != nil {
		e.t.Fatalf("after never sent: state %q, attempts %d, sent %d, result %v; want unknown, %d, 0, none",
			rec.State, rec.AttemptCount, rec.SentAttempts, rec.Result != nil, attempts)
	}
}

// testNeverSentReopens: for every binding, unsupported included, the next
// claim after a never-sent attempt is claimed with the next token.
func testNeverSentReopens(t *testing.T, h Harness) {
	e := std(t, h)
	for _, b := range []effectspec.BindingKind{effectspec.BindingHeader, effectspec.BindingBodyPointer, effectspec.BindingUnsupported} {
		req := call(b)
		first := e.claimed(req)
		fin := e.neverSent(req, 1)
		if fin.State != effectspec.Unknown || fin.SentAttempts != 0 || fin.AttemptCount != 1 {
			t.Fatalf("%s: Finalize never sent returned state %q, sent %d, attempts %d; want unknown, 0, 1", b, fin.State, fin.SentAttempts, fin.AttemptCount)
		}
		e.wantNothingSent(req, 1)
		r := e.claimWant(req, idempotency.StatusClaimed)
		if r.Token != 2 || r.LeaseDeadline.IsZero() || r.VendorKey != first.VendorKey {
			t.Fatalf("%s: claim after never sent: token %d, lease %v, vendor key %q; want token 2 with a lease and the slot's vendor key %q",
				b, r.Token, r.LeaseDeadline, r.VendorKey, first.VendorKey)
		}
		rec := e.lookup(req)
		if rec.State != effectspec.InProgress || rec.AttemptCount != 2 || rec.SentAttempts != 1 {
			t.Fatalf("%s: after re-open: state %q, attempts %d, sent %d; want in_progress, 2, 1", b, rec.State, rec.AttemptCount, rec.SentAttempts)
		}
		want := result(201, `{"id":"ch_2"}`)
		e.finalize(req, 2, effectspec.Accepted, want)
		rp := e.claimWant(req, idempotency.StatusReplay)
		if rp.Record.AttemptCount != 2 || rp.Record.SentAttempts != 1 {
			t.Fatalf("%s: replay counts %d attempts, %d sent; want 2, 1", b, rp.Record.AttemptCount, rp.Record.SentAttempts)
		}
		sameResult(t, rp.Record.Result, want)
	}
}

// testNeverSentTokens: tokens never restart, however often the slot
// re-opens.
func testNeverSentTokens(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingUnsupported)
	e.claimed(req)
	for tok := 1; tok <= 4; tok++ {
		e.neverSent(req, tok)
		e.wantNothingSent(req, tok)
		if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != tok+1 {
			t.Fatalf("claim after %d never-sent attempts: token %d, want %d", tok, r.Token, tok+1)
		}
	}
}

// testNeverSentLateStale: a finalize of a superseded token, never sent or
// not, changes nothing, and the current owner's outcome stands.
func testNeverSentLateStale(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingUnsupported)
	e.claimed(req)
	e.neverSent(req, 1)
	e.claimWant(req, idempotency.StatusClaimed) // token 2
	e.stale(req, "a late never-sent finalize of token 1", func() error { return e.neverSentErr(req, 1) })
	e.stale(req, "a late finalize of token 1", func() error { return e.finalizeErr(req, 1, effectspec.Accepted) })
	if rec := e.lookup(req); rec.SentAttempts != 1 || rec.AttemptCount != 2 {
		t.Fatalf("after late finalizes: attempts %d, sent %d; want 2, 1", rec.AttemptCount, rec.SentAttempts)
	}
	e.finalize(req, 2, effectspec.Unknown, nil)
	// Attempt 2 may have left: an unsupported binding cannot be retried.
	e.unchanged(req, "a claim after an attempt that may have left", func() {
		contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
	})
	e.stale(req, "a never-sent finalize after the outcome", func() error { return e.neverSentErr(req, 2) })
}

// testNeverSentCountsOnlyItsAttempt: taking one attempt back leaves the
// other one that may have left: unsupported stays outcome_unknown, a vendor
// binding redispatches.
func testNeverSentCountsOnlyItsAttempt(t *testing.T, h Harness) {
	e := std(t, h)
	for _, b := range []effectspec.BindingKind{effectspec.BindingUnsupported, effectspec.BindingHeader} {
		req := call(b)
		e.claimed(req)
		if _, err := e.reserve(req, 1); err != nil {
			t.Fatalf("Reserve(1): %v", err)
		}
		if rec := e.lookup(req); rec.SentAttempts != 2 {
			t.Fatalf("%s: after two reservations: sent %d, want 2", b, rec.SentAttempts)
		}
		fin := e.neverSent(req, 2)
		if fin.State != effectspec.Unknown || fin.SentAttempts != 1 || fin.AttemptCount != 2 {
			t.Fatalf("%s: never sent of attempt 2: state %q, sent %d, attempts %d; want unknown, 1, 2", b, fin.State, fin.SentAttempts, fin.AttemptCount)
		}
		if b == effectspec.BindingUnsupported {
			e.unchanged(req, "a claim after one attempt may have left", func() {
				contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
			})
			continue
		}
		if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 3 {
			t.Fatalf("%s: redispatch token %d, want 3", b, r.Token)
		}
		if rec := e.lookup(req); rec.SentAttempts != 2 || rec.AttemptCount != 3 {
			t.Fatalf("%s: after redispatch: attempts %d, sent %d; want 3, 2", b, rec.AttemptCount, rec.SentAttempts)
		}
	}
}

// testNeverSentRouteChanged: a slot whose attempts never left, resolved
// elsewhere now, is destination_conflict too.
func testNeverSentRouteChanged(t *testing.T, h Harness) {
	e := std(t, h)
	for _, b := range []effectspec.BindingKind{effectspec.BindingHeader, effectspec.BindingUnsupported} {
		req := call(b)
		e.claimed(req)
		e.neverSent(req, 1)
		e.unchanged(req, "a claim resolved elsewhere", func() {
			for what, other := range moved(req) {
				if r := e.claim(other); r.Status != idempotency.StatusDestinationConflict {
					t.Fatalf("%s, %s: %q, want destination_conflict", b, what, r.Status)
				} else {
					contender(t, r)
				}
			}
		})
	}
}

// testNeverSentNotInFlight: never sent applies only to the current
// attempt of an in-flight record: a final or already finalized record is
// ErrStale, and a never-sent finalize with an outcome or a result is an
// error; none changes anything.
func testNeverSentNotInFlight(t *testing.T, h Harness) {
	e := std(t, h)
	for _, outcome := range []effectspec.Outcome{effectspec.Accepted, effectspec.Unknown} {
		req := call(effectspec.BindingUnsupported)
		e.claimed(req)
		e.finalize(req, 1, outcome, result(200, `{}`))
		e.stale(req, "never sent after "+string(outcome), func() error { return e.neverSentErr(req, 1) })
	}
	req := call(effectspec.BindingUnsupported)
	e.claimed(req)
	e.unchanged(req, "a never-sent finalize with an outcome or result", func() {
		for _, fr := range []idempotency.FinalizeRequest{
			{Scope: req.Scope, Key: req.Key, Token: 1, NeverSent: true, Outcome: effectspec.Accepted},
			{Scope: req.Scope, Key: req.Key, Token: 1, NeverSent: true, Result: result(201, `{}`)},
		} {
			if _, err := e.s.Finalize(e.ctx, fr); err == nil {
				t.Fatalf("Finalize never sent with outcome %q and result %v succeeded", fr.Outcome, fr.Result != nil)
			}
		}
	})
}
