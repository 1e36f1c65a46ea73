package storetest

import (
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// giveBackTests: a claim whose caller never got (or never used) its reply is
// settled by re-sending it with the same op id and giving back the token that
// answer returned (docs/DESIGN.md, "The record and its lifecycle", "Settling a
// claim"). The give-back is guarded by the claim's op id on the record; a late
// copy of the claim never reserves a second attempt.
var giveBackTests = []test{
	{"ReopensSlot", testGiveBackReopens},
	{"LateClaimCopy", testGiveBackLateClaimCopy},
	{"OtherClaim", testGiveBackOtherClaim},
	{"AfterClientRetry", testGiveBackAfterClientRetry},
	{"AfterFinalize", testGiveBackAfterFinalize},
	{"AfterSettle", testGiveBackAfterSettle},
	{"FromUnknownWithoutLaterWrites", testGiveBackFromUnknown},
	{"Resend", testGiveBackResend},
	{"Missing", testGiveBackMissing},
	{"ResendAfterTakeBack", testGiveBackResendAfterTakeBack},
}

// testGiveBackResendAfterTakeBack: a claim whose reservation was taken back
// by a finalize never sent (redisstore does so itself when the WAIT behind
// it falls short, and answers an error) is re-sent by its caller with the
// same op id to get a new reservation: only a give-back marks the claim
// spent.
func testGiveBackResendAfterTakeBack(t *testing.T, h Harness) {
	e := std(t, h)
	req := opCall(effectspec.BindingUnsupported)
	e.claimed(req)
	e.neverSent(req, 1)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 || r.AlreadyApplied {
		t.Fatalf("the claim re-sent after its attempt was taken back: token %d, applied %v; want a new token 2", r.Token, r.AlreadyApplied)
	}
	e.giveBack(req, 2)
	e.wantNothingSent(req, 2)
}

// opCall is call with a fixed claim op id, as a caller that may re-send it
// holds.
func opCall(binding effectspec.BindingKind) idempotency.ClaimRequest {
	req := call(binding)
	req.OpID = idempotency.NewOpID()
	return req
}

func (e *env) giveBackErr(req idempotency.ClaimRequest, token int, claimOp string) error {
	return e.s.GiveBack(e.ctx, idempotency.GiveBackRequest{Scope: req.Scope, Key: req.Key, Token: token,
		ClaimOpID: claimOp, OpID: idempotency.NewOpID()})
}

func (e *env) giveBack(req idempotency.ClaimRequest, token int) {
	e.t.Helper()
	if err := e.giveBackErr(req, token, req.OpID); err != nil {
		e.t.Fatalf("GiveBack(token %d): unexpected error: %v", token, err)
	}
}

// testGiveBackReopens: for every binding, a given-back attempt counts on
// the receipt, never burns the slot, and the token is never reused; the
// lease of the given-back attempt need not have lapsed.
func testGiveBackReopens(t *testing.T, h Harness) {
	for _, b := range []effectspec.BindingKind{effectspec.BindingUnsupported, effectspec.BindingHeader, effectspec.BindingBodyPointer} {
		e := std(t, h)
		req := opCall(b)
		e.claimed(req)
		e.giveBack(req, 1)
		e.wantNothingSent(req, 1)
		retry := req
		retry.OpID = idempotency.NewOpID()
		if r := e.claimWant(retry, idempotency.StatusClaimed); r.Token != 2 || r.AlreadyApplied {
			t.Fatalf("%s: the retry after a give-back: token %d, applied %v; want a fresh token 2", b, r.Token, r.AlreadyApplied)
		}
	}
}

// testGiveBackLateClaimCopy: a copy of the claim (same op id) that arrives
// after its give-back answers applied and reserves nothing.
func testGiveBackLateClaimCopy(t *testing.T, h Harness) {
	e := std(t, h)
	req := opCall(effectspec.BindingUnsupported)
	e.claimed(req)
	// Before the give-back, the copy learns the token it reserved.
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 1 || !r.AlreadyApplied {
		t.Fatalf("a copy of the claim: token %d, applied %v; want 1, applied", r.Token, r.AlreadyApplied)
	}
	e.giveBack(req, 1)
	e.unchanged(req, "a late copy of the given-back claim", func() {
		r := e.claim(req)
		if !r.AlreadyApplied || r.Status == idempotency.StatusClaimed {
			t.Fatalf("a late copy after the give-back: status %q, applied %v; want applied, not claimed", r.Status, r.AlreadyApplied)
		}
	})
	retry := req
	retry.OpID = idempotency.NewOpID()
	if r := e.claimWant(retry, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("the client's retry: token %d, want 2", r.Token)
	}
	// A store may keep only the claim of the record's current cycle: the
	// old claim's copy is then judged as a contender (in_progress while the
	// retry's lease lives), never claimed.
	e.unchanged(req, "a late copy after the client's retry", func() {
		if r := e.claim(req); r.Status == idempotency.StatusClaimed {
			t.Fatalf("a late copy after the retry: claimed token %d", r.Token)
		}
	})
}

// testGiveBackOtherClaim: the give-back names the claim that reserved the
// token; any other op id (a token read from a lookup, say) is stale.
func testGiveBackOtherClaim(t *testing.T, h Harness) {
	e := std(t, h)
	req := opCall(effectspec.BindingUnsupported)
	e.claimed(req)
	e.stale(req, "a give-back under another claim's op id", func() error { return e.giveBackErr(req, 1, idempotency.NewOpID()) })
	e.stale(req, "a give-back of another token", func() error { return e.giveBackErr(req, 2, req.OpID) })
	// The owner's second attempt moves the token on.
	if _, err := e.reserve(req, 1); err != nil {
		t.Fatal(err)
	}
	e.stale(req, "a give-back of the first token after a second attempt", func() error { return e.giveBackErr(req, 1, req.OpID) })
	e.stale(req, "a give-back of the second attempt's token", func() error { return e.giveBackErr(req, 2, req.OpID) })
}

// testGiveBackAfterClientRetry: once a client's retry claimed (and may have
// sent) a new token, neither the old token nor the new one can be given
// back under the old claim: giving back the new one would let an
// unsupported call dispatch twice.
func testGiveBackAfterClientRetry(t *testing.T, h Harness) {
	e := short(t, h)
	req := opCall(effectspec.BindingHeader)
	e.claimed(req)
	e.expireLease()
	retry := req
	retry.OpID = idempotency.NewOpID()
	if r := e.claimWant(retry, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("the client's retry after the lease: token %d, want 2", r.Token)
	}
	seen := e.lookup(req).AttemptCount // what a lookup shows: the retry's token
	e.stale(req, "a give-back of the token a lookup read", func() error { return e.giveBackErr(req, seen, req.OpID) })
	e.stale(req, "a give-back of the claim's own token", func() error { return e.giveBackErr(req, 1, req.OpID) })

	// unsupported: the retry dispatches a slot that a give-back re-opened;
	// the old claim cannot give back what the retry holds.
	req = opCall(effectspec.BindingUnsupported)
	e.claimed(req)
	e.giveBack(req, 1)
	retry = req
	retry.OpID = idempotency.NewOpID()
	e.claimWant(retry, idempotency.StatusClaimed)
	e.stale(req, "a second give-back after the retry claimed", func() error { return e.giveBackErr(req, 2, req.OpID) })
	e.stale(req, "a give-back of the old token after the retry claimed", func() error { return e.giveBackErr(req, 1, req.OpID) })
}

// testGiveBackAfterFinalize: a finalize of the token, whatever it reported,
// ends the claim's hold on it.
func testGiveBackAfterFinalize(t *testing.T, h Harness) {
	e := std(t, h)
	for _, fin := range []struct {
		name string
		f    func(req idempotency.ClaimRequest)
	}{
		{"accepted", func(req idempotency.ClaimRequest) { e.finalize(req, 1, effectspec.Accepted, result(201, `{}`)) }},
		{"rejected", func(req idempotency.ClaimRequest) {
			e.finalize(req, 1, effectspec.DefinitelyRejected, result(400, `{}`))
		}},
		{"unknown", func(req idempotency.ClaimRequest) { e.finalize(req, 1, effectspec.Unknown, nil) }},
		{"never sent", func(req idempotency.ClaimRequest) { e.neverSent(req, 1) }},
	} {
		req := opCall(effectspec.BindingUnsupported)
		e.claimed(req)
		fin.f(req)
		e.stale(req, "a give-back after a finalize "+fin.name, func() error { return e.giveBackErr(req, 1, req.OpID) })
	}
}

// testGiveBackAfterSettle: an operator's settle of the lapsed attempt ends
// the claim's hold on it too.
func testGiveBackAfterSettle(t *testing.T, h Harness) {
	e := short(t, h)
	req := opCall(effectspec.BindingUnsupported)
	req.Timeout = shortLease
	e.claimed(req)
	e.expireLease()
	e.wait(e.cfg.Lease + margin) // past the attempt deadline plus a lease: settleable
	e.settle(settleReq(req, 1, effectspec.Accepted))
	e.stale(req, "a give-back after a settle", func() error { return e.giveBackErr(req, 1, req.OpID) })
	if r := e.claim(req); r.Status != idempotency.StatusReplay {
		t.Fatalf("a copy of the claim after the settle: %q, want the settled replay", r.Status)
	}
}

// testGiveBackFromUnknown: a client's retry after the lease turned the
// record unknown (the lease-expiry path, which takes no token); the
// re-sent claim still learns its token and gives it back, and the next
// retry dispatches.
func testGiveBackFromUnknown(t *testing.T, h Harness) {
	e := short(t, h)
	req := opCall(effectspec.BindingUnsupported)
	e.claimed(req)
	e.expireLease()
	retry := req
	retry.OpID = idempotency.NewOpID()
	contender(t, e.claimWant(retry, idempotency.StatusOutcomeUnknown))
	e.wantUnknown(req, 1)
	r := e.claimWant(req, idempotency.StatusClaimed)
	if r.Token != 1 || !r.AlreadyApplied {
		t.Fatalf("the re-sent claim over the expiry path: token %d, applied %v; want 1, applied", r.Token, r.AlreadyApplied)
	}
	e.giveBack(req, r.Token)
	e.wantNothingSent(req, 1)
	retry.OpID = idempotency.NewOpID()
	if r := e.claimWant(retry, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("the retry after the give-back: token %d, want 2", r.Token)
	}
}

// testGiveBackResend: a give-back re-sent with its op id answers nil again
// and changes nothing more; a second give-back under a new op id is stale.
func testGiveBackResend(t *testing.T, h Harness) {
	e := std(t, h)
	req := opCall(effectspec.BindingUnsupported)
	e.claimed(req)
	gb := idempotency.GiveBackRequest{Scope: req.Scope, Key: req.Key, Token: 1, ClaimOpID: req.OpID, OpID: idempotency.NewOpID()}
	if err := e.s.GiveBack(e.ctx, gb); err != nil {
		t.Fatal(err)
	}
	e.unchanged(req, "a re-sent give-back", func() {
		if err := e.s.GiveBack(e.ctx, gb); err != nil {
			t.Fatalf("a re-sent give-back: %v, want nil", err)
		}
	})
	e.stale(req, "a second give-back", func() error { return e.giveBackErr(req, 1, req.OpID) })
	e.wantNothingSent(req, 1)
}

func testGiveBackMissing(t *testing.T, h Harness) {
	e := std(t, h)
	req := opCall(effectspec.BindingUnsupported)
	if err := e.giveBackErr(req, 1, req.OpID); !isNotFound(err) {
		t.Fatalf("GiveBack without a record: %v, want ErrNotFound", err)
	}
	e.absent(req)
}
