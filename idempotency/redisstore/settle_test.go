package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

func (m *mini) indexScores(t *testing.T) map[string]float64 {
	t.Helper()
	ik := m.store.indexKey(testScope.Workspace)
	if !m.mr.Exists(ik) {
		return map[string]float64{}
	}
	members, err := m.mr.ZMembers(ik)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mem := range members {
		sc, err := m.mr.ZScore(ik, mem)
		if err != nil {
			t.Fatal(err)
		}
		out[mem] = sc
	}
	return out
}

func member(k idempotency.Key) string {
	return `{"c":"` + testScope.Connection + `","t":"` + testScope.Tool + `","k":"` + k.String() + `"}`
}

// TestIndexOnReservation: a claimed answer and a Reserve index the record,
// scored by its expiry; a replay or a refusal writes nothing.
func TestIndexOnReservation(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	res := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	want := float64(t0.Add(DefaultUnknownRetention).UnixMilli())
	if got := m.indexScores(t)[member(k)]; got != want {
		t.Fatalf("index score after claim: %v, want %v (the record's expiry)", got, want)
	}
	m.mr.SetTime(t0.Add(time.Second))
	if _, err := m.store.Reserve(context.Background(), idempotency.ReserveRequest{Scope: testScope, Key: k, Token: res.Token}); err != nil {
		t.Fatal(err)
	}
	if got := m.indexScores(t)[member(k)]; got != want+1000 {
		t.Fatalf("index score after reserve: %v, want %v", got, want+1000)
	}
	mustFinalize(t, m.store, k, 2, idempotency.StateAccepted, nil)
	if _, ok := m.indexScores(t)[member(k)]; ok {
		t.Fatal("a final record keeps its index entry")
	}
	before := m.snapshot(t)
	mustClaim(t, m.store, claimReq(k), idempotency.StatusReplay)
	if m.snapshot(t) != before {
		t.Fatal("a replay wrote")
	}
}

// TestIndexFailureDoesNotSend: when the index cannot be written, the claim
// fails (do not send) and its reservation stands: the re-sent claim answers
// already applied and indexes it.
func TestIndexFailureDoesNotSend(t *testing.T) {
	m := newMini(t, Options{})
	ik := m.store.indexKey(testScope.Workspace)
	if err := m.mr.Set(ik, "not a sorted set"); err != nil {
		t.Fatal(err)
	}
	req := claimReq(idempotency.NewKey())
	req.Binding = effectspec.BindingUnsupported
	req.OpID = idempotency.NewOpID()
	if _, err := m.store.Claim(context.Background(), req); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("claim with a broken index: %v, want ErrStoreUnavailable", err)
	}
	m.mr.Del(ik)
	r := mustClaim(t, m.store, req, idempotency.StatusClaimed)
	if r.Token != 1 || !r.AlreadyApplied {
		t.Fatalf("re-sent claim: token %d, already applied %v; want 1, true", r.Token, r.AlreadyApplied)
	}
	if _, ok := m.indexScores(t)[member(req.Key)]; !ok {
		t.Fatal("the re-sent claim did not index the record")
	}
}

// TestOutcomeUnknownIndexes: an unknown record that was never indexed (its
// claimer gave up) is indexed by the next claim that finds it.
func TestOutcomeUnknownIndexes(t *testing.T) {
	m := newMini(t, Options{})
	req := claimReq(idempotency.NewKey())
	req.Binding = effectspec.BindingUnsupported
	mustFinalize(t, m.store, req.Key, mustClaim(t, m.store, req, idempotency.StatusClaimed).Token, idempotency.StateUnknown, nil)
	m.mr.Del(m.store.indexKey(testScope.Workspace))
	mustClaim(t, m.store, req, idempotency.StatusOutcomeUnknown)
	if _, ok := m.indexScores(t)[member(req.Key)]; !ok {
		t.Fatal("an outcome_unknown answer did not index the record")
	}
}

// TestListRepairsIndex: entries whose record is gone or final are dropped;
// live in-flight ones and malformed ones are handled without failing.
func TestListRepairsIndex(t *testing.T) {
	m := newMini(t, Options{})
	ctx := context.Background()
	unknown, final, gone, live := idempotency.NewKey(), idempotency.NewKey(), idempotency.NewKey(), idempotency.NewKey()
	mustFinalize(t, m.store, unknown, mustClaim(t, m.store, claimReq(unknown), idempotency.StatusClaimed).Token, idempotency.StateUnknown, nil)
	mustFinalize(t, m.store, final, mustClaim(t, m.store, claimReq(final), idempotency.StatusClaimed).Token, idempotency.StateAccepted, nil)
	mustClaim(t, m.store, claimReq(gone), idempotency.StatusClaimed)
	m.mr.Del(m.recordKey(t, gone))
	mustClaim(t, m.store, claimReq(live), idempotency.StatusClaimed)
	ik := m.store.indexKey(testScope.Workspace)
	// A malformed entry, and one a finalize failed to remove.
	for _, mem := range []string{`{"t":"x","k":"idt_not a key"}`, member(final)} {
		if _, err := m.mr.ZAdd(ik, 1e15, mem); err != nil {
			t.Fatal(err)
		}
	}
	p, err := m.store.ListUnknown(ctx, idempotency.ListRequest{Workspace: testScope.Workspace})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 1 || p.Records[0].Record.Key != unknown || p.Cursor != "" {
		t.Fatalf("listing: %d records, cursor %q; want only the unknown one", len(p.Records), p.Cursor)
	}
	idx := m.indexScores(t)
	if len(idx) != 2 {
		t.Fatalf("index after listing holds %d entries, want 2 (unknown and live)", len(idx))
	}
	for _, k := range []idempotency.Key{unknown, live} {
		if _, ok := idx[member(k)]; !ok {
			t.Fatalf("listing dropped the entry of a live record")
		}
	}
}

// TestDropKeepsReindexed: an entry read before its record was made again
// (its score rose) is not dropped.
func TestDropKeepsReindexed(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	ik := m.store.indexKey(testScope.Workspace)
	if err := m.store.drop(context.Background(), ik, member(k), "1"); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.indexScores(t)[member(k)]; !ok {
		t.Fatal("a drop with a stale score removed the entry")
	}
}

// TestSettleCorruptResolution: a resolution field that cannot be read is a
// corrupt record, not a guess.
func TestSettleCorruptResolution(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	mustFinalize(t, m.store, k, mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed).Token, idempotency.StateUnknown, nil)
	rec, err := m.store.Settle(context.Background(), idempotency.SettleRequest{Scope: testScope, Key: k, Attempts: 1,
		Outcome: idempotency.StateAccepted, By: "ops", Note: "a note"})
	if err != nil {
		t.Fatal(err)
	}
	if r := rec.Resolution; r == nil || r.At != t0 || r.By != "ops" || r.Note != "a note" || r.Outcome != idempotency.StateAccepted {
		t.Fatalf("resolution %+v, want by ops at the Redis time", r)
	}
	m.mr.HSet(m.recordKey(t, k), "R", "ops")
	if _, err := m.store.Lookup(context.Background(), testScope, k); !errors.Is(err, ErrCorruptRecord) {
		t.Fatalf("lookup of a bad resolution: %v, want ErrCorruptRecord", err)
	}
}
