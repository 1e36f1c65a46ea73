package storetest

import (
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// leaseTests: an in-flight record whose lease ran out reads as unknown, and
// the state table's unknown row applies to it.
var leaseTests = []test{
	{"ExpiredVendorBinding", testLeaseExpiredVendorBinding},
	{"ExpiredUnsupported", testLeaseExpiredUnsupported},
	{"ExpiredReserveStale", testLeaseExpiredReserve},
	{"SlowWorkerTakenOver", testSlowWorkerTakenOver},
	{"FinalizeAfterExpiryPath", testFinalizeAfterExpiryPath},
	{"ExpiredOtherRoute", testLeaseExpiredOtherRoute},
	{"FirstLeaseCapped", testFirstLeaseCapped},
}

// retentionTests: records live Retention after their last change.
var retentionTests = []test{
	{"FinalizedExpires", testRetentionFinalized},
	{"FromLastChange", testRetentionFromLastChange},
	{"ReservationKeepsUnknown", testRetentionReservation},
	{"UnknownOutlivesRetention", testRetentionUnknown},
	{"TooShort", testRetentionTooShort},
}

func short(t *testing.T, h Harness) *env { t.Helper(); return newEnv(t, h, shortLease, longRetention) }

func (e *env) expireLease() { e.wait(e.cfg.Lease + margin) }

func (e *env) wantUnknown(req idempotency.ClaimRequest, attempts int) {
	e.t.Helper()
	if rec := e.lookup(req); rec.State != effectspec.Unknown || rec.AttemptCount != attempts {
		e.t.Fatalf("Lookup after the lease: state %q, attempts %d; want unknown, %d", rec.State, rec.AttemptCount, attempts)
	}
}

func testLeaseExpiredVendorBinding(t *testing.T, h Harness) {
	e := short(t, h)
	req := call(effectspec.BindingBodyPointer)
	first := e.claimed(req)
	e.expireLease()
	e.wantUnknown(req, 1)
	r := e.claimWant(req, idempotency.StatusClaimed)
	if r.Token != 2 || !r.LeaseDeadline.After(first.LeaseDeadline) {
		t.Fatalf("claim after the lease: token %d, lease %v (first lease %v); want token 2 with a new lease", r.Token, r.LeaseDeadline, first.LeaseDeadline)
	}
	if rec := e.lookup(req); rec.State != effectspec.InProgress || rec.AttemptCount != 2 {
		t.Fatalf("after re-claim: state %q, attempts %d; want in_progress, 2", rec.State, rec.AttemptCount)
	}
}

func testLeaseExpiredUnsupported(t *testing.T, h Harness) {
	e := short(t, h)
	req := call(effectspec.BindingUnsupported)
	e.claimed(req)
	e.expireLease()
	e.wantUnknown(req, 1)
	for range 2 {
		contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
	}
	e.wantUnknown(req, 1)
}

// testLeaseExpiredReserve: a worker past its lease may not reserve another
// attempt: the record is unknown, not in flight.
func testLeaseExpiredReserve(t *testing.T, h Harness) {
	e := short(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	e.expireLease()
	e.stale(req, "Reserve after the lease", func() error { return e.reserveErr(req, 1) })
	e.wantUnknown(req, 1)
}

// testSlowWorkerTakenOver: a worker whose lease expired and whose slot was
// taken over cannot finalize; the new owner's outcome is the one kept.
func testSlowWorkerTakenOver(t *testing.T, h Harness) {
	e := short(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	e.expireLease()
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("takeover: token %d, want 2", r.Token)
	}
	e.stale(req, "the slow worker's Finalize", func() error { return e.finalizeErr(req, 1, effectspec.Accepted) })
	e.stale(req, "the slow worker's Reserve", func() error { return e.reserveErr(req, 1) })
	want := result(201, `{"id":"ch_new_owner"}`)
	e.finalize(req, 2, effectspec.Accepted, want)
	r := e.claimWant(req, idempotency.StatusReplay)
	if r.Record == nil {
		t.Fatal("replay without record")
	}
	sameResult(t, r.Record.Result, want)
}

func testRetentionFinalized(t *testing.T, h Harness) {
	e := newEnv(t, h, shortLease, shortRetention)
	req := call(effectspec.BindingHeader)
	req.Timeout = time.Second // within the short retention
	e.claimed(req)
	e.finalize(req, 1, effectspec.Accepted, result(201, `{}`))
	e.wait(e.cfg.Retention + margin)
	e.absent(req)
	// The key is free again: a new cycle from attempt 1.
	e.claimed(req)
}

// testRetentionFromLastChange: a change (here an approval) restarts the
// retention of the record and of its ticket.
// Each step passes half the retention, so two pass it; each leaves 0.45 of
// it (1.8 s) for a loaded machine's pauses before the step after it.
func testRetentionFromLastChange(t *testing.T, h Harness) {
	e := newEnv(t, h, shortLease, 2*shortRetention)
	req := held(call(effectspec.BindingHeader))
	req.Timeout = time.Second // within the short retention
	ticket := e.hold(req)
	step := e.cfg.Retention * 11 / 20
	e.wait(step)
	if _, err := e.decide(ticket, true); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	e.wait(step) // past Retention since creation, within it since the approval
	if rec := e.lookup(req); rec.State != effectspec.Held || !rec.Approved {
		t.Fatalf("after approval: state %q, approved %v", rec.State, rec.Approved)
	}
	if _, err := e.s.Ticket(e.ctx, ticket); err != nil {
		t.Fatalf("Ticket %v after the approval, before the record expires: %v", step, err)
	}
	e.wait(step + margin)
	e.absent(req)
	if _, err := e.s.Ticket(e.ctx, ticket); !isNotFound(err) {
		t.Fatalf("Ticket after the record expired: %v, want ErrNotFound", err)
	}
}

// testFinalizeAfterExpiryPath: the lease-expiry path turned the record
// unknown without a new token (an unsupported binding's claim answered
// outcome_unknown); the owner's finalize still applies, since it holds the
// answer. Over a final record it never does.
func testFinalizeAfterExpiryPath(t *testing.T, h Harness) {
	e := short(t, h)
	req := call(effectspec.BindingUnsupported)
	e.claimed(req)
	e.expireLease()
	contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
	e.wantUnknown(req, 1)
	want := result(201, `{"id":"ch_late"}`)
	if fin := e.finalize(req, 1, effectspec.Accepted, want); fin.State != effectspec.Accepted {
		t.Fatalf("owner's finalize after the expiry path: state %q, want accepted", fin.State)
	}
	r := e.claimWant(req, idempotency.StatusReplay)
	sameResult(t, r.Record.Result, want)
	e.stale(req, "a second finalize over the final record", func() error { return e.finalizeErr(req, 1, effectspec.Unknown) })
}

// testRetentionReservation: a reservation keeps its record for
// UnknownRetention, so a gateway that dies mid-call leaves a record that
// lives as long as an unknown one.
func testRetentionReservation(t *testing.T, h Harness) {
	e := newEnvUnknown(t, h, shortLease, shortRetention, 2*shortRetention)
	req := call(effectspec.BindingUnsupported)
	req.Timeout = time.Second // within the short retention
	e.claimed(req)
	e.wait(e.cfg.Retention + margin)
	e.wantUnknown(req, 1)
	contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
}

// testRetentionUnknown: an unknown outcome keeps UnknownRetention, a final
// one Retention.
func testRetentionUnknown(t *testing.T, h Harness) {
	e := newEnvUnknown(t, h, shortLease, shortRetention, 2*shortRetention)
	unknown := call(effectspec.BindingUnsupported)
	unknown.Timeout = time.Second
	e.claimed(unknown)
	final := call(effectspec.BindingUnsupported)
	final.Timeout = time.Second
	e.claimed(final)
	e.finalize(unknown, 1, effectspec.Unknown, nil)
	e.finalize(final, 1, effectspec.Accepted, result(201, `{}`))
	e.wait(e.cfg.Retention + margin)
	e.absent(final)
	e.wantUnknown(unknown, 1)
	e.wait(e.cfg.UnknownRetention - e.cfg.Retention)
	e.absent(unknown)
}
