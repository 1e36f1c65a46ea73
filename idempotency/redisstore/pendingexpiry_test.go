package redisstore

import (
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// TestPendingFollowsExpiry: an entry of the pending approvals index lives
// as long as its record awaits a decision, however often the record's TTL
// moves after the hold (a held call held again by a re-sent claim; a
// re-held unknown call dispatched and finalized again and again by a tool
// that no longer requires approval), even when a later hold in its bucket
// prunes expired entries; the bucket expires after its latest entry.
func TestPendingFollowsExpiry(t *testing.T) {
	m := newMini(t, Options{Lease: 100 * time.Millisecond, Retention: time.Second, UnknownRetention: 2 * time.Second})
	now := t0
	at := func(d time.Duration) {
		t.Helper()
		next := t0.Add(d)
		if next.Before(now) {
			t.Fatalf("clock back to %v", d)
		}
		m.mr.SetTime(next)
		m.mr.FastForward(next.Sub(now))
		now = next
	}
	req := func(k idempotency.Key) idempotency.ClaimRequest {
		r := claimReq(k)
		r.Timeout = 500 * time.Millisecond
		return r
	}
	held := func(k idempotency.Key) idempotency.ClaimRequest {
		r := req(k)
		r.ApprovalRequired = true
		return r
	}
	rk := func(k idempotency.Key) string { return m.recordKey(t, k) }
	// sameSlot is a new key whose record is in k's slot, so its hold
	// prunes k's bucket.
	sameSlot := func(k idempotency.Key) idempotency.Key {
		for {
			o := idempotency.NewKey()
			if keySlot(rk(o)) == keySlot(rk(k)) {
				return o
			}
		}
	}
	listed := func(ticket string) bool {
		t.Helper()
		p, err := m.store.ListPending(t.Context(), idempotency.ListRequest{Workspace: testScope.Workspace, Limit: 100})
		if err != nil {
			t.Fatalf("ListPending: %v", err)
		}
		for _, a := range p.Approvals {
			if a.Ticket == ticket {
				return true
			}
		}
		return false
	}

	// A held call held again by its re-sent claim: its TTL moves past the
	// first hold's expiry.
	hk := idempotency.NewKey()
	h := held(hk)
	h.OpID = idempotency.NewOpID()
	tk := mustClaim(t, m.store, h, idempotency.StatusHeld).Ticket
	at(800 * time.Millisecond)
	mustClaim(t, m.store, h, idempotency.StatusHeld)
	at(1200 * time.Millisecond) // past the first hold's expiry
	mustClaim(t, m.store, held(sameSlot(hk)), idempotency.StatusHeld)
	if !listed(tk) {
		t.Fatal("a held call whose TTL a re-sent claim extended is no longer listed after its first expiry")
	}

	// A re-held unknown call, then dispatched by claims that no longer
	// require approval, each attempt finalized unknown: it still awaits a
	// decision, its record living on long past the re-hold's expiry.
	k := idempotency.NewKey()
	base := 2 * time.Second
	at(base)
	mustClaim(t, m.store, req(k), idempotency.StatusClaimed)
	mustFinalize(t, m.store, k, 1, effectspec.Unknown, nil)
	at(base + 100*time.Millisecond)
	rt := mustClaim(t, m.store, held(k), idempotency.StatusHeld).Ticket
	for i, d := range []time.Duration{1500, 3400, 5300, 7200} {
		at(base + d*time.Millisecond)
		res := mustClaim(t, m.store, req(k), idempotency.StatusClaimed)
		if res.Token != i+2 {
			t.Fatalf("redispatch %d: token %d", i, res.Token)
		}
		mustFinalize(t, m.store, k, res.Token, effectspec.Unknown, nil)
	}
	at(base + 8*time.Second) // the record lives until about base + 9.2s
	mustClaim(t, m.store, held(sameSlot(k)), idempotency.StatusHeld)
	if rec, err := m.store.Lookup(t.Context(), testScope, k); err != nil || rec.Ticket != rt || rec.Approved || rec.ApprovalDenied {
		t.Fatalf("the re-held record: %+v, %v; want it awaiting its decision", rec, err)
	}
	if !listed(rt) {
		t.Fatal("a re-held call whose TTL later claims and finalizes extended is no longer listed")
	}

	// The bucket expires after its latest entry, not before.
	bucket := m.store.pendingOf(testScope.Workspace, rk(k))
	ttl := m.mr.TTL(bucket)
	if ttl <= 0 {
		t.Fatalf("pending approvals bucket has TTL %v, want one", ttl)
	}
	at(base + 8*time.Second + ttl - time.Millisecond)
	if !m.mr.Exists(bucket) {
		t.Fatal("the bucket expired before its TTL")
	}
	at(base + 8*time.Second + ttl)
	if m.mr.Exists(bucket) {
		t.Fatal("the bucket outlived its TTL")
	}
	if ttl < 1200*time.Millisecond {
		t.Fatalf("bucket TTL %v, shorter than the re-held record's life", ttl)
	}
}
