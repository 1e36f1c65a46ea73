package lifecycle_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/lifecycle"
	"github.com/obol-gateway/obol/internal/storereply"
)

const (
	lease  = 10_000
	t0     = int64(1_900_000_000_000)
	window = 86_400_000
)

func claimReq(op string, b effectspec.BindingKind) lifecycle.ClaimRequest {
	return lifecycle.ClaimRequest{ScopeVersion: 1, RequestHash: "rh", Binding: b, Fingerprint: "fp", KeySource: 's',
		Op: op, Lease: lease, Retention: 86_400_000, UnknownRetention: 604_800_000, Timeout: 30_000, Window: window,
		Incarnation: "inc-" + op, NewTicket: "apt_" + op, MaxAttempts: 10}
}

// Example shows a claim, its lost reply answered again, and a finalize.
func Example() {
	var cur *lifecycle.Record
	res, w := lifecycle.Claim(cur, claimReq("op1", effectspec.BindingHeader), t0)
	cur = w.Record
	fmt.Println(res.Status, res.Token, res.Lease-t0, w.Index == lifecycle.IndexAdd)

	res, w = lifecycle.Claim(cur, claimReq("op1", effectspec.BindingHeader), t0+5)
	fmt.Println(res.Status, res.Token, res.Applied)
	cur = w.Record

	res, w = lifecycle.Finalize(cur, lifecycle.FinalizeRequest{Token: 1, State: effectspec.Accepted, Op: "op2",
		TTL: 86_400_000, Result: lifecycle.EncodedResult{Status: "200", Body: "{}"}}, t0+100)
	cur = w.Record
	fmt.Println(res.Status, cur.State == effectspec.Accepted, w.Index == lifecycle.IndexRemove)

	res, _ = lifecycle.Claim(cur, claimReq("op3", effectspec.BindingHeader), t0+200)
	fmt.Println(res.Status, res.Record.Result.Body)
	// Output:
	// claimed 1 10000 true
	// claimed 1 true
	// finalized true true
	// replay {}
}

// lapsed is a record whose first attempt's lease lapsed at t0+lease.
func lapsed(t *testing.T, b effectspec.BindingKind) *lifecycle.Record {
	t.Helper()
	res, w := lifecycle.Claim(nil, claimReq("op1", b), t0)
	if res.Status != idempotency.StatusClaimed {
		t.Fatalf("fresh claim: %s", res.Status)
	}
	return w.Record
}

// TestRedispatchAllowList: after a lapsed lease, only the bindings whose
// receiver deduplicates on the key are dispatched again; any other
// binding, known or not, is outcome_unknown and the record turns unknown.
func TestRedispatchAllowList(t *testing.T) {
	for _, c := range []struct {
		b    effectspec.BindingKind
		want idempotency.Status
	}{
		{effectspec.BindingHeader, idempotency.StatusClaimed},
		{effectspec.BindingBodyPointer, idempotency.StatusClaimed},
		{effectspec.BindingInProcessKeyed, idempotency.StatusClaimed},
		{effectspec.BindingMeta, idempotency.StatusClaimed},
		{effectspec.BindingUnsupported, idempotency.StatusOutcomeUnknown},
		{effectspec.BindingInProcess, idempotency.StatusOutcomeUnknown},
		{"x", idempotency.StatusOutcomeUnknown},
	} {
		cur := lapsed(t, c.b)
		res, w := lifecycle.Claim(cur, claimReq("op2", c.b), t0+lease)
		if res.Status != c.want {
			t.Errorf("binding %s: %s, want %s", c.b, res.Status, c.want)
		}
		if c.want == idempotency.StatusOutcomeUnknown && (w.Record == nil || w.Record.State != effectspec.Unknown || w.Record.AttemptDeadline == 0) {
			t.Errorf("binding %s: the lapsed record did not become unknown with its attempt deadline kept: %+v", c.b, w.Record)
		}
	}
}

// TestNeverSentReopens: an attempt finalized as never sent frees the
// slot for every binding ("no attempt may have left").
func TestNeverSentReopens(t *testing.T) {
	cur := lapsed(t, effectspec.BindingUnsupported)
	res, w := lifecycle.Finalize(cur, lifecycle.FinalizeRequest{Token: 1, State: effectspec.Unknown, Op: "op2", TTL: 1000, Never: true}, t0+1)
	if res.Status != storereply.Finalized || w.Record.Sent != 0 {
		t.Fatalf("finalize never sent: %s, sent %d", res.Status, w.Record.Sent)
	}
	res, w = lifecycle.Claim(w.Record, claimReq("op3", effectspec.BindingUnsupported), t0+2)
	if res.Status != idempotency.StatusClaimed || res.Token != 2 || w.Record.FirstSent != t0+2 {
		t.Fatalf("claim after never sent: %s token %d, first sent %d", res.Status, res.Token, w.Record.FirstSent)
	}
}

