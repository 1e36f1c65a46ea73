package redisstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// indexScores reads every entry of testScope's workspace's index buckets,
// checking that each lies in the bucket of its record's slot.
func (m *mini) indexScores(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, bk := range m.mr.Keys() {
		if !strings.HasPrefix(bk, m.store.indexKey(testScope.Workspace)+":") {
			continue
		}
		members, err := m.mr.ZMembers(bk)
		if err != nil {
			t.Fatal(err)
		}
		for _, mem := range members {
			sc, err := m.mr.ZScore(bk, mem)
			if err != nil {
				t.Fatal(err)
			}
			var im indexMember
			if err := json.Unmarshal([]byte(mem), &im); err == nil {
				if k, err := idempotency.ParseKey(im.Key); err == nil {
					if want := m.store.bucketOf(testScope.Workspace, m.recordKey(t, k)); bk != want {
						t.Fatalf("entry %s in bucket %s, want %s", mem, bk, want)
					}
				}
			}
			out[mem] = sc
		}
	}
	return out
}

func member(k idempotency.Key) string {
	return `{"c":"` + testScope.Connection + `","t":"` + testScope.Tool + `","k":"` + k.String() + `"}`
}

// TestIndexOnReservation: a claimed answer and a Reserve index the record,
// scored by its expiry; a final finalize removes the entry; a replay
// writes nothing.
func TestIndexOnReservation(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	res := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	want := float64(t0.Add(defaultUnknownRetention).UnixMilli())
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
	if ttl := m.mr.TTL(m.store.bucketOf(testScope.Workspace, m.recordKey(t, k))); ttl < defaultUnknownRetention {
		t.Fatalf("bucket TTL %v, want at least its newest entry's %v", ttl, defaultUnknownRetention)
	}
	mustFinalize(t, m.store, k, 2, effectspec.Accepted, nil)
	if _, ok := m.indexScores(t)[member(k)]; ok {
		t.Fatal("a final record keeps its index entry")
	}
	before := m.snapshot(t)
	mustClaim(t, m.store, claimReq(k), idempotency.StatusReplay)
	if m.snapshot(t) != before {
		t.Fatal("a replay wrote")
	}
}

// TestIndexWritesOnlyWhereDue: in_progress, held, a refusal, a stale
// finalize write nothing, the index included; an approval's reservation
// indexes the record; a prune removes expired entries of the bucket.
func TestIndexWritesOnlyWhereDue(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	ctx := context.Background()
	k := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	snap := m.snapshot(t)
	mustClaim(t, m.store, claimReq(k), idempotency.StatusInProgress)
	refused := claimReq(idempotency.NewKey())
	refused.Refuse = true
	mustClaim(t, m.store, refused, idempotency.StatusRefused)
	if m.snapshot(t) != snap {
		t.Fatal("in_progress or a refusal wrote")
	}
	m.mr.SetTime(t0.Add(2 * time.Second))
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed) // takeover, token 2
	snap = m.snapshot(t)
	if _, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Accepted}); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("stale finalize: %v", err)
	}
	if m.snapshot(t) != snap {
		t.Fatal("a stale finalize wrote")
	}

	held := claimReq(idempotency.NewKey())
	held.ApprovalRequired = true
	res := mustClaim(t, m.store, held, idempotency.StatusHeld)
	if _, ok := m.indexScores(t)[member(held.Key)]; ok {
		t.Fatal("a held record is indexed")
	}
	if _, err := m.store.Decide(ctx, idempotency.DecideRequest{Ticket: res.Ticket, Approve: true}); err != nil {
		t.Fatal(err)
	}
	held.ApprovalRequired, held.Ticket = false, res.Ticket
	mustClaim(t, m.store, held, idempotency.StatusClaimed)
	if _, ok := m.indexScores(t)[member(held.Key)]; !ok {
		t.Fatal("an approved call's reservation is not indexed")
	}

	// An expired entry in a bucket goes with the next reservation there.
	rk := m.recordKey(t, k)
	bk := m.store.bucketOf(testScope.Workspace, rk)
	if _, err := m.mr.ZAdd(bk, 1, "expired"); err != nil {
		t.Fatal(err)
	}
	m.mr.SetTime(t0.Add(4 * time.Second))
	if _, err := m.store.Reserve(ctx, idempotency.ReserveRequest{Scope: testScope, Key: k, Token: 2}); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("reserve after the lease: %v", err) // lapsed: no reservation, no prune
	}
	if ok, _ := m.mr.SortedSet(bk); ok["expired"] == 0 {
		t.Fatal("a refused reserve pruned")
	}
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed) // token 3
	if ok, _ := m.mr.SortedSet(bk); ok["expired"] != 0 {
		t.Fatal("a reservation did not prune an expired entry")
	}
}

