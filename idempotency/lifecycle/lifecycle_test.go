package lifecycle_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/obol-gateway/obol/idempotency/lifecycle"
)

const (
	lease  = 10_000
	t0     = int64(1_900_000_000_000)
	window = 86_400_000
)

func claimReq(op string, b byte) lifecycle.ClaimRequest {
	return lifecycle.ClaimRequest{ScopeVersion: 1, RequestHash: "rh", Binding: b, Fingerprint: "fp", KeySource: 's',
		Op: op, Lease: lease, Retention: 86_400_000, URetention: 604_800_000, Timeout: 30_000, Window: window,
		Incarnation: "inc-" + op, Fresh: "apt_" + op, MaxAttempts: 10}
}

// Example shows a claim, its lost reply answered again, and a finalize.
func Example() {
	var cur *lifecycle.Record
	res, w := lifecycle.Claim(cur, claimReq("op1", lifecycle.BindingHeader), t0)
	cur = w.Record
	fmt.Println(res.Status, res.Token, res.Lease-t0, w.Index == lifecycle.IndexAdd)

	res, w = lifecycle.Claim(cur, claimReq("op1", lifecycle.BindingHeader), t0+5)
	fmt.Println(res.Status, res.Token, res.Applied)
	cur = w.Record

	res, w = lifecycle.Finalize(cur, lifecycle.FinalizeRequest{Token: 1, State: lifecycle.Accepted, Op: "op2",
		TTL: 86_400_000, Result: lifecycle.StoredResult{Status: "200", Body: "{}"}}, t0+100)
	cur = w.Record
	fmt.Println(res.Status, cur.State == lifecycle.Accepted, w.Index == lifecycle.IndexRemove)

	res, _ = lifecycle.Claim(cur, claimReq("op3", lifecycle.BindingHeader), t0+200)
	fmt.Println(res.Status, res.Record.Result.Body)
	// Output:
	// claimed 1 10000 true
	// claimed 1 true
	// finalized true true
	// replay {}
}

// lapsed is a record whose first attempt's lease lapsed at t0+lease.
func lapsed(t *testing.T, b byte) *lifecycle.Record {
	t.Helper()
	res, w := lifecycle.Claim(nil, claimReq("op1", b), t0)
	if res.Status != lifecycle.Claimed {
		t.Fatalf("fresh claim: %s", res.Status)
	}
	return w.Record
}

// TestRedispatchAllowList: after a lapsed lease, only the bindings whose
// receiver deduplicates on the key are dispatched again; any other
// letter, known or not, is outcome_unknown and the record turns unknown.
func TestRedispatchAllowList(t *testing.T) {
	for _, c := range []struct {
		b    byte
		want lifecycle.Reply
	}{
		{lifecycle.BindingHeader, lifecycle.Claimed},
		{lifecycle.BindingBodyPointer, lifecycle.Claimed},
		{lifecycle.BindingKeyed, lifecycle.Claimed},
		{lifecycle.BindingUnsupported, lifecycle.OutcomeUnknown},
		{'x', lifecycle.OutcomeUnknown},
	} {
		cur := lapsed(t, c.b)
		res, w := lifecycle.Claim(cur, claimReq("op2", c.b), t0+lease)
		if res.Status != c.want {
			t.Errorf("binding %c: %s, want %s", c.b, res.Status, c.want)
		}
		if c.want == lifecycle.OutcomeUnknown && (w.Record == nil || w.Record.State != lifecycle.Unknown || w.Record.AttemptDeadline == 0) {
			t.Errorf("binding %c: the lapsed record did not become unknown with its attempt deadline kept: %+v", c.b, w.Record)
		}
	}
}

// TestNeverSentReopens: an attempt finalized as never sent frees the
// slot for every binding ("no attempt may have left").
func TestNeverSentReopens(t *testing.T) {
	cur := lapsed(t, lifecycle.BindingUnsupported)
	res, w := lifecycle.Finalize(cur, lifecycle.FinalizeRequest{Token: 1, State: lifecycle.Unknown, Op: "op2", TTL: 1000, Never: true}, t0+1)
	if res.Status != lifecycle.Finalized || w.Record.Sent != 0 {
		t.Fatalf("finalize never sent: %s, sent %d", res.Status, w.Record.Sent)
	}
	res, w = lifecycle.Claim(w.Record, claimReq("op3", lifecycle.BindingUnsupported), t0+2)
	if res.Status != lifecycle.Claimed || res.Token != 2 || w.Record.FirstSent != t0+2 {
		t.Fatalf("claim after never sent: %s token %d, first sent %d", res.Status, res.Token, w.Record.FirstSent)
	}
}

// TestGiveBackThenCopy: a copy of the claim after its give-back never
// reserves again; a second give-back is stale; its re-send is applied.
func TestGiveBackThenCopy(t *testing.T) {
	cur := lapsed(t, lifecycle.BindingHeader)
	gb := lifecycle.GiveBackRequest{Token: 1, ClaimOp: "op1", Op: "gb1", URetention: 1000, Incarnation: "inc-op1"}
	res, w := lifecycle.GiveBack(cur, gb, t0+1)
	if res.Status != lifecycle.GivenBack || !w.Record.GivenBack || w.Record.State != lifecycle.Unknown {
		t.Fatalf("give back: %s %+v", res.Status, w.Record)
	}
	cur = w.Record
	if res, _ := lifecycle.GiveBack(cur, gb, t0+2); res.Status != lifecycle.GivenBack || !res.Applied {
		t.Errorf("re-sent give-back: %+v", res)
	}
	gb.Op = "gb2"
	if res, _ := lifecycle.GiveBack(cur, gb, t0+2); res.Status != lifecycle.Stale {
		t.Errorf("second give-back: %s, want stale", res.Status)
	}
	if res, w := lifecycle.Claim(cur, claimReq("op1", lifecycle.BindingHeader), t0+3); res.Status != lifecycle.OutcomeUnknown ||
		!res.Applied || w.Record != nil {
		t.Errorf("late copy of the claim: %+v, write %v", res, w.Record)
	}
}

