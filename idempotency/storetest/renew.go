package storetest

import (
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// renewTests: Renew is a compare-and-set on state in_progress, the current
// token and a live lease; it extends the lease up to the attempt deadline.
var renewTests = []test{
	{"Extends", testRenewExtends},
	{"AttemptDeadline", testRenewAttemptDeadline},
	{"NeverRevives", testRenewNeverRevives},
	{"StaleToken", testRenewStaleToken},
	{"Resend", testRenewResend},
	{"Reserve", testRenewReserve},
}

// renewLease is long enough that a loaded machine's pauses between steps do
// not let a lease lapse on wall time: a 1 s lease lapsed under a load of 5
// runnable threads per core. Each test leaves at least 0.45 of it between a
// wait and the step that must come before the lease lapses.
const renewLease = 2 * time.Second

func (e *env) renew(req idempotency.ClaimRequest, token int) (time.Time, error) {
	return e.s.Renew(e.ctx, idempotency.RenewRequest{Scope: req.Scope, Key: req.Key, Token: token})
}

func testRenewExtends(t *testing.T, h Harness) {
	e := newEnv(t, h, renewLease, longRetention)
	req := call(effectspec.BindingHeader)
	c := e.claimed(req)
	// Both waits are past half a lease, so together they pass the first
	// lease; each leaves 0.45 of a lease for the step after it.
	e.wait(renewLease * 11 / 20)
	l, err := e.renew(req, 1)
	if err != nil {
		t.Fatalf("Renew(1): %v", err)
	}
	if !l.After(c.LeaseDeadline) || l.After(c.AttemptDeadline) {
		t.Fatalf("renewed lease %v; want after the first lease %v and not after the attempt deadline %v", l, c.LeaseDeadline, c.AttemptDeadline)
	}
	rec := e.lookup(req)
	if rec.State != effectspec.InProgress || !rec.LeaseDeadline.Equal(l) || rec.AttemptCount != 1 || !rec.AttemptDeadline.Equal(c.AttemptDeadline) {
		t.Fatalf("after Renew: state %q, lease %v, attempts %d, attempt deadline %v; want in_progress, %v, 1, %v",
			rec.State, rec.LeaseDeadline, rec.AttemptCount, rec.AttemptDeadline, l, c.AttemptDeadline)
	}
	// A renewed lease keeps the slot: past the first lease, it is still in
	// progress, and the owner's finalize applies.
	e.wait(renewLease * 11 / 20)
	contender(t, e.claimWant(req, idempotency.StatusInProgress))
	e.finalize(req, 1, effectspec.Accepted, result(201, `{}`))
}

// testRenewAttemptDeadline: a renewal never moves the lease past the attempt
// deadline, and once the lease reaches it no renewal helps.
func testRenewAttemptDeadline(t *testing.T, h Harness) {
	e := newEnv(t, h, renewLease, longRetention)
	req := call(effectspec.BindingUnsupported)
	req.Timeout = renewLease * 11 / 10
	c := e.claimed(req)
	e.wait(renewLease / 5) // now + lease is past the attempt deadline
	l, err := e.renew(req, 1)
	if err != nil {
		t.Fatalf("Renew(1): %v", err)
	}
	if !l.Equal(c.AttemptDeadline) {
		t.Fatalf("renewed lease %v; want it capped at the attempt deadline %v", l, c.AttemptDeadline)
	}
	if again, err := e.renew(req, 1); err != nil || !again.Equal(c.AttemptDeadline) {
		t.Fatalf("Renew at the cap = %v, %v; want %v", again, err, c.AttemptDeadline)
	}
	e.wait(renewLease + margin) // past the attempt deadline
	e.stale(req, "Renew past the attempt deadline", func() error { _, err := e.renew(req, 1); return err })
	e.wantUnknown(req, 1)
}

// testRenewNeverRevives: a lapsed lease stays lapsed; the record reads
// unknown and the slot can be taken over.
func testRenewNeverRevives(t *testing.T, h Harness) {
	e := newEnv(t, h, renewLease, longRetention)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	rr := idempotency.RenewRequest{Scope: req.Scope, Key: req.Key, Token: 1, OpID: idempotency.NewOpID()}
	if _, err := e.s.Renew(e.ctx, rr); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	e.expireLease()
	e.stale(req, "Renew of a lapsed lease", func() error { _, err := e.renew(req, 1); return err })
	e.stale(req, "a re-sent Renew after the lease lapsed", func() error { _, err := e.s.Renew(e.ctx, rr); return err })
	e.wantUnknown(req, 1)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("takeover after a refused renewal: token %d, want 2", r.Token)
	}
}