// TestGiveBackThenCopy: a copy of the claim after its give-back never
// reserves again; a second give-back is stale; its re-send is applied.
func TestGiveBackThenCopy(t *testing.T) {
	cur := lapsed(t, effectspec.BindingHeader)
	gb := lifecycle.GiveBackRequest{Token: 1, ClaimOp: "op1", Op: "gb1", UnknownRetention: 1000, Incarnation: "inc-op1"}
	res, w := lifecycle.GiveBack(cur, gb, t0+1)
	if res.Status != storereply.GivenBack || !w.Record.GivenBack || w.Record.State != effectspec.Unknown {
		t.Fatalf("give back: %s %+v", res.Status, w.Record)
	}
	cur = w.Record
	if res, _ := lifecycle.GiveBack(cur, gb, t0+2); res.Status != storereply.GivenBack || !res.Applied {
		t.Errorf("re-sent give-back: %+v", res)
	}
	gb.Op = "gb2"
	if res, _ := lifecycle.GiveBack(cur, gb, t0+2); res.Status != storereply.Stale {
		t.Errorf("second give-back: %s, want stale", res.Status)
	}
	if res, w := lifecycle.Claim(cur, claimReq("op1", effectspec.BindingHeader), t0+3); res.Status != idempotency.StatusOutcomeUnknown ||
		!res.Applied || w.Record != nil {
		t.Errorf("late copy of the claim: %+v, write %v", res, w.Record)
	}
}

// TestExpire: a record is gone at its expiry, not before.
func TestExpire(t *testing.T) {
	cur := lapsed(t, effectspec.BindingHeader)
	if lifecycle.Expire(cur, cur.Expires-1) == nil || lifecycle.Expire(cur, cur.Expires) != nil {
		t.Fatalf("expiry at %d: wrong side of the boundary", cur.Expires)
	}
}

// TestResentClaimAfterConflict: a claim's lease lapses and another claim's
// route change turns the record unknown (keeping the first claim's op as
// the last operation); the first claim re-sent still answers its token,
// applied, so that its re-sender can give it back.
func TestResentClaimAfterConflict(t *testing.T) {
	cur := lapsed(t, effectspec.BindingUnsupported)
	other := claimReq("op2", effectspec.BindingUnsupported)
	other.Fingerprint = "fp-other"
	res, w := lifecycle.Claim(cur, other, t0+lease)
	if res.Status != idempotency.StatusDestinationConflict || w.Record.State != effectspec.Unknown || w.Record.Op != "op1" {
		t.Fatalf("conflicting claim: %s, record %+v", res.Status, w.Record)
	}
	res, _ = lifecycle.Claim(w.Record, claimReq("op1", effectspec.BindingUnsupported), t0+lease+1)
	if res.Status != idempotency.StatusClaimed || res.Token != 1 || !res.Applied {
		t.Fatalf("re-sent claim: %+v, want claimed token 1, applied", res)
	}
}

