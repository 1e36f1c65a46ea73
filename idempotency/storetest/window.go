package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// windowTests: a vendor deduplicates on a key only for its window
// (ClaimRequest.VendorWindow), so a slot whose first attempt that may have left
// is older is never sent again (docs/DESIGN.md, "The record and its
// lifecycle").
var windowTests = []test{
	{"Expired", testWindowExpired},
	{"FromResume", testWindowFromResume},
	{"NeverSent", testWindowNeverSent},
	{"Invalid", testWindowInvalid},
}

// testWindow is the window of these tests: short, but well above the short
// lease, which the new attempt's lease must end inside.
const testWindow = 3 * time.Second

func windowed(b effectspec.BindingKind) idempotency.ClaimRequest {
	req := call(b)
	req.VendorWindow = testWindow
	return req
}

// testWindowExpired: inside the window an unknown call is redispatched with
// the same vendor key; once a new attempt's lease would end outside it, the
// claim answers outcome_unknown and reserves nothing, approval or not.
func testWindowExpired(t *testing.T, h Harness) {
	for _, b := range []effectspec.BindingKind{effectspec.BindingHeader, effectspec.BindingBodyPointer} {
		t.Run(string(b), func(t *testing.T) {
			e := short(t, h)
			req := windowed(b)
			e.claimed(req)
			e.finalize(req, 1, effectspec.Unknown, nil)
			if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 {
				t.Fatalf("redispatch inside the window: token %d, want 2", r.Token)
			}
			e.finalize(req, 2, effectspec.Unknown, nil)
			// The window is measured from the first attempt, and the new
			// attempt's lease would end after it.
			e.wait(testWindow - e.cfg.Lease/2)
			e.unchanged(req, "claims after the vendor's window", func() {
				contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
				contender(t, e.claimWant(held(req), idempotency.StatusOutcomeUnknown))
			})
			if rec := e.lookup(req); rec.State != effectspec.Unknown || rec.AttemptCount != 2 {
				t.Fatalf("after the window: state %q, attempts %d; want unknown, 2", rec.State, rec.AttemptCount)
			}
		})
	}
	// An in-flight record whose lease lapsed after the window turns unknown
	// and is not sent again either.
	e := short(t, h)
	req := windowed(effectspec.BindingHeader)
	e.claimed(req)
	e.wait(testWindow)
	contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
	if rec := e.lookup(req); rec.State != effectspec.Unknown || rec.AttemptCount != 1 {
		t.Fatalf("lapsed lease after the window: state %q, attempts %d; want unknown, 1", rec.State, rec.AttemptCount)
	}
}

// testWindowFromResume: a held call's first attempt is its resume, not its
// hold: the window starts there.
func testWindowFromResume(t *testing.T, h Harness) {
	e := short(t, h)
	req := held(windowed(effectspec.BindingHeader))
	ticket := e.hold(req)
	e.wait(testWindow)
	if _, err := e.decide(ticket, true); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	req.Ticket = ticket
	e.claimed(req)
	e.finalize(req, 1, effectspec.Unknown, nil)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("redispatch inside the window from the resume: token %d, want 2", r.Token)
	}
}

// testWindowNeverSent: a slot none of whose attempts may have left is not
// bound by the window (the vendor never saw the key); its window starts at
// the first attempt that may leave.
func testWindowNeverSent(t *testing.T, h Harness) {
	e := short(t, h)
	req := windowed(effectspec.BindingBodyPointer)
	e.claimed(req)
	e.neverSent(req, 1)
	e.wait(testWindow)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("claim of a slot that sent nothing, after the window: token %d, want 2", r.Token)
	}
	e.finalize(req, 2, effectspec.Unknown, nil)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 3 {
		t.Fatalf("redispatch inside the window of the first attempt that may have left: token %d, want 3", r.Token)
	}
}

// testWindowInvalid: a negative window is an error that writes nothing.
func testWindowInvalid(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	req.VendorWindow = -time.Second
	if _, err := e.s.Claim(e.ctx, req); !errors.Is(err, idempotency.ErrInvalidRequest) {
		t.Fatalf("Claim with a negative window: %v, want ErrInvalidRequest", err)
	}
	e.absent(req)
}