// TestFinalRemovesEntry: each way a record becomes final (finalize
// accepted or definitely_rejected, settle, deny) removes its entry in its
// own script, one round trip.
func TestFinalRemovesEntry(t *testing.T) {
	m := newMini(t, Options{})
	ctx := context.Background()
	for _, outcome := range []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected} {
		k := idempotency.NewKey()
		mustFinalize(t, m.store, k, mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed).Token, outcome, nil)
		if _, ok := m.indexScores(t)[member(k)]; ok {
			t.Fatalf("%s keeps its entry", outcome)
		}
	}
	k := idempotency.NewKey()
	mustFinalize(t, m.store, k, mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed).Token, effectspec.Unknown, nil)
	if _, ok := m.indexScores(t)[member(k)]; !ok {
		t.Fatal("an unknown finalize dropped the entry")
	}
	if _, err := m.store.Settle(ctx, idempotency.SettleRequest{Scope: testScope, Key: k, Attempts: 1, Outcome: effectspec.Accepted, By: "ops"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.indexScores(t)[member(k)]; ok {
		t.Fatal("a settled record keeps its entry")
	}
	held := claimReq(idempotency.NewKey())
	held.ApprovalRequired = true
	res := mustClaim(t, m.store, held, idempotency.StatusHeld)
	// A held record has no entry; one put there is removed by the denial.
	rk := m.recordKey(t, held.Key)
	if _, err := m.mr.ZAdd(m.store.bucketOf(testScope.Workspace, rk), 1e15, member(held.Key)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.store.Decide(ctx, idempotency.DecideRequest{Ticket: res.Ticket, Approve: false}); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.indexScores(t)[member(held.Key)]; ok {
		t.Fatal("a denied record keeps its entry")
	}
}

// TestBrokenBucketWritesNothing: a claim whose bucket cannot be written
// fails (do not send) and leaves no record, so no attempt stands unindexed;
// once the bucket is sound the re-sent claim reserves it.
func TestBrokenBucketWritesNothing(t *testing.T) {
	m := newMini(t, Options{})
	req := claimReq(idempotency.NewKey())
	req.OpID = idempotency.NewOpID()
	bk := m.store.bucketOf(testScope.Workspace, m.recordKey(t, req.Key))
	if err := m.mr.Set(bk, "not a sorted set"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.store.Claim(context.Background(), req); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("claim with a broken bucket: %v, want ErrStoreUnavailable", err)
	}
	if m.mr.Exists(m.recordKey(t, req.Key)) {
		t.Fatal("a claim that failed on its bucket wrote the record")
	}
	m.mr.Del(bk)
	if r := mustClaim(t, m.store, req, idempotency.StatusClaimed); r.Token != 1 || r.AlreadyApplied {
		t.Fatalf("re-sent claim: token %d, already applied %v; want 1, false", r.Token, r.AlreadyApplied)
	}
	if _, ok := m.indexScores(t)[member(req.Key)]; !ok {
		t.Fatal("the re-sent claim did not index the record")
	}
}

// TestLeaseExpiryKeepsEntry: a record the lease-expiry path turns unknown
// keeps its entry, scored by the record's new expiry, as does a finalize
// that reports unknown; the late finalize of its owner removes it.
func TestLeaseExpiryKeepsEntry(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	req := claimReq(idempotency.NewKey())
	req.Binding = effectspec.BindingUnsupported
	mustClaim(t, m.store, req, idempotency.StatusClaimed)
	m.mr.SetTime(t0.Add(2 * time.Second))
	mustClaim(t, m.store, req, idempotency.StatusOutcomeUnknown)
	if got, want := m.indexScores(t)[member(req.Key)], float64(t0.Add(2*time.Second+defaultUnknownRetention).UnixMilli()); got != want {
		t.Fatalf("entry after the lease-expiry path: score %v, want %v", got, want)
	}
	m.mr.SetTime(t0.Add(3 * time.Second))
	mustFinalize(t, m.store, req.Key, 1, effectspec.Accepted, nil)
	if _, ok := m.indexScores(t)[member(req.Key)]; ok {
		t.Fatal("the owner's final finalize left the entry")
	}
}

// TestListRepairsIndex: entries whose record is gone or final are dropped;
// live in-flight ones and malformed ones are handled without failing.
func TestListRepairsIndex(t *testing.T) {
	m := newMini(t, Options{})
	ctx := context.Background()
	unknown, final, gone, live := idempotency.NewKey(), idempotency.NewKey(), idempotency.NewKey(), idempotency.NewKey()
	mustFinalize(t, m.store, unknown, mustClaim(t, m.store, claimReq(unknown), idempotency.StatusClaimed).Token, effectspec.Unknown, nil)
	mustFinalize(t, m.store, final, mustClaim(t, m.store, claimReq(final), idempotency.StatusClaimed).Token, effectspec.Accepted, nil)
	mustClaim(t, m.store, claimReq(gone), idempotency.StatusClaimed)
	m.mr.Del(m.recordKey(t, gone))
	mustClaim(t, m.store, claimReq(live), idempotency.StatusClaimed)
	// A malformed entry, and one of a final record.
	for _, e := range []struct{ bucket, member string }{
		{m.store.bucketKey(testScope.Workspace, 0), `{"t":"x","k":"idt_not a key"}`},
		{m.store.bucketOf(testScope.Workspace, m.recordKey(t, final)), member(final)},
	} {
		if _, err := m.mr.ZAdd(e.bucket, 1e15, e.member); err != nil {
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
		t.Fatalf("index after listing holds %d entries, want 2 (unknown and live): %v", len(idx), idx)
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
	e := listCursor{pos: 1 + keySlot(m.recordKey(t, k)), mid: true, score: "1", member: member(k)}
	if err := m.store.drop(context.Background(), testScope.Workspace, e); err != nil {
		t.Fatal(err)
	}
	if _, ok := m.indexScores(t)[member(k)]; !ok {
		t.Fatal("a drop with a stale score removed the entry")
	}
}

// keyInSlot returns a fresh key whose record (testScope) lives in slot.
func keyInSlot(t *testing.T, m *mini, slot int) idempotency.Key {
	t.Helper()
	for {
		k := idempotency.NewKey()
		if keySlot(m.recordKey(t, k)) == slot {
			return k
		}
	}
}

// unknownRecord makes an unknown record of k.
func unknownRecord(t *testing.T, m *mini, k idempotency.Key) {
	t.Helper()
	mustFinalize(t, m.store, k, mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed).Token, effectspec.Unknown, nil)
}

// listAll pages through the workspace's unknown records, limit at a time.
func listAll(t *testing.T, s *Store, limit int) (keys []idempotency.Key, pages int) {
	t.Helper()
	cursor := ""
	for pages = 1; pages < 10000; pages++ {
		p, err := s.ListUnknown(context.Background(), idempotency.ListRequest{Workspace: testScope.Workspace, Cursor: cursor, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Records) > limit {
			t.Fatalf("page of %d, limit %d", len(p.Records), limit)
		}
		for _, r := range p.Records {
			keys = append(keys, r.Record.Key)
		}
		if p.Cursor == "" {
			return keys, pages
		}
		cursor = p.Cursor
	}
	t.Fatal("the cursor never ends")
	return nil, 0
}

// TestListManyBuckets: records spread over slots (in several batches of
// buckets), some sharing a bucket, with final records between them, are
// each listed once at every page size, in listing order.
func TestListManyBuckets(t *testing.T) {
	m := newMini(t, Options{})
	want := map[idempotency.Key]bool{}
	// Three unknown records in each of a few slots, one in each of many;
	// final ones in between.
	for _, slot := range []int{0, 5, listBatch - 2, listBatch - 1, listBatch, 3 * listBatch, clusterSlots - 1} {
		for range 3 {
			k := keyInSlot(t, m, slot)
			unknownRecord(t, m, k)
			want[k] = true
		}
		k := keyInSlot(t, m, slot)
		mustFinalize(t, m.store, k, mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed).Token, effectspec.Accepted, nil)
	}
	for range 40 {
		k := idempotency.NewKey()
		unknownRecord(t, m, k)
		want[k] = true
	}
	for _, limit := range []int{1, 2, 7, idempotency.MaxPageSize} {
		got, pages := listAll(t, m.store, limit)
		if len(got) != len(want) {
			t.Fatalf("limit %d: listed %d records, want %d", limit, len(got), len(want))
		}
		seen := map[idempotency.Key]bool{}
		last := -1
		for _, k := range got {
			if !want[k] || seen[k] {
				t.Fatalf("limit %d: %s listed twice or not unknown", limit, k)
			}
			seen[k] = true
			s := keySlot(m.recordKey(t, k))
			if s < last {
				t.Fatalf("limit %d: slot %d listed after slot %d", limit, s, last)
			}
			last = s
		}
		if wantPages := (len(want) + limit - 1) / limit; pages != wantPages {
			t.Fatalf("limit %d: %d pages, want %d", limit, pages, wantPages)
		}
	}
}

// TestListPreviousIndex: records indexed by a previous release in its
// per-workspace key are listed (first) until that key is empty; a record
// indexed there and in its bucket is listed once, and its old entry goes; a
// cursor of the previous release continues in the old key.
func TestListPreviousIndex(t *testing.T) {
	m := newMini(t, Options{})
	ctx := context.Background()
	old, both, fresh := idempotency.NewKey(), idempotency.NewKey(), idempotency.NewKey()
	for _, k := range []idempotency.Key{old, both, fresh} {
		unknownRecord(t, m, k)
	}
	ik := m.store.indexKey(testScope.Workspace)
	score := float64(t0.Add(defaultUnknownRetention).UnixMilli())
	// As a previous release left them: old only in the old key, both in
	// both.
	m.mr.ZRem(m.store.bucketOf(testScope.Workspace, m.recordKey(t, old)), member(old))
	for _, k := range []idempotency.Key{old, both} {
		if _, err := m.mr.ZAdd(ik, score, member(k)); err != nil {
			t.Fatal(err)
		}
	}
	p, err := m.store.ListUnknown(ctx, idempotency.ListRequest{Workspace: testScope.Workspace, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 1 || p.Records[0].Record.Key != old {
		t.Fatalf("first page: %+v, want the old key's record first", p.Records)
	}
	got, _ := listAll(t, m.store, 2)
	if len(got) != 3 {
		t.Fatalf("listed %v, want each of 3 records once", got)
	}
	seen := map[idempotency.Key]bool{}
	for _, k := range got {
		if seen[k] {
			t.Fatalf("%s listed twice", k)
		}
		seen[k] = true
	}
	if ms, _ := m.mr.ZMembers(ik); len(ms) != 1 || ms[0] != member(old) {
		t.Fatalf("old key holds %q, want only the record indexed nowhere else", ms)
	}
	// A cursor of the previous release: score and member in hex.
	c := strconv.FormatFloat(score, 'f', -1, 64) + ":" + hex.EncodeToString([]byte(member(old)))
	p, err = m.store.ListUnknown(ctx, idempotency.ListRequest{Workspace: testScope.Workspace, Cursor: c})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 2 {
		t.Fatalf("after an old cursor: %d records, want the 2 in buckets", len(p.Records))
	}
	// Once the old record is final, its entry goes and the key with it.
	if _, err := m.store.Settle(ctx, idempotency.SettleRequest{Scope: testScope, Key: old, Attempts: 1, Outcome: effectspec.Accepted, By: "ops"}); err != nil {
		t.Fatal(err)
	}
	listAll(t, m.store, 10)
	if m.mr.Exists(ik) {
		t.Fatal("the old key outlived its last entry")
	}
}

// TestSettleCorruptResolution: a resolution field that cannot be read is a
// corrupt record, not a guess.
func TestSettleCorruptResolution(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	mustFinalize(t, m.store, k, mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed).Token, effectspec.Unknown, nil)
	rec, err := m.store.Settle(context.Background(), idempotency.SettleRequest{Scope: testScope, Key: k, Attempts: 1,
		Outcome: effectspec.Accepted, By: "ops", Note: "a note"})
	if err != nil {
		t.Fatal(err)
	}
	if r := rec.Resolution; r == nil || r.At != t0 || r.By != "ops" || r.Note != "a note" || r.Outcome != effectspec.Accepted {
		t.Fatalf("resolution %+v, want by ops at the Redis time", r)
	}
	m.mr.HSet(m.recordKey(t, k), "R", "ops")
	if _, err := m.store.Lookup(context.Background(), testScope, k); !errors.Is(err, errCorruptRecord) {
		t.Fatalf("lookup of a bad resolution: %v, want errCorruptRecord", err)
	}
}
