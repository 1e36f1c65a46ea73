package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

var concurrencyTests = []test{
	{"OneKey", testConcurrentOneKey},
	{"OneUnknownKey", testConcurrentRedispatch},
	{"DistinctKeys", testConcurrentDistinctKeys},
	{"Reserve", testConcurrentReserve},
	{"Finalize", testConcurrentFinalize},
	{"Decide", testConcurrentDecide},
}

const contenders = 64

// parallel runs f(i) for i in [0, n) at once and waits.
func parallel(n int, f func(i int)) {
	var start, done sync.WaitGroup
	start.Add(1)
	for i := range n {
		done.Go(func() {
			start.Wait()
			f(i)
		})
	}
	start.Done()
	done.Wait()
}

// testConcurrentOneKey: of 64 callers claiming one key exactly one wins; the
// winner finalizes at once, so the others see in_progress or the replay.
func testConcurrentOneKey(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	want := result(201, `{"id":"ch_1"}`)
	results := make([]idempotency.ClaimResult, contenders)
	errs := make([]error, contenders)
	parallel(contenders, func(i int) {
		r, err := e.s.Claim(e.ctx, req)
		results[i], errs[i] = r, err
		if err == nil && r.Status == idempotency.StatusClaimed {
			_, errs[i] = e.s.Finalize(e.ctx, idempotency.FinalizeRequest{Scope: req.Scope, Key: req.Key, Token: r.Token, Outcome: effectspec.Accepted, Result: want})
		}
	})
	count := map[idempotency.Status]int{}
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		count[r.Status]++
		switch r.Status {
		case idempotency.StatusClaimed:
			if r.Token != 1 {
				t.Fatalf("winner token %d, want 1", r.Token)
			}
		case idempotency.StatusInProgress:
			contender(t, r)
		case idempotency.StatusReplay:
			sameResult(t, r.Record.Result, want)
		default:
			t.Fatalf("caller %d: status %q", i, r.Status)
		}
	}
	if count[idempotency.StatusClaimed] != 1 {
		t.Fatalf("%d of %d callers claimed the key, want exactly 1 (answers: %v)", count[idempotency.StatusClaimed], contenders, count)
	}
	if rec := e.lookup(req); rec.AttemptCount != 1 || rec.State != effectspec.Accepted {
		t.Fatalf("record: state %q, attempts %d; want accepted, 1", rec.State, rec.AttemptCount)
	}
}

// testConcurrentRedispatch: of 64 callers re-claiming an unknown record
// exactly one reserves the next attempt.
func testConcurrentRedispatch(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	e.finalize(req, 1, effectspec.Unknown, nil)
	results := make([]idempotency.ClaimResult, contenders)
	errs := make([]error, contenders)
	parallel(contenders, func(i int) { results[i], errs[i] = e.s.Claim(e.ctx, req) })
	won := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("caller %d: %v", i, errs[i])
		}
		switch r.Status {
		case idempotency.StatusClaimed:
			won++
			if r.Token != 2 {
				t.Fatalf("winner token %d, want 2", r.Token)
			}
		case idempotency.StatusInProgress:
			contender(t, r)
		default:
			t.Fatalf("caller %d: status %q, want claimed or in_progress", i, r.Status)
		}
	}
	if won != 1 {
		t.Fatalf("%d callers reserved the next attempt, want exactly 1", won)
	}
	if rec := e.lookup(req); rec.AttemptCount != 2 {
		t.Fatalf("attempts %d, want 2", rec.AttemptCount)
	}
}