func testRenewStaleToken(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	for _, tok := range []int{2, 9} {
		e.stale(req, "Renew with a token never issued", func() error { _, err := e.renew(req, tok); return err })
	}
	e.unchanged(req, "Renew(0)", func() {
		if _, err := e.renew(req, 0); err == nil {
			t.Fatal("Renew(0) succeeded")
		}
	})
	if _, err := e.reserve(req, 1); err != nil {
		t.Fatalf("Reserve(1): %v", err)
	}
	e.stale(req, "Renew with the superseded token 1", func() error { _, err := e.renew(req, 1); return err })
	e.finalize(req, 2, effectspec.Accepted, result(201, `{}`))
	e.stale(req, "Renew of a final record", func() error { _, err := e.renew(req, 2); return err })
	held := held(call(effectspec.BindingHeader))
	e.hold(held)
	e.unchanged(held, "Renew of a held record", func() {
		if _, err := e.renew(held, 1); err == nil {
			t.Fatal("Renew of a held record succeeded")
		}
	})
	missing := call(effectspec.BindingHeader)
	if _, err := e.renew(missing, 1); err == nil {
		t.Fatal("Renew of a missing record succeeded")
	}
	e.absent(missing)
}

func testRenewResend(t *testing.T, h Harness) {
	e := newEnv(t, h, renewLease, longRetention)
	req := call(effectspec.BindingHeader)
	req.OpID = idempotency.NewOpID()
	first := e.claimed(req)
	e.wait(renewLease * 3 / 10)
	rr := idempotency.RenewRequest{Scope: req.Scope, Key: req.Key, Token: 1, OpID: idempotency.NewOpID()}
	l, err := e.s.Renew(e.ctx, rr)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	e.wait(renewLease * 3 / 10)
	e.unchanged(req, "a re-sent renewal", func() {
		again, err := e.s.Renew(e.ctx, rr)
		if err != nil || !again.Equal(l) {
			t.Fatalf("re-sent Renew = %v, %v; want the first answer %v", again, err, l)
		}
	})
	// A renewal never hides a re-sent claim.
	again := e.claim(req)
	if !again.AlreadyApplied || again.Token != first.Token {
		t.Fatalf("re-sent claim after a renewal: %q token %d applied %v; want the original token %d, already applied",
			again.Status, again.Token, again.AlreadyApplied, first.Token)
	}
}

// testRenewReserve: a reservation stores its own attempt deadline, which
// bounds the renewals of that attempt. The renewal must come after the
// attempt deadline minus a lease (so the deadline binds) and before the
// lease lapses: a timeout of 1.1 leases and a renewal after 0.2 of one leave
// 0.8 of a lease for a loaded machine's pauses.
func testRenewReserve(t *testing.T, h Harness) {
	const reserveTimeout = renewLease * 11 / 10
	e := newEnv(t, h, renewLease, longRetention)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	res, err := e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: 1, Timeout: reserveTimeout})
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	rec := e.lookup(req)
	if d := res.AttemptDeadline.Sub(rec.UpdatedAt); res.AttemptDeadline.IsZero() || d < reserveTimeout-time.Millisecond || d > reserveTimeout+time.Second {
		t.Fatalf("reservation attempt deadline %v, %v after the reservation; want its timeout %v", res.AttemptDeadline, d, reserveTimeout)
	}
	if !rec.AttemptDeadline.Equal(res.AttemptDeadline) || rec.SentAttempts != 2 {
		t.Fatalf("record attempt deadline %v, sent %d; want %v, 2", rec.AttemptDeadline, rec.SentAttempts, res.AttemptDeadline)
	}
	e.wait(renewLease / 5)
	if l, err := e.renew(req, 2); err != nil || !l.Equal(res.AttemptDeadline) {
		t.Fatalf("Renew(2) = %v, %v; want the attempt deadline %v", l, err, res.AttemptDeadline)
	}
}
