package redisstore

import (
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
)

// TestFirstAttemptAt: a record's FirstAttemptAt is its creation, until a
// slot that sent nothing dispatches: then the time of that reservation,
// from which the vendor's window runs.
func TestFirstAttemptAt(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	rec, err := m.store.Lookup(t.Context(), testScope, k)
	if err != nil || !rec.FirstAttemptAt.Equal(rec.CreatedAt) || !rec.CreatedAt.Equal(t0) {
		t.Fatalf("fresh: first attempt %v, created %v, %v", rec.FirstAttemptAt, rec.CreatedAt, err)
	}
	if _, err := m.store.Finalize(t.Context(), idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 1, NeverSent: true}); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Minute)
	m.mr.SetTime(later)
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	rec, err = m.store.Lookup(t.Context(), testScope, k)
	if err != nil || !rec.FirstAttemptAt.Equal(later) || !rec.CreatedAt.Equal(t0) {
		t.Fatalf("after a slot that sent nothing dispatched: first attempt %v, created %v, %v", rec.FirstAttemptAt, rec.CreatedAt, err)
	}
}
