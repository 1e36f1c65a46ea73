package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// incarnationTests: a record made again under the same key (the old one
// expired or was deleted) restarts its tokens, and an old worker's token
// never matches on it.
var incarnationTests = []test{
	{"OldWorkerAfterRecreate", testIncarnationOldWorker},
	{"GiveBack", testIncarnationGiveBack},
}

// settleRunning is the attempt timeout of the running-attempt tests that
// wait for its deadline: the attempt outlives its (short) lease, and ends
// soon enough to wait for. stillRunning is that of the tests whose steps
// must all happen before the deadline, on wall time on a real Redis: long
// enough for a loaded machine (at 4 leases, one run in many took 2.8s), and
// never waited for.
const (
	settleRunning = 4 * shortLease
	stillRunning  = 40 * shortLease
)

// wantRunning checks that a settle of req is refused because its attempt may
// still be running, until about deadline plus a lease, and changes nothing.
func (e *env) wantRunning(req idempotency.ClaimRequest, what string, attempts int, deadline time.Time) {
	e.t.Helper()
	e.unchanged(req, what, func() {
		_, err := e.settleErr(settleReq(req, attempts, effectspec.DefinitelyRejected))
		var ar *idempotency.AttemptRunningError
		if !errors.Is(err, idempotency.ErrInProgress) || !errors.As(err, &ar) {
			e.t.Fatalf("%s: %v, want an *AttemptRunningError matching ErrInProgress", what, err)
		}
		if ar.RetryAfter <= 0 || ar.RetryAfter > stillRunning+e.cfg.Lease+margin {
			e.t.Fatalf("%s: retry after %v, want up to the attempt deadline plus a lease (%v)", what, ar.RetryAfter, stillRunning+e.cfg.Lease)
		}
		if want := deadline.Add(e.cfg.Lease); !ar.SettleAfter.Round(0).Equal(want.Round(0)) {
			e.t.Fatalf("%s: settle after %v, want the attempt deadline plus the lease %v", what, ar.SettleAfter, want)
		}
	})
}

// testSettleAttemptRunning: the lease lapsed while the attempt is still at
// the vendor (a failover, failed renewals, a paused gateway). An operator's
// settle is refused until the attempt deadline (plus a margin), also after a
// client's retry turned the record unknown on the lease-expiry path, and
// the owner's real outcome still lands.
func testSettleAttemptRunning(t *testing.T, h Harness) {
	e := short(t, h)
	req := call(effectspec.BindingUnsupported)
	req.Timeout = stillRunning
	c := e.claimed(req)
	e.expireLease()
	e.wantUnknown(req, 1)
	e.wantRunning(req, "Settle of a lapsed lease before the attempt deadline", 1, c.AttemptDeadline)
	// A client's retry meets the lapsed lease: the record turns unknown, and
	// its attempt may still be running all the same.
	contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
	if rec := e.lookup(req); !rec.AttemptDeadline.Equal(c.AttemptDeadline) {
		t.Fatalf("after the expiry path: attempt deadline %v, want %v kept", rec.AttemptDeadline, c.AttemptDeadline)
	}
	e.wantRunning(req, "Settle after the expiry path", 1, c.AttemptDeadline)
	// The listing shows it, with when it becomes settleable.
	p := e.list("ws_test", "", 0)
	found := false
	for _, u := range p.Records {
		if u.Record.Key == req.Key {
			found = true
			if want := c.AttemptDeadline.Add(e.cfg.Lease); !u.SettleAfter.Round(0).Equal(want.Round(0)) {
				t.Fatalf("listed with settle after %v, want %v", u.SettleAfter, want)
			}
		}
	}
	if !found {
		t.Fatal("the record whose attempt may still run is not listed")
	}
	// The vendor answers; the owner's finalize lands.
	want := result(201, `{"id":"ch_real"}`)
	if fin := e.finalize(req, c.Token, effectspec.Accepted, want); fin.State != effectspec.Accepted {
		t.Fatalf("the owner's finalize: state %q, want accepted", fin.State)
	}
	sameResult(t, e.claimWant(req, idempotency.StatusReplay).Record.Result, want)
}

