package storetest

import (
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// resendTests: a mutating call sent again with the same OpID (its reply was
// lost) answers what it answered the first time and changes nothing.
var resendTests = []test{
	{"Claim", testResendClaim},
	{"ClaimHeld", testResendClaimHeld},
	{"ClaimRedispatch", testResendClaimRedispatch},
	{"Reserve", testResendReserve},
	{"Finalize", testResendFinalize},
	{"Decide", testResendDecide},
}

func sameClaim(t *testing.T, first, again idempotency.ClaimResult) {
	t.Helper()
	if !again.AlreadyApplied {
		t.Fatalf("re-sent claim: AlreadyApplied false (status %q, token %d)", again.Status, again.Token)
	}
	if again.Status != first.Status || again.Token != first.Token || again.Ticket != first.Ticket || !again.LeaseDeadline.Equal(first.LeaseDeadline) {
		t.Fatalf("re-sent claim answered %q token %d ticket %q lease %v; the original was %q token %d ticket %q lease %v",
			again.Status, again.Token, again.Ticket, again.LeaseDeadline, first.Status, first.Token, first.Ticket, first.LeaseDeadline)
	}
}

func testResendClaim(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	req.OpID = idempotency.NewOpID()
	first := e.claimed(req)
	e.unchanged(req, "a re-sent claim", func() {
		sameClaim(t, first, e.claim(req))
		sameClaim(t, first, e.claim(req))
	})
	// Another operation on the same key is a contender, not a re-send.
	other := req
	other.OpID = idempotency.NewOpID()
	contender(t, e.claimWant(other, idempotency.StatusInProgress))
}

func testResendClaimHeld(t *testing.T, h Harness) {
	e := std(t, h)
	req := held(call(effectspec.BindingHeader))
	req.OpID = idempotency.NewOpID()
	first := e.claimWant(req, idempotency.StatusHeld)
	e.unchanged(req, "a re-sent held claim", func() {
		sameClaim(t, first, e.claim(req))
	})
}

func testResendClaimRedispatch(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	e.finalize(req, 1, effectspec.Unknown, nil)
	req.OpID = idempotency.NewOpID()
	first := e.claimWant(req, idempotency.StatusClaimed)
	if first.Token != 2 {
		t.Fatalf("redispatch token %d, want 2", first.Token)
	}
	e.unchanged(req, "a re-sent redispatch claim", func() {
		sameClaim(t, first, e.claim(req))
	})
}

func testResendReserve(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	rr := idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: 1, OpID: idempotency.NewOpID()}
	first, err := e.s.Reserve(e.ctx, rr)
	if err != nil || first.Token != 2 {
		t.Fatalf("Reserve = %+v, %v; want token 2", first, err)
	}
	e.unchanged(req, "a re-sent reserve", func() {
		again, err := e.s.Reserve(e.ctx, rr)
		if err != nil {
			t.Fatalf("re-sent Reserve: %v", err)
		}
		if !again.AlreadyApplied || again.Token != first.Token || !again.LeaseDeadline.Equal(first.LeaseDeadline) {
			t.Fatalf("re-sent Reserve = %+v; want AlreadyApplied with token %d, lease %v", again, first.Token, first.LeaseDeadline)
		}
	})
}

func testResendFinalize(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	want := result(201, `{"id":"ch_1"}`)
	fr := idempotency.FinalizeRequest{Scope: req.Scope, Key: req.Key, Token: 1, Outcome: effectspec.Accepted, Result: want, OpID: idempotency.NewOpID()}
	first, err := e.s.Finalize(e.ctx, fr)
	if err != nil {
		t.Fatalf("Finalize: %v", err)
	}
	e.unchanged(req, "a re-sent finalize", func() {
		again, err := e.s.Finalize(e.ctx, fr)
		if err != nil {
			t.Fatalf("re-sent Finalize: %v; a re-send answers the original result", err)
		}
		if again.State != first.State || again.AttemptCount != first.AttemptCount || !again.FinalizedAt.Equal(first.FinalizedAt) {
			t.Fatalf("re-sent Finalize answered state %q attempts %d finalized %v; the original was %q %d %v",
				again.State, again.AttemptCount, again.FinalizedAt, first.State, first.AttemptCount, first.FinalizedAt)
		}
	})
	r := e.claimWant(req, idempotency.StatusReplay)
	sameResult(t, r.Record.Result, want)
}

func testResendDecide(t *testing.T, h Harness) {
	e := std(t, h)
	for _, approve := range []bool{true, false} {
		req := held(call(effectspec.BindingHeader))
		ticket := e.hold(req)
		dr := idempotency.DecideRequest{Ticket: ticket, Approve: approve, OpID: idempotency.NewOpID()}
		first, err := e.s.Decide(e.ctx, dr)
		if err != nil {
			t.Fatalf("Decide(%v): %v", approve, err)
		}
		e.unchanged(req, "a re-sent decision", func() {
			again, err := e.s.Decide(e.ctx, dr)
			if err != nil {
				t.Fatalf("re-sent Decide(%v): %v", approve, err)
			}
			if again != first {
				t.Fatalf("re-sent Decide = %+v, first answered %+v", again, first)
			}
		})
	}
}
