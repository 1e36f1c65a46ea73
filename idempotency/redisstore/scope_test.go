package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

const scopeKey = "obol:meta:scope_version"

// manualClock makes s re-read the fleet's scope version only when the test
// moves its clock on, so no assertion depends on how fast the test runs.
func manualClock(s *Store) (advance func(time.Duration)) {
	var d atomic.Int64
	d.Store(int64(s.scope.elapsed()))
	s.scope.elapsed = func() time.Duration { return time.Duration(d.Load()) }
	return func(step time.Duration) { d.Add(int64(step)) }
}

func TestScopeVersionWrittenOnFreshStart(t *testing.T) {
	m := newMini(t, Options{})
	if v, err := m.mr.Get(scopeKey); err != nil || v != "1" {
		t.Fatalf("%s = %q, %v; want %d", scopeKey, v, err, idempotency.ScopeVersion)
	}
	// A second gateway of the same version starts on it, with records.
	mustClaim(t, m.store, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	if _, err := New(ctx, m.client, Options{SkipEvictionCheck: true}); err != nil {
		t.Fatalf("second gateway: %v", err)
	}
	// Another prefix has a version of its own.
	if _, err := New(ctx, m.client, Options{SkipEvictionCheck: true, Prefix: "other:"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := m.mr.Get("other:meta:scope_version"); v != "1" {
		t.Fatalf("other:meta:scope_version = %q", v)
	}
}

// TestScopeVersionOtherRefuses: a fleet of another version, or a key that
// holds no version, refuses the start, names both versions (never quoting
// what is not a number) and writes nothing.
func TestScopeVersionOtherRefuses(t *testing.T) {
	for _, tc := range []struct{ stored, named string }{
		{"2", "holds 2"},
		{"0", "not a version number"},
		{"01", "not a version number"},
		{"1 closing", "not a version number"},
		{"s3cr3t-value", "not a version number"},
		{"", "not a version number"},
	} {
		t.Run(tc.stored, func(t *testing.T) {
			mr, c := miniClient(t)
			mr.Set(scopeKey, tc.stored)
			before := fmt.Sprint(mr.Keys())
			_, err := New(ctx, c, Options{SkipEvictionCheck: true})
			if !errors.Is(err, idempotency.ErrScopeVersionChanged) {
				t.Fatalf("New: %v, want idempotency.ErrScopeVersionChanged", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.named) || !strings.Contains(msg, "this gateway's is 1") {
				t.Errorf("error %q does not name both versions", msg)
			}
			if tc.stored != "2" && tc.stored != "" && strings.Contains(msg, tc.stored) {
				t.Errorf("error %q quotes the stored value", msg)
			}
			if got := fmt.Sprint(mr.Keys()); got != before {
				t.Errorf("keys %s after a refused start, want %s", got, before)
			}
			if v, _ := mr.Get(scopeKey); v != tc.stored {
				t.Errorf("the key changed to %q", v)
			}
		})
	}
}

// TestScopeVersionRecordsWithoutKey: records under the prefix and no key
// refuse the start, saying what to do, and write nothing; records under
// another prefix (even one its glob would match) do not count.
func TestScopeVersionRecordsWithoutKey(t *testing.T) {
	m := newMini(t, Options{})
	mustClaim(t, m.store, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	m.mr.Del(scopeKey)
	before := m.snapshot(t)
	_, err := New(ctx, m.client, Options{SkipEvictionCheck: true})
	if !errors.Is(err, idempotency.ErrScopeVersionChanged) {
		t.Fatalf("New: %v, want idempotency.ErrScopeVersionChanged", err)
	}
	for _, want := range []string{"scope-status", "refserver store init -adopt-records"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// An operator is never told to write a Redis key by hand.
	if strings.Contains(err.Error(), "SET ") {
		t.Errorf("error %q names a Redis command to type", err)
	}
	if after := m.snapshot(t); after != before {
		t.Errorf("a refused start changed Redis:\n%s\nwant\n%s", after, before)
	}
	// The glob characters of a prefix match only themselves.
	for _, p := range []string{"ob*", "obo?:", "[o]bol:", "o\\bol:"} {
		if _, err := New(ctx, m.client, Options{SkipEvictionCheck: true, Prefix: p}); err != nil {
			t.Errorf("prefix %q: %v", p, err)
		}
	}
	// Once the operator sets the key, the fleet starts.
	m.mr.Set(scopeKey, "1")
	if _, err := New(ctx, m.client, Options{SkipEvictionCheck: true}); err != nil {
		t.Fatal(err)
	}
}

// TestScopeVersionConcurrentStarts: gateways starting together on an
// empty prefix agree on one key, and a gateway of another version that
// wins the race makes the others refuse.
func TestScopeVersionConcurrentStarts(t *testing.T) {
	mr, c := miniClient(t)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = New(ctx, c, Options{SkipEvictionCheck: true})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if v, _ := mr.Get(scopeKey); v != "1" {
		t.Fatalf("key %q", v)
	}

	// The SET NX of a gateway that scanned an empty prefix reads what
	// another wrote first.
	mr2, c2 := miniClient(t)
	sc := &scopeCheck{client: c2, key: scopeKey, want: "1"}
	mr2.Set(scopeKey, "2")
	if v, err := sc.create(ctx, "obol:", false); err != nil || v != "2" {
		t.Fatalf("create after another's write: %q, %v; want 2", v, err)
	}
}

// TestScopeVersionChangeStopsClaims: a running store reads the key again
// after a lease and stops claiming (503 scope_version_conflict) while it
// holds another version; calls in flight still finish; a key set back
// resumes claiming.
func TestScopeVersionChangeStopsClaims(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	advance := manualClock(m.store)
	inFlight := idempotency.NewKey()
	res := mustClaim(t, m.store, claimReq(inFlight), idempotency.StatusClaimed)

	m.mr.Set(scopeKey, "2")
	// Within the lease of the last reading, the key is not read again.
	mustClaim(t, m.store, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)

	advance(time.Second)
	k := idempotency.NewKey()
	before := m.snapshot(t)
	_, err := m.store.Claim(ctx, claimReq(k))
	if !errors.Is(err, idempotency.ErrScopeVersionChanged) {
		t.Fatalf("claim after the change: %v, want ErrScopeVersionChanged", err)
	}
	if errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Errorf("claim after the change is a store failure (a caller would retry it): %v", err)
	}
	if reason, status := idempotency.Reason(err); reason != "scope_version_conflict" || status != 503 {
		t.Errorf("Reason = %q, %d; want scope_version_conflict, 503", reason, status)
	}
	if !strings.Contains(err.Error(), "now holds 2") || !strings.Contains(err.Error(), "this gateway's is 1") {
		t.Errorf("error %q does not name both versions", err)
	}
	if after := m.snapshot(t); after != before {
		t.Errorf("a refused claim changed Redis:\n%s\nwant\n%s", after, before)
	}
	// A replay is a claim too: the gateway stops answering from the store.
	if _, err := m.store.Claim(ctx, claimReq(inFlight)); !errors.Is(err, idempotency.ErrScopeVersionChanged) {
		t.Errorf("claim of the in-flight key: %v", err)
	}
	// The call in flight ends.
	mustFinalize(t, m.store, inFlight, res.Token, effectspec.Accepted, &idempotency.StoredResult{Status: 200})

	// Concurrent claims all see the change.
	var wg sync.WaitGroup
	var refused atomic.Int32
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := m.store.Claim(ctx, claimReq(idempotency.NewKey())); errors.Is(err, idempotency.ErrScopeVersionChanged) {
				refused.Add(1)
			}
		}()
	}
	wg.Wait()
	if refused.Load() != 32 {
		t.Errorf("%d of 32 concurrent claims refused", refused.Load())
	}

	// Set back, the next reading resumes claiming; a key that is gone
	// changes nothing.
	m.mr.Set(scopeKey, "1")
	advance(time.Second)
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	m.mr.Del(scopeKey)
	advance(time.Second)
	mustClaim(t, m.store, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	m.mr.Set(scopeKey, "1 closing")
	advance(time.Second)
	if _, err := m.store.Claim(ctx, claimReq(idempotency.NewKey())); !errors.Is(err, idempotency.ErrScopeVersionChanged) ||
		strings.Contains(err.Error(), "closing") {
		t.Errorf("claim under a closing mark: %v", err)
	}
}

// TestScopeVersionReadFails: a reading that fails claims nothing, answers a
// store failure (retryable), and the next claim reads again.
func TestScopeVersionReadFails(t *testing.T) {
	// The reading under LOADING retries until ReadTimeout; the reading after
	// it must fit in it: 50 ms did not on a loaded machine.
	m := newMini(t, Options{Lease: time.Second, ReadTimeout: 500 * time.Millisecond})
	advance := manualClock(m.store)
	advance(time.Second)
	m.mr.SetError("LOADING Redis is loading the dataset in memory")
	k := idempotency.NewKey()
	if _, err := m.store.Claim(ctx, claimReq(k)); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("claim while the reading fails: %v, want ErrStoreUnavailable", err)
	}
	m.mr.SetError("")
	if n := len(m.mr.Keys()); n != 3 { // the scope version, the deployment id, the sentinel
		t.Fatalf("%d keys after a failed reading: %v", n, m.mr.Keys())
	}
	m.mr.Set(scopeKey, "3")
	if _, err := m.store.Claim(ctx, claimReq(k)); !errors.Is(err, idempotency.ErrScopeVersionChanged) {
		t.Fatalf("claim after a failed reading: %v, want the key read again", err)
	}
	// A canceled claim waiting for nothing returns at once.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	advance(time.Second)
	if _, err := m.store.Claim(cctx, claimReq(k)); err == nil {
		t.Fatal("canceled claim succeeded")
	}
}

// TestScopeVersionOnRedis runs the start rules and the running check on a
// real Redis.
func TestScopeVersionOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := realClient(t, srv.Addr())
	s := realStore(t, c, Options{Lease: time.Second})
	if v, err := srv.Do("GET", scopeKey); err != nil || v != "1" {
		t.Fatalf("fresh start: %s = %v, %v", scopeKey, v, err)
	}
	mustClaim(t, s, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)

	if _, err := srv.Do("SET", scopeKey, "7"); err != nil {
		t.Fatal(err)
	}
	_, err := New(t.Context(), c, Options{})
	if !errors.Is(err, idempotency.ErrScopeVersionChanged) || !strings.Contains(err.Error(), "holds 7") || !strings.Contains(err.Error(), "this gateway's is 1") {
		t.Fatalf("New under version 7: %v", err)
	}
	advance := manualClock(s)
	advance(time.Second)
	if _, err := s.Claim(t.Context(), claimReq(idempotency.NewKey())); !errors.Is(err, idempotency.ErrScopeVersionChanged) {
		t.Fatalf("claim under version 7: %v", err)
	}

	if _, err := srv.Do("DEL", scopeKey); err != nil {
		t.Fatal(err)
	}
	if _, err := New(t.Context(), c, Options{}); !errors.Is(err, idempotency.ErrScopeVersionChanged) {
		t.Fatalf("New with records and no key: %v", err)
	}
	if v, err := srv.Do("EXISTS", scopeKey); err != nil || v != int64(0) {
		t.Fatalf("a refused start wrote the key: %v, %v", v, err)
	}
	// Glob characters in a prefix match only themselves on Redis too.
	if _, err := New(t.Context(), c, Options{Prefix: "ob?l:"}); err != nil {
		t.Fatal(err)
	}
}

// TestScopeVersionClusterEveryMaster: a record on any one master (and only
// there) is enough to refuse a start without the key, so the scan covers
// every master; replicas are skipped.
func TestScopeVersionClusterEveryMaster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	c := realClient(t, cl.Addrs()...)
	s := realStore(t, c, Options{})
	if v, err := c.Do(t.Context(), c.B().Get().Key(scopeKey).Build()).ToString(); err != nil || v != "1" {
		t.Fatalf("fresh start on a Cluster: %q, %v", v, err)
	}
	del := func(k string) {
		t.Helper()
		if err := c.Do(t.Context(), c.B().Del().Key(k).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		// A record whose key lives on master i.
		var k idempotency.Key
		var rk string
		for {
			k = idempotency.NewKey()
			rk, _ = testScope.StorageKey(s.prefix, k)
			if v, err := cl.Master(i).Do("EXISTS", rk); err == nil && v == int64(0) {
				break // no MOVED: master i serves the slot
			}
		}
		mustClaim(t, s, claimReq(k), idempotency.StatusClaimed)
		del(scopeKey)
		if _, err := New(t.Context(), c, Options{}); !errors.Is(err, idempotency.ErrScopeVersionChanged) {
			t.Fatalf("record on master %d: New: %v, want idempotency.ErrScopeVersionChanged", i, err)
		}
		del(rk)
		if _, err := New(t.Context(), c, Options{}); err != nil {
			t.Fatalf("no record: New: %v", err)
		}
	}
	// Another version refuses the start and, while running, claims.
	if err := c.Do(t.Context(), c.B().Set().Key(scopeKey).Value("2").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(t.Context(), c, Options{}); !errors.Is(err, idempotency.ErrScopeVersionChanged) || !strings.Contains(err.Error(), "holds 2") ||
		!strings.Contains(err.Error(), "this gateway's is 1") {
		t.Fatalf("New under version 2 on a Cluster: %v", err)
	}
	manualClock(s)(defaultLease)
	if _, err := s.Claim(t.Context(), claimReq(idempotency.NewKey())); !errors.Is(err, idempotency.ErrScopeVersionChanged) {
		t.Fatalf("claim under version 2: %v", err)
	}
}

// knownRecords writes records of known versions and states through s (on
// mr, whose clock it moves on) and returns the table CountRecords must
// print.
func knownRecords(t *testing.T, s *Store, mr *miniredis.Miniredis) []idempotency.RecordCount {
	t.Helper()
	claim := func(mod func(*idempotency.ClaimRequest)) (idempotency.Key, idempotency.ClaimResult) {
		k := idempotency.NewKey()
		req := claimReq(k)
		if mod != nil {
			mod(&req)
		}
		res, err := s.Claim(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return k, res
	}
	rk := func(k idempotency.Key) string {
		r, _ := testScope.StorageKey(s.prefix, k)
		return r
	}
	// In flight, then its lease lapses: unknown.
	claim(nil)
	mr.SetTime(t0.Add(s.Lease() + time.Second))
	claim(nil) // in flight, live
	for range 2 {
		k, res := claim(nil)
		mustFinalize(t, s, k, res.Token, effectspec.Accepted, &idempotency.StoredResult{Status: 200})
	}
	k, res := claim(nil)
	mustFinalize(t, s, k, res.Token, effectspec.DefinitelyRejected, &idempotency.StoredResult{Status: 400})
	k, res = claim(nil)
	mustFinalize(t, s, k, res.Token, effectspec.Unknown, nil)
	claim(func(r *idempotency.ClaimRequest) { r.ApprovalRequired = true }) // held
	_, held := claim(func(r *idempotency.ClaimRequest) { r.ApprovalRequired = true })
	if _, err := s.Decide(ctx, idempotency.DecideRequest{Ticket: held.Ticket, Approve: false}); err != nil {
		t.Fatal(err)
	}
	// Of another version, and of the layout before versions.
	k, res = claim(nil)
	mustFinalize(t, s, k, res.Token, effectspec.Accepted, &idempotency.StoredResult{Status: 200})
	editRecord(t, mr, rk(k), func(f map[string]string) { f["w"] = "2" })
	k, _ = claim(nil)
	editRecord(t, mr, rk(k), func(f map[string]string) { delete(f, "w") })
	// Unreadable: not a hash, an unknown state byte, a version that is
	// not a number.
	mr.Set(s.prefix+"idem:junk", "x")
	mr.HSet(s.prefix+"idem:odd", "m", "zsh", "w", "1")
	mr.HSet(s.prefix+"idem:odd2", "m", "ash", "w", "one")
	// Not records: another prefix, tickets, meta keys.
	mr.HSet("other:idem:x", "m", "ash", "w", "1")
	return []idempotency.RecordCount{
		{Version: 0, State: "", Records: 3},
		{Version: 0, State: effectspec.InProgress, Records: 1},
		{Version: 1, State: effectspec.Accepted, Records: 2},
		{Version: 1, State: effectspec.DefinitelyRejected, Records: 1},
		{Version: 1, State: effectspec.Denied, Records: 1},
		{Version: 1, State: effectspec.Held, Records: 1},
		{Version: 1, State: effectspec.InProgress, Records: 1},
		{Version: 1, State: effectspec.Unknown, Records: 2},
		{Version: 2, State: effectspec.Accepted, Records: 1},
	}
}

func TestCountRecords(t *testing.T) {
	m := newMini(t, Options{})
	want := knownRecords(t, m.store, m.mr)
	before := m.snapshot(t)
	var progress []int
	got, err := CountRecords(ctx, m.client, CountOptions{ProgressEvery: 1, Progress: func(n int) { progress = append(progress, n) }})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts\n%v\nwant\n%v", got, want)
	}
	if len(progress) == 0 || progress[len(progress)-1] != 13 {
		t.Errorf("progress %v, want it to end at the 13 keys read", progress)
	}
	if after := m.snapshot(t); after != before {
		t.Errorf("CountRecords changed Redis:\n%s\nwant\n%s", after, before)
	}
	// Another prefix sees only its own; a prefix without records, nothing.
	if got, err := CountRecords(ctx, m.client, CountOptions{Prefix: "other:"}); err != nil || fmt.Sprint(got) != "[{1 accepted 1}]" {
		t.Errorf("other: %v, %v", got, err)
	}
	if got, err := CountRecords(ctx, m.client, CountOptions{Prefix: "o*:"}); err != nil || len(got) != 0 {
		t.Errorf("o*: %v, %v", got, err)
	}
	for _, opts := range []CountOptions{{Prefix: "a{b}:"}, {Prefix: "a b"}, {ProgressEvery: -1}} {
		if _, err := CountRecords(ctx, m.client, opts); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: %v, want ErrInvalidConfig", opts, err)
		}
	}
	if _, err := CountRecords(ctx, nil, CountOptions{}); err == nil {
		t.Error("nil client accepted")
	}
}

// TestCountRecordsCluster counts records spread over every master of a
// Cluster with replicas, each once.
func TestCountRecordsCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	c := realClient(t, cl.Addrs()...)
	s := realStore(t, c, Options{})
	for i := range 40 {
		k := idempotency.NewKey()
		res := mustClaim(t, s, claimReq(k), idempotency.StatusClaimed)
		if i%4 != 0 {
			mustFinalize(t, s, k, res.Token, effectspec.Accepted, &idempotency.StoredResult{Status: 200})
		}
	}
	got, err := CountRecords(t.Context(), c, CountOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "[{1 accepted 30} {1 in_progress 10}]"; fmt.Sprint(got) != want {
		t.Fatalf("counts %v, want %s", got, want)
	}
}

// TestScopeVersionHealth: Health fails with scope_version_conflict while
// the fleet's version is another, reading it again itself, so a gateway
// that gets no claims (taken out of a load balancer) recovers too.
func TestScopeVersionHealth(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	advance := manualClock(m.store)
	if err := m.store.Health(ctx); err != nil {
		t.Fatal(err)
	}
	m.mr.Set(scopeKey, "2")
	advance(time.Second)
	var ue *idempotency.UnhealthyError
	if err := m.store.Health(ctx); !errors.As(err, &ue) || ue.Reason != "scope_version_conflict" || !errors.Is(err, idempotency.ErrScopeVersionChanged) {
		t.Fatalf("health under version 2: %v", err)
	}
	m.mr.Set(scopeKey, "1")
	advance(time.Second)
	if err := m.store.Health(ctx); err != nil {
		t.Fatalf("health once set back: %v", err)
	}
}