// TestNoCreate: a claim with NoCreate creates no record (no_record, no
// write; refused first when both are asked), and claims every existing
// record exactly as the same claim without it.
func TestNoCreate(t *testing.T) {
	for _, approval := range []bool{false, true} {
		q := claimReq("op1", effectspec.BindingHeader)
		q.ApprovalRequired, q.NoCreate = approval, true
		res, w := lifecycle.Claim(nil, q, t0)
		if res.Status != idempotency.StatusNoRecord || w != (lifecycle.Write{}) {
			t.Errorf("approval %v: no record: %+v, write %+v; want no_record writing nothing", approval, res, w)
		}
		q.Refuse = true
		if res, w := lifecycle.Claim(nil, q, t0); res.Status != idempotency.StatusRefused || w.Record != nil {
			t.Errorf("approval %v: refused and no-create: %s, want refused", approval, res.Status)
		}
	}

	held := func(approve bool) *lifecycle.Record {
		q := claimReq("op1", effectspec.BindingHeader)
		q.ApprovalRequired = true
		_, w := lifecycle.Claim(nil, q, t0)
		if approve {
			_, w = lifecycle.Decide(w.Record, lifecycle.DecideRequest{Ticket: q.NewTicket, Approve: true, Op: "dec",
				Retention: 86_400_000, ScopeVersion: 1}, t0+1)
		}
		return w.Record
	}
	final := func() *lifecycle.Record {
		_, w := lifecycle.Finalize(lapsed(t, effectspec.BindingHeader), lifecycle.FinalizeRequest{Token: 1,
			State: effectspec.Accepted, Op: "fin", TTL: 86_400_000, Incarnation: "inc-op1",
			Result: lifecycle.EncodedResult{Status: "200", Body: "{}"}}, t0+1)
		return w.Record
	}
	records := map[string]func() (*lifecycle.Record, lifecycle.ClaimRequest, int64){
		"in flight": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			return lapsed(t, effectspec.BindingHeader), claimReq("op2", effectspec.BindingHeader), t0 + 1
		},
		"re-sent claim": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			return lapsed(t, effectspec.BindingHeader), claimReq("op1", effectspec.BindingHeader), t0 + 1
		},
		"lease lapsed, redispatch": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			return lapsed(t, effectspec.BindingHeader), claimReq("op2", effectspec.BindingHeader), t0 + lease
		},
		"lease lapsed, unsupported": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			return lapsed(t, effectspec.BindingUnsupported), claimReq("op2", effectspec.BindingUnsupported), t0 + lease
		},
		"final": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			return final(), claimReq("op2", effectspec.BindingHeader), t0 + 2
		},
		"held": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			q := claimReq("op2", effectspec.BindingHeader)
			q.ApprovalRequired = true
			return held(false), q, t0 + 2
		},
		"approved resume": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			q := claimReq("op2", effectspec.BindingHeader)
			q.ApprovalRequired, q.Ticket = true, "apt_op1"
			return held(true), q, t0 + 2
		},
	}
	for name, setup := range records {
		cur, q, now := setup()
		want, wantW := lifecycle.Claim(cur, q, now)
		q.NoCreate = true
		got, gotW := lifecycle.Claim(cur, q, now)
		if got.Status == idempotency.StatusNoRecord || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: with NoCreate %+v, without %+v", name, got, want)
		}
		if !reflect.DeepEqual(gotW, wantW) {
			t.Errorf("%s: with NoCreate the write differs: %+v, without %+v", name, gotW.Record, wantW.Record)
		}
		if name == "approved resume" && got.Status != idempotency.StatusClaimed {
			t.Errorf("approved resume with NoCreate: %s, want claimed", got.Status)
		}
	}
}

// unknownAfter makes a header record whose sent attempts, each finalized
// unknown by its owner, number n, the last reserved at the time returned.
func unknownAfter(t *testing.T, n int, maxAtt int64) (*lifecycle.Record, int64) {
	t.Helper()
	var cur *lifecycle.Record
	now := t0
	for i := 1; i <= n; i++ {
		q := claimReq(fmt.Sprint("c", i), effectspec.BindingHeader)
		q.MaxAttempts = maxAtt
		res, w := lifecycle.Claim(cur, q, now)
		if res.Status != idempotency.StatusClaimed || res.Token != int64(i) {
			t.Fatalf("claim %d at +%d: %+v", i, now-t0, res)
		}
		res, w = lifecycle.Finalize(w.Record, lifecycle.FinalizeRequest{Token: int64(i), State: effectspec.Unknown, Op: fmt.Sprint("f", i),
			TTL: 604_800_000}, now+1)
		if res.Status != storereply.Finalized {
			t.Fatalf("finalize %d: %+v", i, res)
		}
		cur = w.Record
		if i < n {
			now += lease << (i - 1) // each redispatch once its backoff ended
		}
	}
	return cur, now
}

