package redisstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// TestSettleDecideScopeVersion: settle and decide, like a claim, never rewrite
// a record of another scope version (docs/DESIGN.md, "The record and its
// lifecycle").
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
	_, err := m.store.Settle(ctx, idempotency.SettleRequest{Scope: testScope, Key: k, Attempts: 1, Outcome: effectspec.Accepted, By: "ops"})
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
	if _, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: old.Token, Outcome: effectspec.Accepted,
		Incarnation: old.Incarnation}); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("old worker's Finalize: %v, want ErrStale", err)
	}
	if after := m.snapshot(t); after != before {
		t.Fatal("the old worker changed the new record")
	}
	if _, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: fresh.Token, Outcome: effectspec.Accepted,
		Incarnation: fresh.Incarnation}); err != nil {
		t.Fatalf("new owner's Finalize: %v", err)
	}
	if _, err := m.store.Renew(ctx, idempotency.RenewRequest{Scope: testScope, Key: k, Token: 1, Incarnation: "zz"}); err == nil {
		t.Fatal("Renew with a malformed incarnation: no error")
	}
}

// TestConflictAfterLapseRefreshesEntry: a lapsed in-flight record met by a
// claim of another route becomes unknown first, as on the lease-expiry
// path: its TTL and its index entry's score restart, its attempt deadline
// stays, and the claim's op is not recorded (a re-send conflicts again).
func TestConflictAfterLapseRefreshesEntry(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	req := claimReq(idempotency.NewKey())
	req.Binding = effectspec.BindingUnsupported
	c := mustClaim(t, m.store, req, idempotency.StatusClaimed)
	m.mr.SetTime(t0.Add(2 * time.Second))
	m.mr.FastForward(2 * time.Second)
	other := req
	other.Route.Fingerprint = hashOf("another route")
	other.OpID = "op-conflict"
	mustClaim(t, m.store, other, idempotency.StatusDestinationConflict)
	if got, want := m.indexScores(t)[member(req.Key)], float64(t0.Add(2*time.Second+defaultUnknownRetention).UnixMilli()); got != want {
		t.Fatalf("entry after the conflict: score %v, want %v", got, want)
	}
	if ttl := m.mr.TTL(m.recordKey(t, req.Key)); ttl != defaultUnknownRetention {
		t.Fatalf("record TTL %v after the conflict, want %v", ttl, defaultUnknownRetention)
	}
	rec, err := m.store.Lookup(context.Background(), testScope, req.Key)
	if err != nil || rec.State != effectspec.Unknown || !rec.AttemptDeadline.Equal(c.AttemptDeadline) {
		t.Fatalf("after the conflict: %s, attempt deadline %v, %v; want unknown keeping %v", rec.State, rec.AttemptDeadline, err, c.AttemptDeadline)
	}
	mustClaim(t, m.store, other, idempotency.StatusDestinationConflict)
	mustFinalize(t, m.store, req.Key, c.Token, effectspec.Accepted, nil)
}

// TestIncarnationAbsentOnRecord: a record without an incarnation (made
// before them, or rewritten by a previous release's scripts, which drop the
// field) is not compared: its owner keeps renewing and finalizing it.
func TestIncarnationAbsentOnRecord(t *testing.T) {
	ctx := context.Background()
	m := newMini(t, Options{Lease: time.Second})
	k := idempotency.NewKey()
	rk := m.recordKey(t, k)
	lease := strconv.FormatInt(t0.Add(time.Second).UnixMilli(), 10)
	deadline := strconv.FormatInt(t0.Add(time.Minute).UnixMilli(), 10)
	m.mr.HSet(rk, "m", "fsh", "w", strconv.Itoa(idempotency.ScopeVersion), "q", hashOf("args")[7:], "f", hashOf("route")[7:], "n", "1", "l", lease, "e", deadline)
	const inc = "0123456789abcdef"
	if _, err := m.store.Renew(ctx, idempotency.RenewRequest{Scope: testScope, Key: k, Token: 1, Incarnation: inc}); err != nil {
		t.Fatalf("Renew of a record without an incarnation: %v", err)
	}
	if _, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Accepted, Incarnation: inc}); err != nil {
		t.Fatalf("Finalize of a record without an incarnation: %v", err)
	}
}
