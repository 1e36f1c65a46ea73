package redisstore

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

// Conformance under resharding: a real 3-master Cluster whose slots move
// between masters, one step of redis-cli --cluster reshard at a time, while
// the store works on keys of the moving slot (docs/DESIGN.md, "Scope and
// the Redis key").

// reshardEnv is a Cluster, a store on it and one record's slot.
type reshardEnv struct {
	cl       *redistest.Cluster
	c        rueidis.Client
	s        *Store
	key      idempotency.Key
	rk, bkt  string
	slot     int
	from, to int
}

func newReshardEnv(t *testing.T, cl *redistest.Cluster, opts Options) *reshardEnv {
	t.Helper()
	c := realClient(t, cl.Addrs()...)
	e := &reshardEnv{cl: cl, c: c, s: realStore(t, c, opts), key: idempotency.NewKey()}
	e.aim(t, e.key)
	return e
}

// aim points e at key's record: its slot, its owner and a target master.
func (e *reshardEnv) aim(t *testing.T, key idempotency.Key) {
	t.Helper()
	rk, err := testScope.StorageKey(e.s.prefix, key)
	if err != nil {
		t.Fatal(err)
	}
	e.key, e.rk, e.bkt, e.slot = key, rk, e.s.bucketOf(testScope.Workspace, rk), keySlot(rk)
	if e.from, err = e.cl.SlotOwner(e.slot); err != nil {
		t.Fatal(err)
	}
	e.to = (e.from + 1) % 3
}

// split asserts that the record and its bucket are on different sides of
// the migration, or missing: a command on both is answered TRYAGAIN by the
// source, or redirected (ASK) to the target, which answers TRYAGAIN.
func (e *reshardEnv) split(t *testing.T) {
	t.Helper()
	_, err := e.cl.Node(e.from).Do("EXISTS", e.rk, e.bkt)
	if err != nil && strings.HasPrefix(strings.TrimPrefix(err.Error(), "redistest: server replied: "), "ASK ") {
		_, err = e.cl.Node(e.to).DoAsking("EXISTS", e.rk, e.bkt)
	}
	if err == nil || !strings.Contains(err.Error(), "TRYAGAIN") {
		t.Fatalf("EXISTS record bucket during the migration: %v, want TRYAGAIN (the test's premise)", err)
	}
}

// moveGen moves the slot's generation sentinel to the target first, so
// that MigrateKeys then moves the record or its bucket (as the tests'
// premises need); claims meet TRYAGAIN while it and the record are apart.
func (e *reshardEnv) moveGen(t *testing.T) {
	t.Helper()
	host, port, _ := strings.Cut(e.cl.Node(e.to).Addr(), ":")
	if _, err := e.cl.Node(e.from).Do("MIGRATE", host, port, "", "0", "5000", "KEYS", e.s.genKeyOf(e.slot)); err != nil {
		t.Fatalf("MIGRATE the generation sentinel: %v", err)
	}
}

// finishLater moves the rest of the slot's keys and gives it to the target
// after d, as the rest of a reshard would.
func (e *reshardEnv) finishLater(t *testing.T, d time.Duration) chan error {
	done := make(chan error, 1)
	go func() {
		time.Sleep(d)
		for {
			n, err := e.cl.MigrateKeys(e.slot, e.from, e.to, 10)
			if err != nil {
				done <- err
				return
			}
			if n == 0 {
				break
			}
		}
		done <- e.cl.FinishMigration(e.slot, e.from, e.to)
	}()
	return done
}

// TestReshardFinalizeDuringMigration: a slot starts moving between a claim
// and its finalize, and the finalize meets its record and bucket on two
// nodes: it is re-sent until the slot has moved, and applies once.
func TestReshardFinalizeDuringMigration(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	e := newReshardEnv(t, cl, Options{})
	claim := mustClaim(t, e.s, claimReq(e.key), idempotency.StatusClaimed)
	if err := cl.BeginMigration(e.slot, e.from, e.to); err != nil {
		t.Fatal(err)
	}
	e.moveGen(t)
	if n, err := cl.MigrateKeys(e.slot, e.from, e.to, 1); err != nil || n != 1 {
		t.Fatalf("MigrateKeys: %d, %v", n, err)
	}
	e.split(t)
	done := e.finishLater(t, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	rec, err := e.s.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: e.key, Token: claim.Token,
		Incarnation: claim.Incarnation, Outcome: effectspec.Accepted, Result: &idempotency.StoredResult{Status: 200, Body: []byte(`{"ok":1}`)}})
	if err != nil {
		t.Fatalf("finalize during the migration: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if rec.State != effectspec.Accepted {
		t.Fatalf("finalized %s, want accepted", rec.State)
	}
	if owner, err := cl.SlotOwner(e.slot); err != nil || owner != e.to {
		t.Fatalf("slot %d served by node %d (%v), want %d", e.slot, owner, err, e.to)
	}
	res := mustClaim(t, e.s, claimReq(e.key), idempotency.StatusReplay)
	if string(res.Record.Result.Body) != `{"ok":1}` {
		t.Fatalf("replay after the move: %q", res.Record.Result.Body)
	}
	if n, err := cl.Node(e.to).Do("EXISTS", e.bkt); err != nil || n != int64(0) {
		t.Fatalf("the final record's bucket: EXISTS %d, %v; want 0 (its entry left with the finalize)", n, err)
	}
}

