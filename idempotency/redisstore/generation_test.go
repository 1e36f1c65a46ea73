package redisstore

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/scriptargs"
)

// unsupportedReq is a claim of a tool whose vendor cannot deduplicate: one
// that reached the vendor is never dispatched again.
func unsupportedReq(k idempotency.Key) idempotency.ClaimRequest {
	req := claimReq(k)
	req.Binding = effectspec.BindingUnsupported
	return req
}

// genName is the generation sentinel of k's record.
func (m *mini) genName(t *testing.T, k idempotency.Key) string {
	return m.store.genKeyOf(keySlot(m.recordKey(t, k)))
}

// withoutMarker is a snapshot without the data-lost marker's line, which a
// refusal for a loss writes.
func withoutMarker(snap string) string {
	var out []string
	for _, l := range strings.SplitAfter(snap, "\n") {
		if !strings.HasPrefix(l, markerName+" ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// genOf reads a generation sentinel.
func genOf(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	v, err := c.Do(ctx, c.B().Get().Key(key).Build()).AsInt64()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// TestGenerationRollback: Redis goes back to a state older than writes a
// running store saw (the records and the sentinel as they were before):
// the retries of those calls are refused store_data_lost at once, none is
// dispatched again, the marker records the loss and Health says so.
func TestGenerationRollback(t *testing.T) {
	m := newMini(t, Options{Lease: time.Hour}) // no reading of the sentinels in this test
	var keys []idempotency.Key
	before := map[string]int64{} // each slot's generation at the snapshot (0: none yet)
	for range 5 {
		k := idempotency.NewKey()
		if g, err := m.mr.Get(m.genName(t, k)); err == nil {
			before[m.genName(t, k)], _ = strconv.ParseInt(g, 10, 64)
		} else {
			before[m.genName(t, k)] = 0
		}
		keys = append(keys, k)
	}
	for _, k := range keys {
		res := mustClaim(t, m.store, unsupportedReq(k), idempotency.StatusClaimed)
		mustFinalize(t, m.store, k, res.Token, effectspec.Accepted, &idempotency.StoredResult{Status: 201})
		if g := genOf(t, m.client, m.genName(t, k)); g <= before[m.genName(t, k)] {
			t.Fatalf("a reservation left the generation at %d", g)
		}
	}
	// The rollback: the snapshot had none of these records.
	for _, k := range keys {
		m.mr.Del(m.recordKey(t, k))
	}
	for name, g := range before {
		if g == 0 {
			m.mr.Del(name)
		} else {
			m.mr.Set(name, strconv.FormatInt(g, 10))
		}
	}
	for i, k := range keys {
		_, err := m.store.Claim(ctx, unsupportedReq(k))
		if !errors.Is(err, idempotency.ErrStoreDataLost) {
			t.Fatalf("retry %d after the rollback: %v, want store_data_lost", i, err)
		}
		if m.mr.Exists(m.recordKey(t, k)) {
			t.Fatalf("retry %d wrote its record again", i)
		}
	}
	if l := m.store.DataLoss(); !l.Lost || !strings.Contains(l.Detail, "meta:gen:") {
		t.Fatalf("idempotency.DataLoss %+v", l)
	}
	if v, _ := m.mr.Get(markerName); !strings.HasPrefix(v, "lost:") {
		t.Fatalf("marker %q, want a recorded loss", v)
	}
	var ue *idempotency.UnhealthyError
	if err := m.store.Health(ctx); !errors.As(err, &ue) || ue.Reason != "store_data_lost" {
		t.Fatalf("Health: %v, want store_data_lost", err)
	}
}

// TestGenerationBehind: a slot's sentinel behind what the store saw is
// refused and named as a store gone back in time; nothing is written.
func TestGenerationBehind(t *testing.T) {
	m := newMini(t, Options{Lease: time.Hour})
	k := idempotency.NewKey()
	mustClaim(t, m.store, unsupportedReq(k), idempotency.StatusClaimed)
	g := genOf(t, m.client, m.genName(t, k))
	m.mr.Set(m.genName(t, k), strconv.FormatInt(g-1, 10))
	before := m.snapshot(t)
	if _, err := m.store.Claim(ctx, unsupportedReq(k)); !errors.Is(err, idempotency.ErrStoreDataLost) {
		t.Fatalf("claim: %v, want store_data_lost", err)
	}
	if l := m.store.DataLoss(); !strings.Contains(l.Detail, "behind") || !strings.Contains(l.Detail, "back in time") {
		t.Fatalf("idempotency.DataLoss %+v", l)
	}
	if after := withoutMarker(m.snapshot(t)); after != before {
		t.Fatalf("a refused claim wrote:\n%s\nwas\n%s", after, before)
	}
}

// TestGenerationGone: a Redis that came back empty under a running store is
// refused at the next claim, not a lease later: the sentinel is gone.
func TestGenerationGone(t *testing.T) {
	m := newMini(t, Options{Lease: time.Hour})
	k := idempotency.NewKey()
	mustClaim(t, m.store, unsupportedReq(k), idempotency.StatusClaimed)
	m.mr.FlushAll()
	if _, err := m.store.Claim(ctx, unsupportedReq(k)); !errors.Is(err, idempotency.ErrStoreDataLost) {
		t.Fatalf("the retry: %v, want store_data_lost", err)
	}
	if m.mr.Exists(m.recordKey(t, k)) {
		t.Fatal("the retry was dispatched again")
	}
	wantDataLost(t, m.store, m) // every claim from then on
	if l := m.store.DataLoss(); !strings.Contains(l.Detail, "is gone") {
		t.Fatalf("idempotency.DataLoss %+v", l)
	}
}

// TestGenerationReserveRefused: the second attempt of a cycle (Reserve) on a
// slot gone back in time is refused as a claim would be; nothing written.
func TestGenerationReserveRefused(t *testing.T) {
	m := newMini(t, Options{Lease: time.Hour})
	k := idempotency.NewKey()
	res := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	g := genOf(t, m.client, m.genName(t, k))
	m.mr.Set(m.genName(t, k), strconv.FormatInt(g-1, 10))
	before := m.snapshot(t)
	_, err := m.store.Reserve(ctx, idempotency.ReserveRequest{Scope: testScope, Key: k, Token: res.Token, Incarnation: res.Incarnation})
	if !errors.Is(err, idempotency.ErrStoreDataLost) {
		t.Fatalf("reserve: %v, want store_data_lost", err)
	}
	if after := withoutMarker(m.snapshot(t)); after != before {
		t.Fatalf("a refused reserve wrote:\n%s\nwas\n%s", after, before)
	}
}

// TestGenerationOnlyReservationsWrite: a replay, an in-progress answer and a
// refusal write nothing, the generation included; a reservation moves it
// and every reply teaches the store the current one.
func TestGenerationOnlyReservationsWrite(t *testing.T) {
	m := newMini(t, Options{Lease: time.Hour})
	k := idempotency.NewKey()
	res := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	before := m.snapshot(t)
	mustClaim(t, m.store, claimReq(k), idempotency.StatusInProgress)
	if after := m.snapshot(t); after != before {
		t.Fatalf("in_progress wrote:\n%s", after)
	}
	mustFinalize(t, m.store, k, res.Token, effectspec.Accepted, &idempotency.StoredResult{Status: 201})
	before = m.snapshot(t)
	mustClaim(t, m.store, claimReq(k), idempotency.StatusReplay)
	if after := m.snapshot(t); after != before {
		t.Fatalf("a replay wrote:\n%s", after)
	}
	// Another gateway's reservation moves the generation; this store learns
	// it from its next reply, a replay.
	m.mr.Set(m.genName(t, k), "40")
	mustClaim(t, m.store, claimReq(k), idempotency.StatusReplay)
	a := m.store.scope.amnesia.gens
	if seen := a.seen[a.index(keySlot(m.recordKey(t, k)))].Load(); seen != 40 {
		t.Fatalf("seen %d after a reply at 40", seen)
	}
}

// TestRequireInit: a store that must be initialised explicitly refuses an
// empty Redis (writing nothing), starts once Init ran, and Init is
// idempotent; Init refuses while a loss is unacknowledged, and a store
// that starts then writes neither scope version nor deployment id.
func TestRequireInit(t *testing.T) {
	const dep = "3f9a1c07d2e84b6a9c5e0f1b7d3a2c48"
	m := newMini(t, Options{SkipDataLossCheck: true})
	m.mr.FlushAll()
	opts := Options{RequireInit: true, SkipEvictionCheck: true, DeploymentID: dep}
	if _, err := New(ctx, m.client, opts); !errors.Is(err, ErrUninitialized) || !strings.Contains(err.Error(), "store init") {
		t.Fatalf("New on an empty Redis: %v, want ErrUninitialized", err)
	}
	if keys := m.mr.Keys(); len(keys) != 0 {
		t.Fatalf("a refused start wrote %v", keys)
	}
	res, err := Init(ctx, m.client, Options{DeploymentID: dep}, InitOptions{})
	if err != nil || !res.Wrote || res.Generations != clusterSlots || res.Deployment != dep || res.ScopeVersion != "1" {
		t.Fatalf("Init: %+v, %v", res, err)
	}
	if again, err := Init(ctx, m.client, Options{DeploymentID: dep}, InitOptions{}); err != nil || again.Wrote {
		t.Fatalf("Init again: %+v, %v; want nothing written", again, err)
	}
	s, err := New(ctx, m.client, opts)
	if err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)

	// A loss nobody acknowledged: Init refuses; a store starts stopped and
	// writes no fleet key; the acknowledgement restores its id.
	m.mr.FlushAll()
	m.mr.Set(markerName, "lost:1:x")
	if _, err := Init(ctx, m.client, Options{DeploymentID: dep}, InitOptions{}); !errors.Is(err, idempotency.ErrStoreDataLost) ||
		!strings.Contains(err.Error(), "acknowledge") {
		t.Fatalf("Init during a loss: %v", err)
	}
	stopped, err := New(ctx, m.client, opts)
	if err != nil {
		t.Fatalf("a start during a loss: %v", err)
	}
	wantDataLost(t, stopped, m)
	for _, k := range m.mr.Keys() {
		if k != markerName && !strings.HasPrefix(k, "obol:meta:sentinel:") {
			t.Fatalf("a store started during a loss wrote %s", k)
		}
	}
	m.mr.Set("obol:meta:deployment", "8b2e4f6a1c3d5e7f9a0b2c4d6e8f1a3b") // another gateway's
	if ack, err := stopped.AcknowledgeDataLoss(ctx); err != nil || !ack.Acknowledged {
		t.Fatalf("acknowledge: %+v, %v", ack, err)
	}
	if v, _ := m.mr.Get("obol:meta:deployment"); v != dep {
		t.Fatalf("deployment id after the acknowledgement %q, want the configured %s", v, dep)
	}
	mustClaim(t, stopped, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
}

// TestInitAdoptRecords: Init writes the scope version over records only
// when told to, and never names a Redis command to type by hand.
func TestInitAdoptRecords(t *testing.T) {
	m := newMini(t, Options{SkipDataLossCheck: true})
	mustClaim(t, m.store, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	m.mr.Del(scopeKey)
	_, err := Init(ctx, m.client, Options{}, InitOptions{})
	if !errors.Is(err, idempotency.ErrScopeVersionChanged) || !strings.Contains(err.Error(), "-adopt-records") || strings.Contains(err.Error(), "SET ") {
		t.Fatalf("Init over records: %v", err)
	}
	if _, err := New(ctx, m.client, Options{SkipEvictionCheck: true}); err == nil || strings.Contains(err.Error(), "SET ") {
		t.Fatalf("New over records: %v, want a refusal naming no Redis command", err)
	}
	if res, err := Init(ctx, m.client, Options{}, InitOptions{AdoptRecords: true}); err != nil || res.ScopeVersion != "1" {
		t.Fatalf("Init adopting: %+v, %v", res, err)
	}
}

// TestAcknowledgeLetsOthersResume: a rollback seen by one store stops the
// fleet (the marker); acknowledged through another store, whose
// generations are behind nothing, the first adopts the acknowledgement at
// its next reading, forgets what it remembered and claims again.
func TestAcknowledgeLetsOthersResume(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	advance := manualClock(m.store)
	other, err := New(ctx, m.client, Options{Lease: time.Second, SkipEvictionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	otherAdvance := manualClock(other)
	k := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	mustClaim(t, m.store, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	m.mr.Del(m.recordKey(t, k))
	m.mr.Set(m.genName(t, k), "0") // back in time
	if _, err := m.store.Claim(ctx, claimReq(k)); !errors.Is(err, idempotency.ErrStoreDataLost) {
		t.Fatalf("the retry: %v, want store_data_lost", err)
	}
	otherAdvance(time.Second)
	wantDataLost(t, other, m) // the marker
	if ack, err := other.AcknowledgeDataLoss(ctx); err != nil || !ack.Acknowledged {
		t.Fatalf("acknowledge: %+v, %v", ack, err)
	}
	mustClaim(t, other, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	wantDataLost(t, m.store, m) // until its next reading
	advance(time.Second)
	// Acknowledged, the retry of the lost call is dispatched again: that
	// is what acknowledging means.
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	mustClaim(t, m.store, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
}

// TestGenerationDebugReload: a real Redis reloads an older RDB (SAVE, N more
// calls of an unsupported tool, DEBUG RELOAD NOSAVE): each of the N
// retried is refused store_data_lost, none is dispatched again, and Health
// says store_data_lost.
func TestGenerationDebugReload(t *testing.T) {
	srv := redistest.Start(t, "--enable-debug-command", "yes")
	c := realClient(t, srv.Addr())
	s := realStore(t, c, Options{Lease: time.Hour})
	mustClaim(t, s, unsupportedReq(idempotency.NewKey()), idempotency.StatusClaimed)
	if err := c.Do(ctx, c.B().Save().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	const n = 20
	keys := make([]idempotency.Key, n)
	for i := range keys {
		keys[i] = idempotency.NewKey()
		res := mustClaim(t, s, unsupportedReq(keys[i]), idempotency.StatusClaimed)
		if _, err := s.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: keys[i], Token: res.Token,
			Incarnation: res.Incarnation, Outcome: effectspec.Accepted, Result: &idempotency.StoredResult{Status: 201}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Do(ctx, c.B().Arbitrary("DEBUG", "RELOAD", "NOSAVE").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		res, err := s.Claim(ctx, unsupportedReq(k))
		if !errors.Is(err, idempotency.ErrStoreDataLost) {
			t.Fatalf("retry %d after the reload: %+v, %v; want store_data_lost", i, res, err)
		}
	}
	var ue *idempotency.UnhealthyError
	if err := s.Health(ctx); !errors.As(err, &ue) || ue.Reason != "store_data_lost" {
		t.Fatalf("Health: %v, want store_data_lost", err)
	}
	for i, k := range keys {
		rk, _ := testScope.StorageKey(s.prefix, k)
		if e, err := c.Do(ctx, c.B().Exists().Key(rk).Build()).AsInt64(); err != nil || e != 0 {
			t.Fatalf("retry %d: its record exists (%d, %v): it was claimed again", i, e, err)
		}
	}
}

// TestGenerationCluster: on a 3-master Cluster every slot has its own
// sentinel, in that slot; a slot gone back in time is refused; a master
// that lost its data leaves a production store (RequireInit) to start
// stopped, and Init fills an empty Cluster's 16384 sentinels.
func TestGenerationCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	c := realClient(t, cl.Addrs()...)
	const dep = "3f9a1c07d2e84b6a9c5e0f1b7d3a2c48"
	opts := Options{Prefix: "gen:", Lease: time.Hour, RequireInit: true, DeploymentID: dep}
	if _, err := New(ctx, c, opts); !errors.Is(err, ErrUninitialized) {
		t.Fatalf("New on an empty Cluster: %v, want ErrUninitialized", err)
	}
	res, err := Init(ctx, c, opts, InitOptions{})
	if err != nil || res.Generations != clusterSlots {
		t.Fatalf("Init: %+v, %v", res, err)
	}
	start := time.Now()
	s := realStore(t, c, opts)
	t.Logf("New with RequireInit on a 3-master Cluster (every generation sentinel read): %v", time.Since(start))
	for sl := range clusterSlots {
		if keySlot(genKey("gen:", sl)) != sl {
			t.Fatalf("the sentinel of slot %d is in slot %d", sl, keySlot(genKey("gen:", sl)))
		}
	}
	var keys []idempotency.Key
	for range 30 { // every master
		k := idempotency.NewKey()
		mustClaim(t, s, unsupportedReq(k), idempotency.StatusClaimed)
		keys = append(keys, k)
	}
	rk, _ := testScope.StorageKey("gen:", keys[0])
	slot := keySlot(rk)
	if g := genOf(t, c, genKey("gen:", slot)); g < 2 {
		t.Fatalf("slot %d's generation %d after a reservation", slot, g)
	}
	if err := c.Do(ctx, c.B().Set().Key(genKey("gen:", slot)).Value("1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Del().Key(rk).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, unsupportedReq(keys[0])); !errors.Is(err, idempotency.ErrStoreDataLost) {
		t.Fatalf("the retry on a slot back in time: %v", err)
	}
	if ack, err := s.AcknowledgeDataLoss(ctx); err != nil || !ack.Acknowledged {
		t.Fatalf("acknowledge: %+v, %v", ack, err)
	}
	mustClaim(t, s, unsupportedReq(idempotency.NewKey()), idempotency.StatusClaimed)

	if _, err := cl.Master(1).Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	later, err := New(ctx, c, opts)
	if err != nil {
		t.Fatalf("a start with one master's data lost: %v", err)
	}
	if l := later.DataLoss(); !l.Lost || !strings.Contains(l.Detail, "generation sentinels") {
		t.Fatalf("idempotency.DataLoss %+v", l)
	}
	if _, err := Init(ctx, c, opts, InitOptions{}); !errors.Is(err, idempotency.ErrStoreDataLost) {
		t.Fatalf("Init during the loss: %v", err)
	}
}

// TestGenerationResetMeanwhile: a claim whose generation was read before an
// acknowledgement reset the store's generations proves no loss when it
// answers data_lost: it is store_unavailable (retry), the store keeps
// claiming and writes no marker.
func TestGenerationResetMeanwhile(t *testing.T) {
	m := newMini(t, Options{Lease: time.Hour})
	k := idempotency.NewKey()
	mustClaim(t, m.store, unsupportedReq(k), idempotency.StatusClaimed)
	c, args, err := m.store.claimPrep(unsupportedReq(idempotency.NewKey()))
	if err != nil {
		t.Fatal(err)
	}
	// The claim was prepared with the generation seen; an acknowledgement
	// resets them before its reply comes back, and the slot reads behind.
	m.mr.Set(m.store.genKeyOf(c.slot), "0")
	c.gen = 5
	args[slices.Index(scriptargs.ClaimSpec.Names(), "gen")] = "5"
	arr, err := m.store.sc.claim.lua.Exec(ctx, m.client, []string{c.key, c.bucket, c.pending, m.store.genKeyOf(c.slot)}, args).ToArray()
	if err != nil {
		t.Fatal(err)
	}
	m.store.scope.amnesia.gens.reset(false)
	_, err = m.store.genReply(ctx, c.slot, c.gen, c.epoch, arr)
	if err == nil || errors.Is(err, idempotency.ErrStoreDataLost) {
		t.Fatalf("a data_lost answer read across a reset: %v, want a retry, not a loss", err)
	}
	if m.store.DataLoss().Lost || m.mr.Exists(markerName) {
		t.Fatal("a reset meanwhile was taken for a loss")
	}
	// Without the reset the same answer is a loss.
	if _, err := m.store.genReply(ctx, c.slot, c.gen, m.store.scope.amnesia.gens.epoch.Load(), arr); !errors.Is(err, idempotency.ErrStoreDataLost) {
		t.Fatalf("data_lost in the same epoch: %v, want idempotency.ErrStoreDataLost", err)
	}
}