// TestRedispatchLimits: the redispatch after n >= 2 attempts that may have
// left waits lease x 2^(n-1) after the latest reservation (capped at an
// hour); past max_attempts it is refused for good, with no retry-after.
func TestRedispatchLimits(t *testing.T) {
	cur, last := unknownAfter(t, 2, 10)
	q := claimReq("c3", effectspec.BindingHeader)
	q.MaxAttempts = 10
	res, w := lifecycle.Claim(cur, q, last+2*lease-1)
	if res.Status != idempotency.StatusOutcomeUnknown || res.Limit != storereply.Backoff || res.RetryAfter != 1 || w.Record != nil {
		t.Fatalf("before the backoff: %+v, write %+v; want outcome_unknown, backoff, 1 ms, nothing written", res, w.Record)
	}
	if res, _ := lifecycle.Claim(cur, q, last+2*lease); res.Status != idempotency.StatusClaimed {
		t.Fatalf("at the backoff's end: %s, want claimed", res.Status)
	}
	// A copy of the cycle's claim does not wait.
	copyQ := claimReq("c2", effectspec.BindingHeader)
	copyQ.MaxAttempts = 10
	if res, _ := lifecycle.Claim(cur, copyQ, last+1); res.Status != idempotency.StatusClaimed {
		t.Fatalf("copy of the cycle's claim: %s, want claimed", res.Status)
	}
	// The cap: lease x 2^19 is far past an hour.
	cur, last = unknownAfter(t, 3, 30)
	cur.Sent = 20
	q = claimReq("c9", effectspec.BindingHeader)
	q.MaxAttempts = 30
	const hour = 3_600_000
	if res, _ := lifecycle.Claim(cur, q, last+1); res.RetryAfter != hour-1 {
		t.Fatalf("20 sent: retry after %d, want the cap %d less 1", res.RetryAfter, hour)
	}
	// max_attempts.
	cur, last = unknownAfter(t, 3, 3)
	q.MaxAttempts = 3
	res, _ = lifecycle.Claim(cur, q, last+hour)
	if res.Status != idempotency.StatusOutcomeUnknown || res.Limit != storereply.MaxAttempts || res.RetryAfter != 0 {
		t.Fatalf("at max_attempts: %+v; want outcome_unknown, max_attempts, no retry-after", res)
	}
}

// TestSettleWaitsForEarlierAttempt: attempt 1's lease lapses, a claim
// redispatches attempt 2, which ends unknown: the settle waits for
// attempt 1's deadline.
func TestSettleWaitsForEarlierAttempt(t *testing.T) {
	cur := lapsed(t, effectspec.BindingHeader)
	e1 := cur.AttemptDeadline
	res, w := lifecycle.Claim(cur, claimReq("op2", effectspec.BindingHeader), t0+lease)
	if res.Status != idempotency.StatusClaimed || w.Record.EarlierDeadline != e1 {
		t.Fatalf("redispatch: %s, earlier deadline %d; want claimed, %d", res.Status, w.Record.EarlierDeadline, e1)
	}
	res, w = lifecycle.Finalize(w.Record, lifecycle.FinalizeRequest{Token: 2, State: effectspec.Unknown, Op: "f2", TTL: 1000}, t0+lease+1)
	if res.Status != storereply.Finalized || w.Record.AttemptDeadline != 0 || w.Record.EarlierDeadline != e1 {
		t.Fatalf("finalize: %+v", w.Record)
	}
	s := lifecycle.SettleRequest{Attempts: 2, State: effectspec.DefinitelyRejected, Op: "s1", Retention: 1000, Margin: lease, ScopeVersion: 1}
	if res, _ := lifecycle.Settle(w.Record, s, t0+lease+2); res.Status != idempotency.StatusInProgress || res.SettleAt != e1+lease {
		t.Fatalf("settle while attempt 1 may run: %+v, want in_progress until %d", res, e1+lease)
	}
	res, w = lifecycle.Settle(w.Record, s, e1+lease+1)
	if res.Status != storereply.Settled || w.Record.EarlierDeadline != 0 || w.Record.ReservedAt != 0 {
		t.Fatalf("settle after: %s, %+v; want settled, A and E dropped", res.Status, w.Record)
	}
}

// TestDecideOnFinalRecord: a final record that kept a re-hold's ticket
// answers not_found and writes nothing.
func TestDecideOnFinalRecord(t *testing.T) {
	cur := lapsed(t, effectspec.BindingHeader)
	q := claimReq("op2", effectspec.BindingHeader)
	q.ApprovalRequired = true
	res, w := lifecycle.Claim(cur, q, t0+lease)
	if res.Status != idempotency.StatusHeld {
		t.Fatalf("re-hold: %s", res.Status)
	}
	cur = w.Record
	s := lifecycle.SettleRequest{Attempts: 1, State: effectspec.Accepted, Op: "s1", Retention: 1000, Margin: lease, ScopeVersion: 1}
	res, w = lifecycle.Settle(cur, s, cur.AttemptDeadline+lease+1)
	if res.Status != storereply.Settled || w.Record.Ticket == "" {
		t.Fatalf("settle: %s, ticket %q", res.Status, w.Record.Ticket)
	}
	res, w = lifecycle.Decide(w.Record, lifecycle.DecideRequest{Ticket: w.Record.Ticket, Approve: true, Op: "d1", ScopeVersion: 1}, cur.AttemptDeadline+lease+2)
	if res.Status != storereply.NotFound || w.Record != nil {
		t.Fatalf("decide on a final record: %s, write %+v; want not_found, nothing", res.Status, w.Record)
	}
}
