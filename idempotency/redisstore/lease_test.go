package redisstore

import (
	"context"
	"errors"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
)

// TestSettleDecideScopeVersion: settle and decide, like a claim, never
// rewrite a record of another scope version (DESIGN.md section 6).
func TestSettleDecideScopeVersion(t *testing.T) {
	ctx := context.Background()
	m := newMini(t, Options{})
	other := "2"
	if idempotency.ScopeVersion == 2 {
		other = "3"
	}
	k := idempotency.NewKey()
	rk := m.recordKey(t, k)
	m.mr.HSet(rk, "m", "ush", "w", other, "q", hashOf("args")[7:], "f", hashOf("route")[7:], "n", "1")
	before := m.snapshot(t)
	_, err := m.store.Settle(ctx, idempotency.SettleRequest{Scope: testScope, Key: k, Attempts: 1, Outcome: idempotency.StateAccepted, By: "ops"})
	if !errors.Is(err, idempotency.ErrScopeVersionConflict) {
		t.Fatalf("Settle of a record of scope version %s: %v, want ErrScopeVersionConflict", other, err)
	}
	if after := m.snapshot(t); after != before {
		t.Fatal("Settle rewrote a record of another scope version")
	}

	k = idempotency.NewKey()
	rk = m.recordKey(t, k)
	ticket := idempotency.NewTicketID()
	m.mr.HSet(rk, "m", "hsh", "w", other, "q", hashOf("args")[7:], "f", hashOf("route")[7:], "n", "0", "t", ticket)
	if err := m.store.writeTicket(ctx, ticket, testScope, k, rk); err != nil {
		t.Fatal(err)
	}
	before = m.snapshot(t)
	for _, approve := range []bool{true, false} {
		if _, err := m.store.Decide(ctx, idempotency.DecideRequest{Ticket: ticket, Approve: approve}); !errors.Is(err, idempotency.ErrScopeVersionConflict) {
			t.Fatalf("Decide(approve %v) of a record of scope version %s: %v, want ErrScopeVersionConflict", approve, other, err)
		}
	}
	if after := m.snapshot(t); after != before {
		t.Fatal("Decide rewrote a record of another scope version")
	}
}

// TestIncarnationAfterDelete: a record deleted by hand (DEL, FLUSHALL, a
// Redis that lost its data) and made again restarts at token 1; the old
// worker's token 1 never matches the new record's.
func TestIncarnationAfterDelete(t *testing.T) {
	ctx := context.Background()
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	old := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	m.mr.Del(m.recordKey(t, k))
	fresh := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	if fresh.Token != old.Token || fresh.Incarnation == old.Incarnation || len(fresh.Incarnation) != 16 {
		t.Fatalf("claims: token %d inc %q, then token %d inc %q; want one token and two incarnations", old.Token, old.Incarnation, fresh.Token, fresh.Incarnation)
	}
	before := m.snapshot(t)
	if _, err := m.store.Renew(ctx, idempotency.RenewRequest{Scope: testScope, Key: k, Token: old.Token, Incarnation: old.Incarnation}); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("old worker's Renew: %v, want ErrNotFound", err)
	}
	if _, err := m.store.Reserve(ctx, idempotency.ReserveRequest{Scope: testScope, Key: k, Token: old.Token, Incarnation: old.Incarnation}); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("old worker's Reserve: %v, want ErrStale", err)
	}
	if _, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: old.Token, Outcome: idempotency.StateAccepted,
		Incarnation: old.Incarnation}); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("old worker's Finalize: %v, want ErrStale", err)
	}
	if after := m.snapshot(t); after != before {
		t.Fatal("the old worker changed the new record")
	}
	if _, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: fresh.Token, Outcome: idempotency.StateAccepted,
		Incarnation: fresh.Incarnation}); err != nil {
		t.Fatalf("new owner's Finalize: %v", err)
	}
	if _, err := m.store.Renew(ctx, idempotency.RenewRequest{Scope: testScope, Key: k, Token: 1, Incarnation: "zz"}); err == nil {
		t.Fatal("Renew with a malformed incarnation: no error")
	}
}