// TestReshardReplayDuringMigration: a final record has no index entry, and
// a slot holding only final records no bucket, which a claim script needs
// on the record's node; the replay is decided from the record alone while
// the slot migrates, before and after the record's own key moved, and is
// the replay the claim answers once the slot has moved.
func TestReshardReplayDuringMigration(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	e := newReshardEnv(t, cl, Options{MigrationWait: time.Minute})
	claim := mustClaim(t, e.s, claimReq(e.key), idempotency.StatusClaimed)
	mustFinalize(t, e.s, e.key, claim.Token, effectspec.DefinitelyRejected, &idempotency.StoredResult{Status: 400, Body: []byte(`{"no":1}`)})
	if err := cl.BeginMigration(e.slot, e.from, e.to); err != nil {
		t.Fatal(err)
	}
	e.moveGen(t)
	var during []*idempotency.Record
	for step := range 2 {
		e.split(t)
		start := time.Now()
		res, err := e.s.Claim(t.Context(), claimReq(e.key))
		if err != nil || res.Status != idempotency.StatusReplay {
			t.Fatalf("step %d: claim of a final record in a migrating slot: %+v, %v; want replay", step, res, err)
		}
		// Not a re-send that waited for the slot: MigrationWait is a minute.
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("step %d: the replay took %v", step, d)
		}
		during = append(during, res.Record)
		if step == 0 {
			if n, err := cl.MigrateKeys(e.slot, e.from, e.to, 10); err != nil || n != 1 {
				t.Fatalf("MigrateKeys: %d, %v; want the record alone", n, err)
			}
		}
	}
	if err := cl.FinishMigration(e.slot, e.from, e.to); err != nil {
		t.Fatal(err)
	}
	after := mustClaim(t, e.s, claimReq(e.key), idempotency.StatusReplay)
	for i, rec := range during {
		if !reflect.DeepEqual(rec, after.Record) {
			t.Errorf("replay %d during the migration\n%+v\ndiffers from the claim's after it\n%+v", i, rec, after.Record)
		}
	}
	// A claim that the record refuses is not decided from it: a different
	// request still gets request_mismatch from the claim script.
	other := claimReq(e.key)
	other.RequestHash = hashOf("other args")
	mustClaim(t, e.s, other, idempotency.StatusRequestMismatch)
}