// TestExpire: a record is gone at its expiry, not before.
func TestExpire(t *testing.T) {
	cur := lapsed(t, lifecycle.BindingHeader)
	if lifecycle.Expire(cur, cur.Expires-1) == nil || lifecycle.Expire(cur, cur.Expires) != nil {
		t.Fatalf("expiry at %d: wrong side of the boundary", cur.Expires)
	}
}

// TestResentClaimAfterConflict: a claim's lease lapses and another claim's
// route change turns the record unknown (keeping the first claim's op as
// the last operation); the first claim re-sent still answers its token,
// applied, so that its re-sender can give it back.
func TestResentClaimAfterConflict(t *testing.T) {
	cur := lapsed(t, lifecycle.BindingUnsupported)
	other := claimReq("op2", lifecycle.BindingUnsupported)
	other.Fingerprint = "fp-other"
	res, w := lifecycle.Claim(cur, other, t0+lease)
	if res.Status != lifecycle.DestinationConflict || w.Record.State != lifecycle.Unknown || w.Record.Op != "op1" {
		t.Fatalf("conflicting claim: %s, record %+v", res.Status, w.Record)
	}
	res, _ = lifecycle.Claim(w.Record, claimReq("op1", lifecycle.BindingUnsupported), t0+lease+1)
	if res.Status != lifecycle.Claimed || res.Token != 1 || !res.Applied {
		t.Fatalf("re-sent claim: %+v, want claimed token 1, applied", res)
	}
}

// TestNoCreate: a claim with NoCreate creates no record (no_record, no
// write; refused first when both are asked), and claims every existing
// record exactly as the same claim without it.
func TestNoCreate(t *testing.T) {
	for _, approval := range []bool{false, true} {
		q := claimReq("op1", lifecycle.BindingHeader)
		q.Approval, q.NoCreate = approval, true
		res, w := lifecycle.Claim(nil, q, t0)
		if res.Status != lifecycle.NoRecord || w.Record != nil || w.Index != lifecycle.IndexKeep {
			t.Errorf("approval %v: no record: %+v, write %+v; want no_record writing nothing", approval, res, w)
		}
		q.Refuse = true
		if res, w := lifecycle.Claim(nil, q, t0); res.Status != lifecycle.Refused || w.Record != nil {
			t.Errorf("approval %v: refused and no-create: %s, want refused", approval, res.Status)
		}
	}

	held := func(approve bool) *lifecycle.Record {
		q := claimReq("op1", lifecycle.BindingHeader)
		q.Approval = true
		_, w := lifecycle.Claim(nil, q, t0)
		if approve {
			_, w = lifecycle.Decide(w.Record, lifecycle.DecideRequest{Ticket: q.Fresh, Approve: true, Op: "dec",
				Retention: 86_400_000, ScopeVersion: 1}, t0+1)
		}
		return w.Record
	}
	final := func() *lifecycle.Record {
		_, w := lifecycle.Finalize(lapsed(t, lifecycle.BindingHeader), lifecycle.FinalizeRequest{Token: 1,
			State: lifecycle.Accepted, Op: "fin", TTL: 86_400_000, Incarnation: "inc-op1",
			Result: lifecycle.StoredResult{Status: "200", Body: "{}"}}, t0+1)
		return w.Record
	}
	records := map[string]func() (*lifecycle.Record, lifecycle.ClaimRequest, int64){
		"in flight": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			return lapsed(t, lifecycle.BindingHeader), claimReq("op2", lifecycle.BindingHeader), t0 + 1
		},
		"re-sent claim": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			return lapsed(t, lifecycle.BindingHeader), claimReq("op1", lifecycle.BindingHeader), t0 + 1
		},
		"lease lapsed, redispatch": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			return lapsed(t, lifecycle.BindingHeader), claimReq("op2", lifecycle.BindingHeader), t0 + lease
		},
		"lease lapsed, unsupported": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			return lapsed(t, lifecycle.BindingUnsupported), claimReq("op2", lifecycle.BindingUnsupported), t0 + lease
		},
		"final": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			return final(), claimReq("op2", lifecycle.BindingHeader), t0 + 2
		},
		"held": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			q := claimReq("op2", lifecycle.BindingHeader)
			q.Approval = true
			return held(false), q, t0 + 2
		},
		"approved resume": func() (*lifecycle.Record, lifecycle.ClaimRequest, int64) {
			q := claimReq("op2", lifecycle.BindingHeader)
			q.Approval, q.Presented = true, "apt_op1"
			return held(true), q, t0 + 2
		},
	}
	for name, setup := range records {
		cur, q, now := setup()
		want, wantW := lifecycle.Claim(cur, q, now)
		q.NoCreate = true
		got, gotW := lifecycle.Claim(cur, q, now)
		if got.Status == lifecycle.NoRecord || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: with NoCreate %+v, without %+v", name, got, want)
		}
		if !reflect.DeepEqual(gotW, wantW) {
			t.Errorf("%s: with NoCreate the write differs: %+v, without %+v", name, gotW.Record, wantW.Record)
		}
		if name == "approved resume" && got.Status != lifecycle.Claimed {
			t.Errorf("approved resume with NoCreate: %s, want claimed", got.Status)
		}
	}
}
