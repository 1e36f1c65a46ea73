package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

const markerName = "obol:meta:data_lost"

// wantDataLost fails unless a claim is refused for a loss of data, writing
// no record.
func wantDataLost(t *testing.T, s *Store, m *mini) {
	t.Helper()
	k := idempotency.NewKey()
	_, err := s.Claim(ctx, claimReq(k))
	if !errors.Is(err, idempotency.ErrStoreDataLost) {
		t.Fatalf("claim after the loss: %v, want idempotency.ErrStoreDataLost", err)
	}
	if r, code := idempotency.Reason(err); r != "store_data_lost" || code != 503 {
		t.Fatalf("Reason = %s %d, want store_data_lost 503", r, code)
	}
	if m != nil && m.mr.Exists(m.recordKey(t, k)) {
		t.Fatal("a refused claim wrote its record")
	}
}

// TestDataLossAfterFlush: a FLUSHALL under a running store is seen at its
// next reading: claims are refused, Health says store_data_lost, the
// marker is written and the loss notified once; a store started later starts stopped; an acknowledgement lets
// both claim again (the other at its next reading).
func TestDataLossAfterFlush(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	advance := manualClock(m.store)
	var notified atomic.Int32
	m.store.NotifyDataLoss(func(err error) {
		if errors.Is(err, idempotency.ErrStoreDataLost) {
			notified.Add(1)
		}
	})
	mustClaim(t, m.store, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	if m.store.DataLoss().Lost || notified.Load() != 0 {
		t.Fatal("a loss before any")
	}

	m.mr.FlushAll()
	advance(time.Second)
	wantDataLost(t, m.store, m)
	if v, err := m.mr.Get(markerName); err != nil || !strings.HasPrefix(v, "lost:") {
		t.Fatalf("marker %q, %v; want a recorded loss", v, err)
	}
	var ue *idempotency.UnhealthyError
	if err := m.store.Health(ctx); !errors.As(err, &ue) || ue.Reason != "store_data_lost" {
		t.Fatalf("Health: %v, want store_data_lost", err)
	}
	if l := m.store.DataLoss(); !l.Lost || !strings.Contains(l.Detail, "meta:sentinel:") {
		t.Fatalf("idempotency.DataLoss %+v", l)
	}
	advance(time.Second)
	wantDataLost(t, m.store, m)
	if n := notified.Load(); n != 1 {
		t.Fatalf("notified %d times, want 1", n)
	}

	// A store that starts now honours the marker, although its own
	// sentinels are fine.
	later, err := New(ctx, m.client, Options{Lease: time.Second, SkipEvictionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	laterAdvance := manualClock(later)
	wantDataLost(t, later, m)
	var laterNotified atomic.Int32
	later.NotifyDataLoss(func(error) { laterNotified.Add(1) })
	if laterNotified.Load() != 1 {
		t.Fatal("a store started under the marker was not notified at once")
	}

	ack, err := m.store.AcknowledgeDataLoss(ctx)
	if err != nil || !ack.Acknowledged || ack.Sentinels != 1 || !strings.Contains(ack.Detail, "sentinel") {
		t.Fatalf("acknowledge: %+v, %v", ack, err)
	}
	if v, _ := m.mr.Get(markerName); !strings.HasPrefix(v, "ack:") {
		t.Fatalf("marker after the acknowledgement %q", v)
	}
	if v, _ := m.mr.Get(scopeKey); v != "1" {
		t.Fatalf("scope version after the acknowledgement %q, want it restored", v)
	}
	// The store started during the loss wrote no deployment id: the
	// acknowledging store's is the fleet's again.
	if v, _ := m.mr.Get("obol:meta:deployment"); v != m.store.Deployment() {
		t.Fatalf("deployment id after the acknowledgement %q, want the acknowledging store's %s", v, m.store.Deployment())
	}
	mustClaim(t, m.store, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	// The other store claims again once it has read the acknowledgement.
	wantDataLost(t, later, m)
	laterAdvance(time.Second)
	mustClaim(t, later, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	advance(time.Second)
	mustClaim(t, m.store, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	if again, err := m.store.AcknowledgeDataLoss(ctx); err != nil || again.Acknowledged {
		t.Fatalf("a second acknowledgement: %+v, %v; want nothing to acknowledge", again, err)
	}

	// A loss after the acknowledgement is a loss again, for both.
	m.mr.Del(sentinelKey("obol:", 0))
	advance(time.Second)
	wantDataLost(t, m.store, m)
	if notified.Load() != 2 {
		t.Fatalf("notified %d times after a second loss, want 2", notified.Load())
	}
	laterAdvance(time.Second)
	wantDataLost(t, later, m)
}

// TestFinalizeGoesOnAfterLoss: a loss stops claims only; the call in flight
// renews its lease and finalizes.
func TestFinalizeGoesOnAfterLoss(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	advance := manualClock(m.store)
	k := idempotency.NewKey()
	res := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	m.mr.Del(sentinelKey("obol:", 0)) // the sentinel's data lost, the record kept
	advance(time.Second)
	wantDataLost(t, m.store, m)
	if _, err := m.store.Renew(ctx, idempotency.RenewRequest{Scope: testScope, Key: k, Token: res.Token, Incarnation: res.Incarnation}); err != nil {
		t.Fatalf("renew under the loss: %v", err)
	}
	rec := mustFinalize(t, m.store, k, res.Token, effectspec.Accepted, &idempotency.StoredResult{Status: 201})
	if rec.State != effectspec.Accepted {
		t.Fatalf("finalized %s", rec.State)
	}
	// The fleet's keys, gone with the data, are restored by the
	// acknowledgement.
	m.mr.Del(scopeKey)
	m.mr.Del("obol:meta:deployment")
	if ack, err := m.store.AcknowledgeDataLoss(ctx); err != nil || !ack.Acknowledged {
		t.Fatalf("acknowledge: %+v, %v", ack, err)
	}
	if v, _ := m.mr.Get("obol:meta:deployment"); v != m.store.Deployment() {
		t.Fatalf("deployment id after the acknowledgement %q, want %s", v, m.store.Deployment())
	}
	if v, _ := m.mr.Get(scopeKey); v != "1" {
		t.Fatalf("scope version after the acknowledgement %q", v)
	}
}

// TestSentinelPlacedAgainIsLoss: Redis lost its data and a gateway started
// on it (placing a fresh sentinel and the scope version) before the
// running store read again: the changed value is a loss.
func TestSentinelPlacedAgainIsLoss(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	advance := manualClock(m.store)
	m.mr.FlushAll()
	if _, err := New(ctx, m.client, Options{SkipEvictionCheck: true}); err != nil {
		t.Fatal(err)
	}
	if !m.mr.Exists(sentinelKey("obol:", 0)) {
		t.Fatal("the new store placed no sentinel")
	}
	advance(time.Second)
	wantDataLost(t, m.store, m)
	if l := m.store.DataLoss(); !strings.Contains(l.Detail, "placed again") {
		t.Fatalf("detail %q", l.Detail)
	}
}

// TestScopeVersionMovesAreNoLoss: a scope version that changes, closes, is
// advanced or deleted is a scope matter, never a loss of data.
func TestScopeVersionMovesAreNoLoss(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	advance := manualClock(m.store)
	for _, v := range []string{"1 closing", "2", ""} {
		if v == "" {
			m.mr.Del(scopeKey)
		} else {
			m.mr.Set(scopeKey, v)
		}
		advance(time.Second)
		_, err := m.store.Claim(ctx, claimReq(idempotency.NewKey()))
		if errors.Is(err, idempotency.ErrStoreDataLost) || m.store.DataLoss().Lost {
			t.Fatalf("scope version %q: %v, a loss", v, err)
		}
		if v != "" && !errors.Is(err, idempotency.ErrScopeVersionChanged) {
			t.Fatalf("scope version %q: %v, want idempotency.ErrScopeVersionChanged", v, err)
		}
	}
	if m.mr.Exists(markerName) {
		t.Fatal("a marker without a loss")
	}
}

// TestLateLossNeverUndoesAcknowledgement: a store whose reading saw its
// sentinel gone before an acknowledgement it has not read does not turn
// the acknowledgement back into a loss.
func TestLateLossNeverUndoesAcknowledgement(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	m.mr.Set(markerName, "ack:another")
	m.store.scope.amnesia.vanished(ctx, sentinelKey("obol:", 0), "is gone", "")
	if v, _ := m.mr.Get(markerName); v != "ack:another" {
		t.Fatalf("marker %q, want the acknowledgement kept", v)
	}
	// One it knows is a marker it may overwrite.
	m.mr.Set(markerName, "ack:known")
	m.store.scope.amnesia.vanished(ctx, sentinelKey("obol:", 0), "is gone", "ack:known")
	if v, _ := m.mr.Get(markerName); !strings.HasPrefix(v, "lost:") {
		t.Fatalf("marker %q, want a loss", v)
	}
}

// TestSkipDataLossCheck: with the check off, a flush stops nothing and the
// store writes no sentinel.
func TestSkipDataLossCheck(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second, SkipDataLossCheck: true})
	advance := manualClock(m.store)
	if m.mr.Exists(sentinelKey("obol:", 0)) {
		t.Fatal("a sentinel with the check off")
	}
	m.mr.FlushAll()
	advance(time.Second)
	mustClaim(t, m.store, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	if err := m.store.Health(ctx); err != nil {
		t.Fatalf("Health: %v", err)
	}
	if _, err := m.store.AcknowledgeDataLoss(ctx); !errors.Is(err, idempotency.ErrInvalidRequest) {
		t.Fatalf("acknowledge with the check off: %v", err)
	}
}

// TestDeploymentIDConfigured: a configured id is stored when Redis holds
// none, survives a rebuilt Redis (the same vendor key for the same slot),
// and one that differs from the stored id refuses to start naming both,
// leaving the stored one.
func TestDeploymentIDConfigured(t *testing.T) {
	const dep = "3f9a1c07d2e84b6a9c5e0f1b7d3a2c48"
	const other = "8b2e4f6a1c3d5e7f9a0b2c4d6e8f1a3b5c7d9e0f"
	m := newMini(t, Options{DeploymentID: dep, SkipDataLossCheck: true})
	if m.store.Deployment() != dep {
		t.Fatalf("deployment %q, want the configured one", m.store.Deployment())
	}
	k := idempotency.NewKey()
	before := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed).VendorKey
	if _, err := New(ctx, m.client, Options{DeploymentID: other, SkipEvictionCheck: true}); !errors.Is(err, ErrDeploymentMismatch) ||
		!strings.Contains(err.Error(), dep) || !strings.Contains(err.Error(), other) {
		t.Fatalf("another configured id: %v, want ErrDeploymentMismatch naming both", err)
	}
	if v, _ := m.mr.Get("obol:meta:deployment"); v != dep {
		t.Fatalf("stored id %q after a refused start", v)
	}
	if s, err := New(ctx, m.client, Options{SkipEvictionCheck: true}); err != nil || s.Deployment() != dep {
		t.Fatalf("an unconfigured store: %v, deployment %v; want the stored one", err, s)
	}
	m.mr.FlushAll() // Redis rebuilt
	again, err := New(ctx, m.client, Options{DeploymentID: dep, SkipEvictionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	if after := mustClaim(t, again, claimReq(k), idempotency.StatusClaimed).VendorKey; after != before {
		t.Fatalf("vendor key after the rebuild %s, before %s", after, before)
	}
	// A stored 64-digit id is read by a store that configures none.
	m.mr.FlushAll()
	if _, err := New(ctx, m.client, Options{DeploymentID: other, SkipEvictionCheck: true}); err != nil {
		t.Fatal(err)
	}
	if s, err := New(ctx, m.client, Options{SkipEvictionCheck: true}); err != nil || s.Deployment() != other {
		t.Fatalf("reading a 40-digit id: %v", err)
	}
}

// TestDeploymentIDRefused: New refuses an id that is not random hex of the
// right length, before writing anything, and the error never quotes it.
func TestDeploymentIDRefused(t *testing.T) {
	m := newMini(t, Options{SkipDataLossCheck: true})
	m.mr.FlushAll()
	for _, id := range []string{
		"",                                 // valid: not configured
		"3f9a1c07d2e84b6a9c5e0f1b7d3a2c4",  // 31
		"3F9A1C07D2E84B6A9C5E0F1B7D3A2C48", // upper case
		"3f9a1c07d2e84b6a9c5e0f1b7d3a2c4g",
		strings.Repeat("0", 32),
		strings.Repeat("7", 64),
		strings.Repeat("deadbeef", 4),
		strings.Repeat("0123456789abcdef", 2),
		"0101010101010101010101010101010a", // 3 distinct digits
		strings.Repeat("3f9a1c07d2e84b6a", 5)[:65],
	} {
		err := Options{DeploymentID: id}.validate()
		if id == "" {
			if err != nil {
				t.Fatalf("no id: %v", err)
			}
			continue
		}
		var fe *effectspec.FieldError
		if !errors.As(err, &fe) || fe.Field != "DeploymentID" || strings.Contains(err.Error(), id) {
			t.Fatalf("%q: %v, want a FieldError of DeploymentID not quoting it", id, err)
		}
		if _, err := New(ctx, m.client, Options{DeploymentID: id, SkipEvictionCheck: true}); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("New with %q: %v", id, err)
		}
		if keys := m.mr.Keys(); len(keys) != 0 {
			t.Fatalf("a refused id wrote %v", keys)
		}
	}
	if err := ValidateDeploymentID("3f9a1c07d2e84b6a9c5e0f1b7d3a2c48"); err != nil {
		t.Fatalf("a random id: %v", err)
	}
}

// TestDataLossRestartRedis: a real Redis without persistence restarted
// under a running store: Health sees the loss once the server is back (the
// unreachable node has the sentinels read again at once), claims are
// refused, an acknowledgement lets them go on.
func TestDataLossRestartRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := realClient(t, srv.Addr())
	s := realStore(t, c, Options{Lease: 2 * time.Second})
	mustClaim(t, s, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	logReadingCost(t, s)
	srv.Restart()
	waitLost(t, s)
	wantDataLost(t, s, nil)
	if ack, err := s.AcknowledgeDataLoss(ctx); err != nil || !ack.Acknowledged {
		t.Fatalf("acknowledge: %+v, %v", ack, err)
	}
	mustClaim(t, s, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	if err := s.Health(ctx); err != nil {
		t.Fatalf("Health after the acknowledgement: %v", err)
	}
}

// waitLost polls Health (as a probe does) until it says store_data_lost;
// the lease bounds how long a loss may go unseen.
func waitLost(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(s.Lease() + 5*time.Second)
	for {
		hctx, cancel := context.WithTimeout(ctx, time.Second)
		err := s.Health(hctx)
		cancel()
		var ue *idempotency.UnhealthyError
		if errors.As(err, &ue) && ue.Reason == "store_data_lost" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the loss was not seen within a lease: Health %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestDataLossOneClusterMaster: on a 3-master Cluster each master holds a
// sentinel in its own slots, and losing one master's data (FLUSHALL on it
// alone) is seen; an acknowledgement places its sentinel again.
func TestDataLossOneClusterMaster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	c := realClient(t, cl.Addrs()...)
	s := realStore(t, c, Options{Prefix: "amn:", Lease: 2 * time.Second})
	slots, err := readClusterMap(ctx, c)
	if err != nil || len(slots) != 3 {
		t.Fatalf("slot map %v, %v", slots, err)
	}
	keys := s.scope.amnesia.watchedKeys()
	if len(keys) != 3 {
		t.Fatalf("watched %v, want one per master", keys)
	}
	for _, ranges := range slots {
		n := 0
		for _, k := range keys {
			if ranges.has(keySlot(k)) {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("a master holds %d of the sentinels %v", n, keys)
		}
	}
	logReadingCost(t, s)
	for i := 0; i < 20; i++ { // records on every master
		mustClaim(t, s, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	}
	if _, err := cl.Master(1).Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	waitLost(t, s)
	wantDataLost(t, s, nil)
	lost := s.DataLoss().Detail
	own := false
	for _, ranges := range slots {
		for _, k := range keys {
			if ranges.has(keySlot(k)) && strings.Contains(lost, k) {
				own = true
			}
		}
	}
	if !own {
		t.Fatalf("detail %q names no watched sentinel", lost)
	}
	if ack, err := s.AcknowledgeDataLoss(ctx); err != nil || !ack.Acknowledged || ack.Sentinels != 3 {
		t.Fatalf("acknowledge: %+v, %v", ack, err)
	}
	mustClaim(t, s, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
}

// TestSentinelFollowsSlotMigration: the slot of master 0's sentinel moves
// to master 1 (as redis-cli --cluster reshard moves it: IMPORTING,
// MIGRATING, MIGRATE, SETSLOT NODE). The moved sentinel is no loss; the
// next reading places a sentinel in master 0's remaining slots, so a loss
// of master 0's data is still seen.
func TestSentinelFollowsSlotMigration(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	c := realClient(t, cl.Addrs()...)
	s := realStore(t, c, Options{Prefix: "mig:", Lease: time.Second})
	id := func(i int) string {
		v, err := cl.Master(i).Do("CLUSTER", "MYID")
		if err != nil {
			t.Fatal(err)
		}
		return v.(string)
	}
	src, dst := id(0), id(1)
	slots, err := readClusterMap(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	var moved string
	for _, k := range s.scope.amnesia.watchedKeys() {
		if slots[src].has(keySlot(k)) {
			moved = k
		}
	}
	if moved == "" {
		t.Fatalf("no sentinel on master 0 among %v", s.scope.amnesia.watchedKeys())
	}
	slot := strconv.Itoa(keySlot(moved))
	do := func(i int, args ...string) {
		t.Helper()
		if _, err := cl.Master(i).Do(args...); err != nil {
			t.Fatalf("%v on master %d: %v", args, i, err)
		}
	}
	do(1, "CLUSTER", "SETSLOT", slot, "IMPORTING", src)
	do(0, "CLUSTER", "SETSLOT", slot, "MIGRATING", dst)
	host, port, _ := strings.Cut(cl.Master(1).Addr(), ":")
	// The slot's keys: the sentinel and the slot's generation sentinel.
	do(0, "MIGRATE", host, port, "", "0", "5000", "KEYS", moved, genKey("mig:", keySlot(moved)))
	for i := range 3 {
		do(i, "CLUSTER", "SETSLOT", slot, "NODE", dst)
	}
	cl.WaitOK(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		time.Sleep(1100 * time.Millisecond) // a lease: the next claim reads
		mustClaim(t, s, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
		if s.DataLoss().Lost {
			t.Fatalf("a migrated sentinel counted as a loss: %s", s.DataLoss().Detail)
		}
		if len(s.scope.amnesia.watchedKeys()) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sentinel placed on master 0 after its slot moved: %v", s.scope.amnesia.watchedKeys())
		}
	}
	if _, err := cl.Master(0).Do("FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	waitLost(t, s)
}

// logReadingCost logs what a reading costs (once per lease, on one claim):
// the scope version alone, and with the marker, the sentinels and, on a
// Cluster, CLUSTER SLOTS.
func logReadingCost(t *testing.T, s *Store) {
	t.Helper()
	const n = 200
	start := time.Now()
	for range n {
		if _, err := s.scope.get(ctx); err != nil {
			t.Fatal(err)
		}
	}
	alone := time.Since(start) / n
	start = time.Now()
	for range n {
		if err := s.scope.read(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("a reading: %v with the sentinels (%d), %v for the scope version alone", time.Since(start)/n, len(s.scope.amnesia.watchedKeys()), alone)
}