// testConcurrentDistinctKeys: many keys at once do not disturb each other.
func testConcurrentDistinctKeys(t *testing.T, h Harness) {
	e := std(t, h)
	const keys = 200
	reqs := make([]idempotency.ClaimRequest, keys)
	for i := range reqs {
		reqs[i] = call(effectspec.BindingHeader)
		reqs[i].Scope.Workspace = fmt.Sprintf("ws_%d", i%7) // spread over scopes too
	}
	errs := make([]error, keys)
	parallel(keys, func(i int) {
		req := reqs[i]
		r, err := e.s.Claim(e.ctx, req)
		if err == nil && (r.Status != idempotency.StatusClaimed || r.Token != 1) {
			err = fmt.Errorf("claim: status %q token %d, want claimed 1", r.Status, r.Token)
		}
		if err == nil {
			_, err = e.s.Finalize(e.ctx, idempotency.FinalizeRequest{Scope: req.Scope, Key: req.Key, Token: 1,
				Outcome: effectspec.Accepted, Result: result(201, fmt.Sprintf(`{"n":%d}`, i))})
		}
		errs[i] = err
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for i, req := range reqs {
		r := e.claimWant(req, idempotency.StatusReplay)
		sameResult(t, r.Record.Result, result(201, fmt.Sprintf(`{"n":%d}`, i)))
	}
}

func testConcurrentReserve(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	const n = 16
	res := make([]idempotency.Reservation, n)
	errs := make([]error, n)
	parallel(n, func(i int) { res[i], errs[i] = e.reserve(req, 1) })
	won := 0
	for i, err := range errs {
		switch {
		case err == nil && res[i].Token == 2:
			won++
		case isStale(err):
		default:
			t.Fatalf("Reserve %d = %+v, %v", i, res[i], err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d concurrent reserves won, want 1", won, n)
	}
	if rec := e.lookup(req); rec.AttemptCount != 2 {
		t.Fatalf("attempts %d, want 2", rec.AttemptCount)
	}
}

func testConcurrentFinalize(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	const n = 16
	errs := make([]error, n)
	parallel(n, func(i int) {
		_, errs[i] = e.s.Finalize(e.ctx, idempotency.FinalizeRequest{Scope: req.Scope, Key: req.Key, Token: 1,
			Outcome: effectspec.Accepted, Result: result(201, fmt.Sprintf(`{"writer":%d}`, i))})
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("finalizes %d and %d both succeeded", winner, i)
			}
			winner = i
		case !isStale(err):
			t.Fatalf("Finalize %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no finalize succeeded")
	}
	r := e.claimWant(req, idempotency.StatusReplay)
	sameResult(t, r.Record.Result, result(201, fmt.Sprintf(`{"writer":%d}`, winner)))
}

func testConcurrentDecide(t *testing.T, h Harness) {
	e := std(t, h)
	req := held(call(effectspec.BindingHeader))
	ticket := e.hold(req)
	const n = 16
	tks := make([]idempotency.Ticket, n)
	errs := make([]error, n)
	parallel(n, func(i int) { tks[i], errs[i] = e.decide(ticket, i%2 == 0) })
	final, err := e.s.Ticket(e.ctx, ticket)
	if err != nil {
		t.Fatalf("Ticket: %v", err)
	}
	if final.Status != idempotency.TicketApproved && final.Status != idempotency.TicketDenied {
		t.Fatalf("after concurrent decisions the ticket is %q", final.Status)
	}
	for i, err := range errs {
		agrees := (i%2 == 0) == (final.Status == idempotency.TicketApproved)
		switch {
		case agrees && err != nil:
			t.Fatalf("decision %d agrees with the outcome %q but failed: %v", i, final.Status, err)
		case agrees && tks[i].Status != final.Status:
			t.Fatalf("decision %d answered %q, the ticket is %q", i, tks[i].Status, final.Status)
		case !agrees && !errors.Is(err, idempotency.ErrDenied) && !errors.Is(err, idempotency.ErrStale):
			t.Fatalf("decision %d contradicts the outcome %q: %v, want ErrDenied or ErrStale", i, final.Status, err)
		}
	}
	want := effectspec.Held
	if final.Status == idempotency.TicketDenied {
		want = effectspec.Denied
	}
	if rec := e.lookup(req); rec.State != want || rec.Approved != (final.Status == idempotency.TicketApproved) {
		t.Fatalf("record state %q approved %v, ticket %q", rec.State, rec.Approved, final.Status)
	}
}
