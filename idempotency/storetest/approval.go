package storetest

import (
	"errors"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

var approvalTests = []test{
	{"ApproveThenResume", testApproveThenResume},
	{"ResumeBeforeDecision", testResumeBeforeDecision},
	{"Deny", testDeny},
	{"RepeatedDecisions", testRepeatedDecisions},
	{"TicketOfAnotherKey", testTicketOfAnotherKey},
	{"UnknownTicket", testUnknownTicket},
	{"ResumeRouteChanged", testResumeRouteChanged},
}

// hold claims req with approval required and returns the ticket.
func (e *env) hold(req idempotency.ClaimRequest) string {
	e.t.Helper()
	return e.claimWant(held(req), idempotency.StatusHeld).Ticket
}

func checkTicket(t *testing.T, tk idempotency.Ticket, id string, req idempotency.ClaimRequest, st idempotency.TicketStatus) {
	t.Helper()
	if tk.ID != id || tk.Scope != req.Scope || tk.Key != req.Key || tk.Status != st {
		t.Fatalf("ticket = %+v; want id %q, scope %+v, key %q, status %q", tk, id, req.Scope, req.Key, st)
	}
}

func testApproveThenResume(t *testing.T, h Harness) {
	e := std(t, h)
	req := held(call(effectspec.BindingHeader))
	ticket := e.hold(req)

	tk, err := e.decide(ticket, true)
	if err != nil {
		t.Fatalf("Decide approve: %v", err)
	}
	checkTicket(t, tk, ticket, req, idempotency.TicketApproved)
	if tk, err = e.s.Ticket(e.ctx, ticket); err != nil {
		t.Fatalf("Ticket: %v", err)
	}
	checkTicket(t, tk, ticket, req, idempotency.TicketApproved)
	if rec := e.lookup(req); rec.State != idempotency.StateHeld || !rec.Approved || rec.AttemptCount != 0 {
		t.Fatalf("approved record before resume: state %q, approved %v, attempts %d; want held, true, 0", rec.State, rec.Approved, rec.AttemptCount)
	}

	// Approval alone dispatches nothing: only the claim that presents the
	// ticket does.
	e.unchanged(req, "claims without the ticket", func() {
		r := e.claimWant(req, idempotency.StatusHeld)
		if r.Ticket != ticket {
			t.Fatalf("held: ticket %q, want %q", r.Ticket, ticket)
		}
		contender(t, r)
		wrong := req
		wrong.Ticket = idempotency.NewTicketID()
		r = e.claim(wrong)
		if r.Status == idempotency.StatusClaimed || r.Token != 0 {
			t.Fatalf("a claim presenting another ticket: status %q, token %d; want no reservation", r.Status, r.Token)
		}
	})

	resume := req
	resume.Ticket = ticket
	r := e.claimed(resume)
	if r.LeaseDeadline.IsZero() || r.Ticket != "" && r.Ticket != ticket {
		t.Fatalf("resumed claim: lease %v, ticket %q", r.LeaseDeadline, r.Ticket)
	}
	if rec := e.lookup(req); rec.State != idempotency.StateInFlight || rec.AttemptCount != 1 || !rec.Approved || rec.Ticket != ticket {
		t.Fatalf("after resume: state %q, attempts %d, approved %v, ticket %q; want in_flight, 1, true, %q",
			rec.State, rec.AttemptCount, rec.Approved, rec.Ticket, ticket)
	}
	// The ticket opens one slot, once.
	e.unchanged(req, "a second resume", func() {
		contender(t, e.claimWant(resume, idempotency.StatusInProgress))
		contender(t, e.claimWant(req, idempotency.StatusInProgress))
	})
	res := result(201, `{"id":"ch_1"}`)
	e.finalize(req, 1, idempotency.StateAccepted, res)
	if r := e.claimWant(resume, idempotency.StatusReplay); r.Record == nil {
		t.Fatal("replay without record")
	} else {
		sameResult(t, r.Record.Result, res)
	}
}

func testResumeBeforeDecision(t *testing.T, h Harness) {
	e := std(t, h)
	req := held(call(effectspec.BindingHeader))
	ticket := e.hold(req)
	resume := req
	resume.Ticket = ticket
	e.unchanged(req, "a resume before approval", func() {
		r := e.claimWant(resume, idempotency.StatusHeld)
		if r.Ticket != ticket || r.Token != 0 || !r.LeaseDeadline.IsZero() {
			t.Fatalf("resume before approval: ticket %q token %d lease %v", r.Ticket, r.Token, r.LeaseDeadline)
		}
	})
}

func testDeny(t *testing.T, h Harness) {
	e := std(t, h)
	req := held(call(effectspec.BindingHeader))
	ticket := e.hold(req)
	tk, err := e.decide(ticket, false)
	if err != nil {
		t.Fatalf("Decide deny: %v", err)
	}
	checkTicket(t, tk, ticket, req, idempotency.TicketDenied)
	if rec := e.lookup(req); rec.State != idempotency.StateDenied || rec.Approved || rec.AttemptCount != 0 {
		t.Fatalf("denied record: state %q, approved %v, attempts %d", rec.State, rec.Approved, rec.AttemptCount)
	}
	resume := req
	resume.Ticket = ticket
	e.unchanged(req, "claims of a denied record", func() {
		contender(t, e.claimWant(req, idempotency.StatusDenied))
		contender(t, e.claimWant(resume, idempotency.StatusDenied))
	})
	if tk, err = e.s.Ticket(e.ctx, ticket); err != nil {
		t.Fatalf("Ticket: %v", err)
	}
	checkTicket(t, tk, ticket, req, idempotency.TicketDenied)
}

func testRepeatedDecisions(t *testing.T, h Harness) {
	e := std(t, h)
	for _, first := range []bool{true, false} {
		req := held(call(effectspec.BindingHeader))
		ticket := e.hold(req)
		want := idempotency.TicketDenied
		if first {
			want = idempotency.TicketApproved
		}
		if _, err := e.decide(ticket, first); err != nil {
			t.Fatalf("Decide(%v): %v", first, err)
		}
		e.unchanged(req, "repeated and contradicting decisions", func() {
			tk, err := e.decide(ticket, first)
			if err != nil {
				t.Fatalf("repeating Decide(%v): %v; the first decision is final and repeating it answers the ticket", first, err)
			}
			checkTicket(t, tk, ticket, req, want)
			_, err = e.decide(ticket, !first)
			if !errors.Is(err, idempotency.ErrDenied) && !errors.Is(err, idempotency.ErrStale) {
				t.Fatalf("contradicting Decide(%v) after Decide(%v): %v; want ErrDenied or ErrStale", !first, first, err)
			}
		})
		tk, err := e.s.Ticket(e.ctx, ticket)
		if err != nil {
			t.Fatalf("Ticket: %v", err)
		}
		checkTicket(t, tk, ticket, req, want)
	}
}

// testTicketOfAnotherKey: a ticket opens only its own record. Presented with
// another key, it neither reserves an attempt nor moves either record.
func testTicketOfAnotherKey(t *testing.T, h Harness) {
	e := std(t, h)
	a := held(call(effectspec.BindingHeader))
	ticketA := e.hold(a)
	if _, err := e.decide(ticketA, true); err != nil {
		t.Fatalf("Decide: %v", err)
	}

	// Another held record: it stays held.
	c := held(call(effectspec.BindingHeader))
	e.hold(c)
	withA := c
	withA.Ticket = ticketA
	e.unchanged(a, "presenting A's ticket for C (record A)", func() {
		e.unchanged(c, "presenting A's ticket for C", func() {
			r := e.claim(withA)
			if r.Status != idempotency.StatusHeld || r.Token != 0 {
				t.Fatalf("C with A's ticket: status %q, token %d; want held, no reservation", r.Status, r.Token)
			}
		})
	})

	// A key without a record: no slot is opened with a borrowed approval.
	b := held(call(effectspec.BindingHeader))
	b.Ticket = ticketA
	e.unchanged(a, "presenting A's ticket for a new key (record A)", func() {
		r, err := e.s.Claim(e.ctx, b)
		if err == nil && (r.Status == idempotency.StatusClaimed || r.Token != 0) {
			t.Fatalf("new key with A's ticket: status %q, token %d; an approval of another key must not reserve an attempt", r.Status, r.Token)
		}
	})
	if rec, err := e.s.Lookup(e.ctx, b.Scope, b.Key); err == nil && (rec.State != idempotency.StateHeld || rec.AttemptCount != 0 || rec.Approved) {
		t.Fatalf("new key with A's ticket left a record in state %q, attempts %d, approved %v", rec.State, rec.AttemptCount, rec.Approved)
	}
}

func testUnknownTicket(t *testing.T, h Harness) {
	e := std(t, h)
	id := idempotency.NewTicketID()
	if _, err := e.decide(id, true); !isNotFound(err) {
		t.Fatalf("Decide of an unknown ticket: %v, want ErrNotFound", err)
	}
	if _, err := e.s.Ticket(e.ctx, id); !isNotFound(err) {
		t.Fatalf("Ticket after deciding an unknown ticket: %v, want ErrNotFound (nothing written)", err)
	}
}

// testResumeRouteChanged: resuming an approved call dispatches, so a route
// or binding that changed since the hold is destination_conflict, and the
// approved record stays as it was.
func testResumeRouteChanged(t *testing.T, h Harness) {
	e := std(t, h)
	req := held(call(effectspec.BindingHeader))
	ticket := e.hold(req)
	if _, err := e.decide(ticket, true); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	req.Ticket = ticket
	e.unchanged(req, "a resume resolved elsewhere", func() {
		for what, other := range moved(req) {
			if r := e.claim(other); r.Status != idempotency.StatusDestinationConflict {
				t.Fatalf("resume, %s: %q, want destination_conflict", what, r.Status)
			} else {
				contender(t, r)
			}
		}
	})
	e.claimed(req)
}