// testSettleAfterDeadline: once the attempt deadline and a lease have
// passed, the gateway gave up: the record is settleable, and the listing
// says so.
func testSettleAfterDeadline(t *testing.T, h Harness) {
	e := short(t, h)
	req := call(effectspec.BindingUnsupported)
	req.Timeout = settleRunning
	e.claimed(req)
	e.expireLease()
	contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
	e.wait(settleRunning + e.cfg.Lease + margin)
	for _, u := range e.list("ws_test", "", 0).Records {
		if u.Record.Key == req.Key && !u.SettleAfter.IsZero() {
			t.Fatalf("listed past the attempt deadline with settle after %v, want none", u.SettleAfter)
		}
	}
	s := settleReq(req, 1, effectspec.DefinitelyRejected)
	wantResolution(t, "Settle past the attempt deadline", e.settle(s), s)
	// An owner's own unknown finalize ends its attempt: settleable at once.
	own := call(effectspec.BindingUnsupported)
	e.finalize(own, e.claimed(own).Token, effectspec.Unknown, nil)
	if rec := e.lookup(own); !rec.AttemptDeadline.IsZero() {
		t.Fatalf("an unknown finalize keeps the attempt deadline %v", rec.AttemptDeadline)
	}
	s = settleReq(own, 1, effectspec.Accepted)
	wantResolution(t, "Settle of an owner's unknown", e.settle(s), s)
}

// testLeaseExpiredOtherRoute: an in-flight record whose lease lapsed, met by
// a claim that resolves elsewhere, first becomes unknown (its TTL restarts,
// as every change of an unknown record's does), then conflicts.
func testLeaseExpiredOtherRoute(t *testing.T, h Harness) {
	e := newEnvUnknown(t, h, shortLease, shortRetention, 2*shortRetention)
	req := call(effectspec.BindingUnsupported)
	req.Timeout = shortLease
	e.claimed(req)
	e.wait(e.cfg.UnknownRetention * 3 / 4)
	contender(t, e.claimWant(elsewhere(req), idempotency.StatusDestinationConflict))
	e.wait(e.cfg.UnknownRetention/2 + margin) // past the reservation's TTL, within the conversion's
	e.wantUnknown(req, 1)
	contender(t, e.claimWant(elsewhere(req), idempotency.StatusDestinationConflict))
}

// testFirstLeaseCapped: a reservation's lease, like a renewed one, ends at
// the attempt deadline at the latest.
func testFirstLeaseCapped(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	req.Timeout = time.Second // shorter than the lease
	c := e.claimed(req)
	if c.LeaseDeadline.After(c.AttemptDeadline) {
		t.Fatalf("claim: lease %v past the attempt deadline %v", c.LeaseDeadline, c.AttemptDeadline)
	}
	r, err := e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: c.Token, Timeout: time.Second})
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if r.LeaseDeadline.After(r.AttemptDeadline) {
		t.Fatalf("reserve: lease %v past the attempt deadline %v", r.LeaseDeadline, r.AttemptDeadline)
	}
}

// testRetentionTooShort: a claim or reservation whose attempt (timeout plus
// lease) could outlive the record's retention is refused, writing nothing.
func testRetentionTooShort(t *testing.T, h Harness) {
	e := newEnvUnknown(t, h, shortLease, shortRetention, 2*shortRetention)
	req := call(effectspec.BindingUnsupported)
	req.Timeout = e.cfg.UnknownRetention - e.cfg.Lease
	if _, err := e.s.Claim(e.ctx, req); !errors.Is(err, idempotency.ErrRetentionTooShort) {
		t.Fatalf("Claim with timeout %v, lease %v, unknown retention %v: %v, want ErrRetentionTooShort", req.Timeout, e.cfg.Lease, e.cfg.UnknownRetention, err)
	}
	e.absent(req)
	req.Timeout = time.Second
	c := e.claimed(req)
	e.unchanged(req, "a Reserve whose attempt outlives the record", func() {
		_, err := e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: c.Token, Timeout: e.cfg.UnknownRetention})
		if !errors.Is(err, idempotency.ErrRetentionTooShort) {
			t.Fatalf("Reserve with timeout %v: %v, want ErrRetentionTooShort", e.cfg.UnknownRetention, err)
		}
	})
}

