package storetest

import (
	"errors"
	"slices"
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
	{"RedispatchHeld", testRedispatchHeld},
	{"RedispatchDenied", testRedispatchDenied},
	{"RedispatchRowsStillApply", testRedispatchRows},
	{"RedispatchHoldKeepsTTL", testRedispatchHoldKeepsTTL},
	{"RedispatchApprovalDropped", testRedispatchApprovalDropped},
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
	if rec := e.lookup(req); rec.State != effectspec.Held || !rec.Approved || rec.AttemptCount != 0 {
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
	if rec := e.lookup(req); rec.State != effectspec.InProgress || rec.AttemptCount != 1 || !rec.Approved || rec.Ticket != ticket {
		t.Fatalf("after resume: state %q, attempts %d, approved %v, ticket %q; want in_progress, 1, true, %q",
			rec.State, rec.AttemptCount, rec.Approved, rec.Ticket, ticket)
	}
	// The ticket opens one slot, once.
	e.unchanged(req, "a second resume", func() {
		contender(t, e.claimWant(resume, idempotency.StatusInProgress))
		contender(t, e.claimWant(req, idempotency.StatusInProgress))
	})
	res := result(201, `{"id":"ch_1"}`)
	e.finalize(req, 1, effectspec.Accepted, res)
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
	if rec := e.lookup(req); rec.State != effectspec.Denied || rec.Approved || rec.AttemptCount != 0 {
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
	if rec, err := e.s.Lookup(e.ctx, b.Scope, b.Key); err == nil && (rec.State != effectspec.Held || rec.AttemptCount != 0 || rec.Approved) {
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

// redispatchable are the ways a record comes to be dispatched again: an
// unknown call with a vendor binding, one whose lease lapsed, a slot whose
// attempt provably never left (even with no binding). Each returns the
// request (approval not required) and the token of its last attempt.
var redispatchable = []struct {
	name string
	make func(e *env) (idempotency.ClaimRequest, int)
}{
	{"unknown", func(e *env) (idempotency.ClaimRequest, int) {
		req := call(effectspec.BindingHeader)
		e.claimed(req)
		e.finalize(req, 1, effectspec.Unknown, nil)
		return req, 1
	}},
	{"lease lapsed", func(e *env) (idempotency.ClaimRequest, int) {
		req := call(effectspec.BindingBodyPointer)
		e.claimed(req)
		e.expireLease()
		return req, 1
	}},
	{"never sent", func(e *env) (idempotency.ClaimRequest, int) {
		req := call(effectspec.BindingUnsupported)
		e.claimed(req)
		e.neverSent(req, 1)
		return req, 1
	}},
}

// rehold claims req with approval required and checks that the record was
// held again: a ticket, no reservation, and the record as it was but for
// the ticket.
func (e *env) rehold(req idempotency.ClaimRequest) string {
	e.t.Helper()
	before := e.lookup(req)
	r := e.claimWant(held(req), idempotency.StatusHeld)
	contender(e.t, r)
	if !idempotency.ValidTicketID(r.Ticket) {
		e.t.Fatalf("re-hold: ticket %q", r.Ticket)
	}
	after := e.lookup(req)
	if after.Ticket != r.Ticket || after.Approved || after.ApprovalDenied {
		e.t.Fatalf("re-held record: ticket %q (answered %q), approved %v, denied %v", after.Ticket, r.Ticket, after.Approved, after.ApprovalDenied)
	}
	after.Ticket = before.Ticket
	if d := diffRecords(before, after); d != "" {
		e.t.Fatalf("a re-hold changed more than the ticket: %s", d)
	}
	// Holding again answers the same ticket and changes nothing.
	e.unchanged(req, "a second held claim", func() {
		if again := e.claimWant(held(req), idempotency.StatusHeld); again.Ticket != r.Ticket {
			e.t.Fatalf("second re-hold: ticket %q, want %q", again.Ticket, r.Ticket)
		}
	})
	tk, err := e.s.Ticket(e.ctx, r.Ticket)
	if err != nil {
		e.t.Fatalf("Ticket of a re-held record: %v", err)
	}
	checkTicket(e.t, tk, r.Ticket, req, idempotency.TicketPending)
	return r.Ticket
}

// testRedispatchHeld: a claim that would dispatch an existing record again,
// for a tool that now requires approval, needs the slot's approval; without
// it the record is held again, keeping its state. An approval covers every
// later redispatch of the slot.
func testRedispatchHeld(t *testing.T, h Harness) {
	for _, c := range redispatchable {
		t.Run(c.name, func(t *testing.T) {
			e := short(t, h)
			req, token := c.make(e)
			ticket := e.rehold(req)
			if rec := e.lookup(req); rec.State != effectspec.Unknown {
				t.Fatalf("re-held record: state %q, want unknown", rec.State)
			}
			if c.name == "unknown" && !slices.Contains(e.listAll(req.Scope.Workspace, 100), req.Key.String()) {
				t.Fatal("a re-held unknown record left the unknown listing")
			}
			tk, err := e.decide(ticket, true)
			if err != nil {
				t.Fatalf("Decide approve: %v", err)
			}
			checkTicket(t, tk, ticket, req, idempotency.TicketApproved)
			rec := e.lookup(req)
			if rec.State != effectspec.Unknown || !rec.Approved || rec.AttemptCount != token {
				t.Fatalf("approved re-held record: state %q, approved %v, attempts %d; want unknown, true, %d", rec.State, rec.Approved, rec.AttemptCount, token)
			}
			// The approval is the slot's: the claim dispatches with or
			// without the ticket, and the next redispatch holds nothing.
			r := e.claimWant(held(req), idempotency.StatusClaimed)
			if r.Token != token+1 {
				t.Fatalf("claim after approval: token %d, want %d", r.Token, token+1)
			}
			e.neverSent(req, r.Token)
			resume := held(req)
			resume.Ticket = ticket
			if r := e.claimWant(resume, idempotency.StatusClaimed); r.Token != token+2 {
				t.Fatalf("second redispatch after approval: token %d, want %d", r.Token, token+2)
			}
		})
	}
}

// testRedispatchDenied: denying a re-held record leaves its state (an
// unknown call's effect may have happened), but the denial stands: every
// claim that would dispatch it answers denied, whatever the tool requires.
func testRedispatchDenied(t *testing.T, h Harness) {
	for _, c := range redispatchable {
		t.Run(c.name, func(t *testing.T) {
			e := short(t, h)
			req, token := c.make(e)
			ticket := e.rehold(req)
			tk, err := e.decide(ticket, false)
			if err != nil {
				t.Fatalf("Decide deny: %v", err)
			}
			checkTicket(t, tk, ticket, req, idempotency.TicketDenied)
			rec := e.lookup(req)
			if rec.State != effectspec.Unknown || !rec.ApprovalDenied || rec.Approved || rec.AttemptCount != token {
				t.Fatalf("denied re-held record: state %q, denied %v, approved %v, attempts %d; want unknown, true, false, %d",
					rec.State, rec.ApprovalDenied, rec.Approved, rec.AttemptCount, token)
			}
			if c.name == "unknown" && !slices.Contains(e.listAll(req.Scope.Workspace, 100), req.Key.String()) {
				t.Fatal("a denied unknown record left the unknown listing")
			}
			e.unchanged(req, "claims of a denied re-held record", func() {
				contender(t, e.claimWant(held(req), idempotency.StatusDenied))
				contender(t, e.claimWant(req, idempotency.StatusDenied))
				if _, err := e.decide(ticket, true); !errors.Is(err, idempotency.ErrDenied) {
					t.Fatalf("approving a denied ticket: %v, want ErrDenied", err)
				}
			})
			if tk, err = e.s.Ticket(e.ctx, ticket); err != nil {
				t.Fatalf("Ticket: %v", err)
			}
			checkTicket(t, tk, ticket, req, idempotency.TicketDenied)
		})
	}
}

// testRedispatchRows: approval is asked only where a claim would dispatch.
// An unsupported call whose attempt may have left is outcome_unknown, a
// route that changed is destination_conflict, a live lease in_progress,
// with approval required or not.
func testRedispatchRows(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingUnsupported)
	e.claimed(req)
	e.unchanged(req, "an approval-required claim of a running call", func() {
		contender(t, e.claimWant(held(req), idempotency.StatusInProgress))
	})
	e.finalize(req, 1, effectspec.Unknown, nil)
	e.unchanged(req, "an approval-required claim of an unknown unsupported call", func() {
		contender(t, e.claimWant(held(req), idempotency.StatusOutcomeUnknown))
	})
	vb := call(effectspec.BindingHeader)
	e.claimed(vb)
	e.finalize(vb, 1, effectspec.Unknown, nil)
	e.unchanged(vb, "an approval-required claim resolved elsewhere", func() {
		for what, other := range moved(vb) {
			if r := e.claim(held(other)); r.Status != idempotency.StatusDestinationConflict {
				t.Fatalf("%s: %q, want destination_conflict", what, r.Status)
			}
		}
	})
	// Once approved, the rows decide: an unsupported slot that sent
	// nothing is claimed again; once its attempt may have left, it is
	// outcome_unknown, approved or not.
	ns := call(effectspec.BindingUnsupported)
	e.claimed(ns)
	e.neverSent(ns, 1)
	ticket := e.rehold(ns)
	if _, err := e.decide(ticket, true); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	r := e.claimWant(held(ns), idempotency.StatusClaimed)
	e.finalize(ns, r.Token, effectspec.Unknown, nil)
	e.unchanged(ns, "a claim of an approved unsupported call that may have left", func() {
		contender(t, e.claimWant(held(ns), idempotency.StatusOutcomeUnknown))
	})
}

// testRedispatchHoldKeepsTTL: a re-hold and its decision keep the record's
// TTL: an unknown record outlives the (shorter) retention of a held one.
func testRedispatchHoldKeepsTTL(t *testing.T, h Harness) {
	e := newEnvUnknown(t, h, shortLease, shortRetention, 4*shortRetention)
	for _, approve := range []bool{true, false} {
		req := call(effectspec.BindingHeader)
		req.Timeout = shortLease // within the unknown retention
		e.claimed(req)
		e.finalize(req, 1, effectspec.Unknown, nil)
		ticket := e.rehold(req)
		if _, err := e.decide(ticket, approve); err != nil {
			t.Fatalf("Decide(%v): %v", approve, err)
		}
		e.wait(shortRetention + margin)
		if rec := e.lookup(req); rec.State != effectspec.Unknown {
			t.Fatalf("re-held record (approved %v) after the retention of a held one: state %q, want unknown", approve, rec.State)
		}
	}
}

// testRedispatchApprovalDropped: a re-hold still pending does not stop a
// claim for a tool that no longer requires approval; a later decision still
// applies to the slot.
func testRedispatchApprovalDropped(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	e.finalize(req, 1, effectspec.Unknown, nil)
	ticket := e.rehold(req)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("claim without approval required: token %d, want 2", r.Token)
	}
	e.finalize(req, 2, effectspec.Unknown, nil)
	if _, err := e.decide(ticket, false); err != nil {
		t.Fatalf("Decide deny: %v", err)
	}
	e.unchanged(req, "claims after the denial", func() {
		contender(t, e.claimWant(req, idempotency.StatusDenied))
	})
}