// TestReshardFreshClaimDuringMigration: a fresh claim in a migrating slot
// is answered TRYAGAIN by both nodes (its record does not exist yet), so it
// waits for the slot to move and is claimed once, on the new owner, with
// its index entry.
func TestReshardFreshClaimDuringMigration(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	e := newReshardEnv(t, cl, Options{})
	if err := cl.BeginMigration(e.slot, e.from, e.to); err != nil {
		t.Fatal(err)
	}
	e.moveGen(t)
	e.split(t)
	// MigrationWait bounds the re-sends: a store that waits 300ms gives up
	// on a slot that does not move, having written nothing.
	short := realStore(t, e.c, Options{MigrationWait: 300 * time.Millisecond})
	start := time.Now()
	if _, err := short.Claim(t.Context(), claimReq(e.key)); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("claim after MigrationWait: %v, want store unavailable", err)
	} else if d := time.Since(start); d > 3*time.Second {
		// Not a speed check: a store that ignored the bound would wait
		// for the slot (the default 5s) or the test's deadline. It may
		// give up before 300ms, when its next back-off would pass it.
		t.Fatalf("claim gave up after %v, want within about the 300ms MigrationWait", d)
	}
	for _, k := range []string{e.rk, e.bkt} {
		if n, err := cl.Node(e.to).DoAsking("EXISTS", k); err != nil || n != int64(0) {
			t.Fatalf("%s on the target after a claim that gave up: EXISTS %v, %v", k, n, err)
		}
	}
	if n, err := cl.Node(e.from).Do("CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(e.slot)); err != nil || n != int64(0) {
		t.Fatalf("keys of the slot on the source after a claim that gave up: %v, %v", n, err)
	}
	done := e.finishLater(t, 300*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	res, err := e.s.Claim(ctx, claimReq(e.key))
	if err != nil || res.Status != idempotency.StatusClaimed || res.Token != 1 {
		t.Fatalf("fresh claim in a migrating slot: %+v, %v; want claimed with token 1", res, err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	page, err := e.s.ListUnknown(t.Context(), idempotency.ListRequest{Workspace: testScope.Workspace})
	if err != nil || len(page.Records) != 0 {
		t.Fatalf("listing with a live lease: %+v, %v", page, err)
	}
	if n, err := cl.Node(e.to).Do("EXISTS", e.rk, e.bkt); err != nil || n != int64(2) {
		t.Fatalf("record and bucket on the new owner: EXISTS %v, %v; want 2", n, err)
	}
	mustClaim(t, e.s, claimReq(e.key), idempotency.StatusInProgress)
}

// TestReshardUnknownListing: unknown records whose slots moved to other
// masters, or are moving (the bucket on one side, the record on the
// other), are all still listed.
func TestReshardUnknownListing(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	e := newReshardEnv(t, cl, Options{})
	want := map[string]bool{}
	var envs []reshardEnv
	for i := range 6 {
		k := idempotency.NewKey()
		c := mustClaim(t, e.s, claimReq(k), idempotency.StatusClaimed)
		if _, err := e.s.Finalize(t.Context(), idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: c.Token, Incarnation: c.Incarnation, Outcome: effectspec.Unknown}); err != nil {
			t.Fatal(err)
		}
		want[k.String()] = true
		e.aim(t, k)
		envs = append(envs, *e)
		switch {
		case i < 3:
			if err := cl.MoveSlot(e.slot, e.from, e.to, 10); err != nil {
				t.Fatal(err)
			}
		default:
			if err := cl.BeginMigration(e.slot, e.from, e.to); err != nil {
				t.Fatal(err)
			}
			e.moveGen(t)
			if n, err := cl.MigrateKeys(e.slot, e.from, e.to, 1); err != nil || n != 1 {
				t.Fatalf("MigrateKeys: %d, %v", n, err)
			}
			e.split(t)
		}
	}
	list := func() map[string]bool {
		got := map[string]bool{}
		page, err := e.s.ListUnknown(t.Context(), idempotency.ListRequest{Workspace: testScope.Workspace})
		if err != nil {
			t.Fatalf("listing: %v", err)
		}
		for _, r := range page.Records {
			got[r.Record.Key.String()] = true
		}
		return got
	}
	if got := list(); !reflect.DeepEqual(got, want) {
		t.Fatalf("listed during the migrations %v, want %v", got, want)
	}
	for _, m := range envs[3:] {
		if err := (&m).finishNow(); err != nil {
			t.Fatal(err)
		}
	}
	if got := list(); !reflect.DeepEqual(got, want) {
		t.Fatalf("listed after the migrations %v, want %v", got, want)
	}
}

func (e *reshardEnv) finishNow() error { return <-e.finishLater(nil, 0) }

// TestReshardWaitReplicas: with WaitReplicas the scripts run on a dedicated
// connection, with WAIT behind them on the same one; a slot that moved
// (MOVED: the client's map is stale) or is moving (ASK: the record is on
// the target already) is followed there, and the WAIT counts the target's
// replicas.
func TestReshardWaitReplicas(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	e := newReshardEnv(t, cl, Options{WaitReplicas: 1, WaitTimeout: 2 * time.Second})
	claim := mustClaim(t, e.s, claimReq(e.key), idempotency.StatusClaimed)
	// MOVED: the slot moves behind the client's back; the next WAITed
	// script of the slot goes to the old owner first.
	if err := cl.MoveSlot(e.slot, e.from, e.to, 10); err != nil {
		t.Fatal(err)
	}
	other := sameSlotKey(t, e.s, e.slot)
	res, err := e.s.Claim(t.Context(), claimReq(other))
	if err != nil || res.Status != idempotency.StatusClaimed {
		t.Fatalf("claim in a slot that moved: %+v, %v", res, err)
	}
	// ASK: the slot moves on, its keys already on the target; the reserve
	// (WAITed) is asked there.
	e.from, e.to = e.to, (e.to+1)%3
	if err := cl.BeginMigration(e.slot, e.from, e.to); err != nil {
		t.Fatal(err)
	}
	e.moveGen(t)
	for {
		n, err := cl.MigrateKeys(e.slot, e.from, e.to, 10)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	rv, err := e.s.Reserve(t.Context(), idempotency.ReserveRequest{Scope: testScope, Key: e.key, Token: claim.Token, Incarnation: claim.Incarnation, Timeout: time.Second})
	if err != nil || rv.Token != claim.Token+1 {
		t.Fatalf("reserve in a migrating slot whose keys moved: %+v, %v", rv, err)
	}
	if err := cl.FinishMigration(e.slot, e.from, e.to); err != nil {
		t.Fatal(err)
	}
	rec, err := e.s.Lookup(t.Context(), testScope, e.key)
	if err != nil || rec.AttemptCount != 2 {
		t.Fatalf("after the move: %+v, %v", rec, err)
	}
}

// sameSlotKey draws keys until one's record lives in slot.
func sameSlotKey(t *testing.T, s *Store, slot int) idempotency.Key {
	t.Helper()
	for range 1 << 20 {
		k := idempotency.NewKey()
		rk, err := testScope.StorageKey(s.prefix, k)
		if err != nil {
			t.Fatal(err)
		}
		if keySlot(rk) == slot {
			return k
		}
	}
	t.Fatal("no key found in the slot")
	return idempotency.Key{}
}