// testIncarnationOldWorker: the record of a worker that paused past its
// end is made again by a new claim, with token 1 again. The old worker's
// renew answers not found, its reserve and finalize are stale; the new
// owner's work stands.
func testIncarnationOldWorker(t *testing.T, h Harness) {
	e := newEnvUnknown(t, h, shortLease, shortRetention, 2*shortRetention)
	req := call(effectspec.BindingHeader)
	req.Timeout = shortLease
	old := e.claimed(req)
	if old.Incarnation == "" {
		t.Fatal("a claimed answer carries no incarnation")
	}
	e.wait(e.cfg.UnknownRetention + margin)
	e.absent(req)
	fresh := e.claimed(req)
	if fresh.Incarnation == old.Incarnation {
		t.Fatalf("a record made again has the old incarnation %q", old.Incarnation)
	}
	if _, err := e.s.Renew(e.ctx, idempotency.RenewRequest{Scope: req.Scope, Key: req.Key, Token: old.Token, Incarnation: old.Incarnation}); !isNotFound(err) {
		t.Fatalf("the old worker's Renew: %v, want ErrNotFound", err)
	}
	e.stale(req, "the old worker's Reserve", func() error {
		_, err := e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: old.Token, Timeout: shortLease, Incarnation: old.Incarnation})
		return err
	})
	e.stale(req, "the old worker's Finalize", func() error {
		_, err := e.s.Finalize(e.ctx, idempotency.FinalizeRequest{Scope: req.Scope, Key: req.Key, Token: old.Token, Outcome: effectspec.Accepted,
			Result: result(201, `{"old":true}`), Incarnation: old.Incarnation})
		return err
	})
	if _, err := e.s.Renew(e.ctx, idempotency.RenewRequest{Scope: req.Scope, Key: req.Key, Token: fresh.Token, Incarnation: fresh.Incarnation}); err != nil {
		t.Fatalf("the new owner's Renew: %v", err)
	}
	want := result(201, `{"new":true}`)
	if _, err := e.s.Finalize(e.ctx, idempotency.FinalizeRequest{Scope: req.Scope, Key: req.Key, Token: fresh.Token, Outcome: effectspec.Accepted,
		Result: want, Incarnation: fresh.Incarnation}); err != nil {
		t.Fatalf("the new owner's Finalize: %v", err)
	}
	sameResult(t, e.claimWant(req, idempotency.StatusReplay).Record.Result, want)
}

// testIncarnationGiveBack: a give-back names the record's incarnation as
// its claim answered it; another incarnation is another record's, and the
// give-back is stale, even with the claim's op id and token.
func testIncarnationGiveBack(t *testing.T, h Harness) {
	e := newEnv(t, h, shortLease, shortRetention)
	req := call(effectspec.BindingUnsupported)
	req.Timeout = shortLease
	req.OpID = idempotency.NewOpID()
	c := e.claimed(req)
	gb := idempotency.GiveBackRequest{Scope: req.Scope, Key: req.Key, Token: c.Token, ClaimOpID: req.OpID,
		Incarnation: otherIncarnation(c.Incarnation), OpID: idempotency.NewOpID()}
	e.stale(req, "a give-back of another incarnation", func() error { return e.s.GiveBack(e.ctx, gb) })
	gb.Incarnation, gb.OpID = c.Incarnation, idempotency.NewOpID()
	if err := e.s.GiveBack(e.ctx, gb); err != nil {
		t.Fatalf("the give-back of the claim's own incarnation: %v", err)
	}
	if rec := e.lookup(req); rec.State != effectspec.Unknown || rec.SentAttempts != 0 {
		t.Fatalf("after the give-back: state %q, sent %d; want unknown, 0", rec.State, rec.SentAttempts)
	}
}

// otherIncarnation is a well-formed incarnation that is not inc.
func otherIncarnation(inc string) string {
	if inc == "0123456789abcdef" {
		return "fedcba9876543210"
	}
	return "0123456789abcdef"
}

// testSettleEarlierAttempt: attempt 1's lease lapses while its request
// may still be at the vendor, a claim redispatches attempt 2, and attempt
// 2 ends unknown (or is given back): a settle is refused until attempt
// 1's deadline (plus a lease) passed, though the redispatch replaced that
// deadline and attempt 2's finalize cleared its own; the listing says when.
func testSettleEarlierAttempt(t *testing.T, h Harness) {
	for _, end := range []string{"unknown", "given back"} {
		t.Run(end, func(t *testing.T) {
			e := short(t, h)
			req := call(effectspec.BindingHeader)
			req.Timeout = stillRunning
			c := e.claimed(req)
			e.expireLease()
			retry := req
			retry.OpID = idempotency.NewOpID()
			if r := e.claimWant(retry, idempotency.StatusClaimed); r.Token != 2 {
				t.Fatalf("redispatch: token %d, want 2", r.Token)
			}
			attempts := 2
			if end == "unknown" {
				e.finalize(req, 2, effectspec.Unknown, nil)
			} else {
				e.giveBack(retry, 2)
			}
			rec := e.lookup(req)
			if !rec.AttemptDeadline.IsZero() || !rec.EarlierDeadline.Equal(c.AttemptDeadline) {
				t.Fatalf("after attempt 2 ended: attempt deadline %v, earlier deadline %v; want none, %v",
					rec.AttemptDeadline, rec.EarlierDeadline, c.AttemptDeadline)
			}
			e.wantRunning(req, "Settle while attempt 1 may still run", attempts, c.AttemptDeadline)
			found := false
			for _, u := range e.list("ws_test", "", 0).Records {
				if u.Record.Key == req.Key {
					found = true
					if want := c.AttemptDeadline.Add(e.cfg.Lease); !u.SettleAfter.Round(0).Equal(want.Round(0)) {
						t.Fatalf("listed with settle after %v, want %v", u.SettleAfter, want)
					}
				}
			}
			if !found {
				t.Fatal("the unknown record is not listed")
			}
		})
	}
}
