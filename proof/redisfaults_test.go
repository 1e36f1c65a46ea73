package proof

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/proof/internal/faultproxy"
	"github.com/obol-gateway/obol/retry"
)

const libLease = time.Second

// libHarness is the library wired as a gateway would: an Orchestrator on a
// redisstore, an HTTPTarget to the counting vendor.
type libHarness struct {
	store  *countingStore
	raw    *redisstore.Store
	orch   *retry.Orchestrator
	target retry.Target
	spec   effectspec.Spec
	vendor *vendor

	// finalizeMayRollBack: the store does not wait for replicas on a
	// finalize, so after a failover a finalized record may read as in flight
	// (unknown) again. audit counts those apart instead of as mismatches.
	finalizeMayRollBack bool

	mu      sync.Mutex
	results map[idempotency.Key]callResult
}

type callResult struct {
	out retry.Answer
	err error
}

func newLibHarness(t testing.TB, raw *redisstore.Store, v *vendor) *libHarness {
	h := &libHarness{store: newCountingStore(raw), raw: raw, spec: libSpec(t), vendor: v, results: map[idempotency.Key]callResult{}}
	h.orch = &retry.Orchestrator{Store: h.store, StoreRetries: 3}
	h.target = &retry.HTTPTarget{Executor: &retry.Executor{}, URL: v.URL + "/charge", Header: http.Header{"Authorization": {"Bearer " + vendorSecret}}}
	return h
}

func (h *libHarness) call(ctx context.Context, key idempotency.Key) callResult {
	out, err := libCall(ctx, h.orch, h.target, h.spec, key)
	r := callResult{out, err}
	h.mu.Lock()
	h.results[key] = r
	h.mu.Unlock()
	return r
}

// load runs workers that each call with fresh keys until stop is closed.
func (h *libHarness) load(workers int, stop <-chan struct{}) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				h.call(context.Background(), idempotency.NewKey())
			}
		})
	}
	wg.Wait()
}

// audit checks every call made so far against the store and the vendor:
//
//   - a failed call failed closed with an error that says the store was
//     unavailable, and a call whose claim failed sent nothing;
//   - the vendor never saw more requests for a key than its record's
//     attempt_count (a duplicate: a send without a reservation);
//   - every key the vendor saw, and every acknowledged reservation, still
//     has its record;
//   - a call that succeeded agrees with its record: same outcome, and
//     attempt_count equal to the vendor's count.
//
// It returns the keys whose calls failed.
func (h *libHarness) audit(t testing.TB, f *figures) (failed []idempotency.Key) {
	t.Helper()
	ctx := context.Background()
	h.mu.Lock()
	results := make(map[idempotency.Key]callResult, len(h.results))
	for k, r := range h.results {
		results[k] = r
	}
	h.mu.Unlock()
	acked := map[idempotency.Key]bool{}
	for _, k := range h.store.acked() {
		acked[k] = true
	}
	var claimFailed, finalizeFailed, unsent, unknownUnsent, rolledBack, vendorSum, attemptSum int
	sample := ""
	for k, r := range results {
		n := h.vendor.count(k.String())
		rec, err := lookup(ctx, h.raw, k)
		vendorSum += n
		attemptSum += rec.AttemptCount
		switch {
		case errors.Is(err, idempotency.ErrNotFound):
			if n > 0 || r.err == nil || acked[k] {
				t.Errorf("%s: no record, but vendor saw %d, call err %v, acknowledged %v", k, n, r.err, acked[k])
				f.recordsLost++
			}
		case err != nil:
			t.Fatalf("lookup %s: %v", k, err)
		default:
			// Attempts finalized as never sent are counted but never left.
			if n > rec.SentAttempts {
				t.Errorf("%s: vendor saw %d requests, attempt_count %d, %d may have left", k, n, rec.AttemptCount, rec.SentAttempts)
				f.duplicates += n - rec.SentAttempts
			}
			if n < rec.AttemptCount {
				unsent++
			}
		}
		if r.err != nil {
			if !errors.Is(r.err, idempotency.ErrStoreUnavailable) || !strings.Contains(r.err.Error(), "store unavailable") {
				t.Errorf("%s: failed with %v, want a store-unavailable error", k, r.err)
			}
			if strings.Contains(r.err.Error(), "finalize") {
				finalizeFailed++
			} else {
				claimFailed++
				if n != 0 {
					t.Errorf("%s: the claim failed but the vendor saw %d requests", k, n)
					f.duplicates += n
				}
			}
			if sample == "" {
				sample = r.err.Error()
			}
			failed = append(failed, k)
			continue
		}
		rc := r.out.Receipt
		if err == nil && h.finalizeMayRollBack && rec.State == effectspec.Unknown && rc.AttemptCount == rec.AttemptCount && rc.AttemptCount == n {
			rolledBack++
			continue
		}
		if err == nil && rc.Outcome == "unknown" && n < rc.AttemptCount && rc.AttemptCount == rec.AttemptCount && rec.State == effectspec.Unknown {
			// A reserved attempt that never left (e.g. a proven before_send
			// when a slow store ate the dispatch deadline) is still counted:
			// the outcome is unknown and the key is completed later.
			unknownUnsent++
			failed = append(failed, k)
			continue
		}
		if err == nil && (rec.SentAttempts != n || rc.AttemptCount != rec.AttemptCount || string(rc.Outcome) != string(rec.State)) {
			t.Errorf("%s: receipt attempts %d outcome %s, record %d %s, vendor %d", k, rc.AttemptCount, rc.Outcome, rec.AttemptCount, rec.State, n)
			f.attemptMismatches++
		}
	}
	f.calls += len(results)
	f.note("vendor_requests=%d attempt_count_sum=%d claim_failed_closed=%d finalize_failed=%d reserved_never_sent=%d unknown_outcome_never_sent=%d",
		vendorSum, attemptSum, claimFailed, finalizeFailed, unsent, unknownUnsent)
	if h.finalizeMayRollBack {
		f.note("finalizations_rolled_back=%d", rolledBack)
	}
	if sample != "" {
		f.note("sample_error=%q", sample)
	}
	return failed
}

func lookup(ctx context.Context, s *redisstore.Store, k idempotency.Key) (idempotency.Record, error) {
	var rec idempotency.Record
	var err error
	for range 20 { // the store may still be reconnecting
		rec, err = s.Lookup(ctx, libScope, k)
		if err == nil || !errors.Is(err, idempotency.ErrStoreUnavailable) {
			return rec, err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return rec, err
}

// recover calls every failed key again once faults are over, as a client
// would: again while the key is in progress (until its lease lapses), and
// again when the call fails closed because the store is slow or still
// reconnecting, which the contract allows at any time. Each key must end
// accepted, with the vendor having seen at least one request and no more
// than attempt_count. Calls that failed closed are counted, not failed on.
func (h *libHarness) recover(t testing.TB, f *figures, keys []idempotency.Key) {
	t.Helper()
	failedClosed := 0
	for _, k := range keys {
		var r callResult
		for range 50 {
			r = h.call(context.Background(), k)
			f.calls++
			if errors.Is(r.err, idempotency.ErrStoreUnavailable) {
				failedClosed++
			} else if !errors.Is(r.err, idempotency.ErrInProgress) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		n := h.vendor.count(k.String())
		switch rc := r.out.Receipt; {
		case r.err != nil:
			t.Errorf("%s after recovery: %v (vendor saw %d)", k, r.err, n)
		case n > rc.AttemptCount:
			t.Errorf("%s after recovery: vendor saw %d, attempt_count %d", k, n, rc.AttemptCount)
			f.duplicates += n - rc.AttemptCount
		case rc.Outcome != "accepted" || n < 1:
			t.Errorf("%s after recovery: receipt %+v, vendor %d", k, rc, n)
		}
	}
	f.note("recovered=%d recovery_failed_closed=%d", len(keys), failedClosed)
}

// hangGuard bounds every wait of a fault test: a step that never happens
// fails the test instead of hanging it. It is not a speed limit.
const hangGuard = 2 * time.Minute

// startLoad runs h.load with 8 workers until the returned stop is called
// (stop waits for the workers; calling it again does nothing).
func (h *libHarness) startLoad() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() { h.load(8, quit); close(done) }()
	return sync.OnceFunc(func() { close(quit); <-done })
}

// hold makes the first n requests the vendor reads wait there, and waits
// until n have arrived: those calls are reserved and sent, and none is
// finalized until release is called (release is idempotent, and must be
// called before the load can stop).
func (h *libHarness) hold(t *testing.T, n int) (held []idempotency.Key, release func()) {
	t.Helper()
	arrived, gate := make(chan string, n), make(chan struct{})
	var blocked atomic.Int64
	h.vendor.setBlock(func(ref string) {
		if blocked.Add(1) <= int64(n) {
			arrived <- ref
			<-gate
		}
	})
	release = sync.OnceFunc(func() {
		h.vendor.setBlock(nil)
		close(gate)
	})
	t.Cleanup(release) // before the vendor's Close, which waits for its handlers
	guard := time.After(hangGuard)
	for len(held) < n {
		select {
		case ref := <-arrived:
			k, err := idempotency.ParseKey(ref)
			if err != nil {
				release()
				t.Fatalf("vendor ref %q: %v", ref, err)
			}
			held = append(held, k)
		case <-guard:
			release()
			t.Fatalf("only %d of %d calls reached the vendor", len(held), n)
		}
	}
	return held, release
}

// waitFor polls cond until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	guard := time.After(hangGuard)
	for !cond() {
		select {
		case <-time.After(10 * time.Millisecond):
		case <-guard:
			t.Fatalf("never happened: %s", what)
		}
	}
}

// completes reports whether a fresh call completes (accepted).
func (h *libHarness) completes() bool {
	r := h.call(context.Background(), idempotency.NewKey())
	return r.err == nil && r.out.Receipt.Outcome == "accepted"
}

// outage runs a load of 8 workers and takes Redis down with down while calls
// are known to be in flight: the first inFlight requests the vendor reads
// wait there (reserved and sent, not finalized) until down has returned, so
// that their finalizes meet the outage. Redis stays down until those calls,
// and at least one claim made during the outage, have failed closed; up
// brings it back, and the load stops once a fresh call has completed again.
// Nothing here waits for a duration: each step waits for the event it names.
// outage returns the keys of the held calls, each of which failed closed.
func (h *libHarness) outage(t *testing.T, inFlight int, down, up func()) (held []idempotency.Key) {
	t.Helper()
	stop := h.startLoad()
	defer stop()
	held, release := h.hold(t, inFlight)
	defer release() // also on a failure: the workers must be able to end
	down()
	release()

	waitFor(t, "the held calls end while Redis is down", func() bool { return h.ended(held) })
	h.mu.Lock()
	completed := 0
	for _, k := range held {
		if r := h.results[k]; r.err == nil {
			completed++
			t.Errorf("%s: in flight when Redis went down, yet it completed (%s)", k, r.out.Receipt.Outcome)
		}
	}
	h.mu.Unlock()
	if completed > 0 {
		t.FailNow()
	}
	waitFor(t, "a claim fails closed while Redis is down", func() bool { return h.claimFailed(held) })
	up()
	waitFor(t, "a call completes once Redis is back", h.completes)
	return held
}

// ended reports whether every call of keys has returned.
func (h *libHarness) ended(keys []idempotency.Key) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, k := range keys {
		if _, ok := h.results[k]; !ok {
			return false
		}
	}
	return true
}

// claimFailed reports whether a call other than those of held failed before
// its finalize: its claim failed.
func (h *libHarness) claimFailed(held []idempotency.Key) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, r := range h.results {
		if r.err != nil && !slices.Contains(held, k) && !strings.Contains(r.err.Error(), "finalize") {
			return true
		}
	}
	return false
}

// TestRedisRestartMidLoad stops Redis (AOF, fsync always) while calls are in
// flight under load, and starts it again once calls have failed closed.
// Calls during the outage must fail closed with a clear error and never send
// without a reservation; a call whose finalize failed closed is allowed
// (counted as finalize_failed) and completes after the lease with no second
// effect.
func TestRedisRestartMidLoad(t *testing.T) {
	start := time.Now()
	redis := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	v := newVendor(t, 2*time.Millisecond)
	h := newLibHarness(t, newStore(t, newClient(t, redis.Addr()), redisstore.Options{Lease: libLease}), v)
	held := h.outage(t, 4, redis.Stop, redis.Restart)
	var f figures
	failed := h.audit(t, &f)
	f.note("in_flight_at_outage=%d", len(held))
	h.recover(t, &f, failed)
	v.integrity(t)
	f.report(t, start)
}

// TestRedisKill9AOF kills Redis (appendonly yes, appendfsync always) with
// SIGKILL while calls are in flight under load, and restarts it: every
// acknowledged reservation and every key the vendor saw must still have its
// record.
func TestRedisKill9AOF(t *testing.T) {
	start := time.Now()
	redis := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	v := newVendor(t, 2*time.Millisecond)
	h := newLibHarness(t, newStore(t, newClient(t, redis.Addr()), redisstore.Options{Lease: libLease}), v)
	const inFlight = 4
	var ackedBeforeKill int
	held := h.outage(t, inFlight, func() {
		redis.Kill()
		ackedBeforeKill = len(h.store.acked())
	}, redis.Restart)
	var f figures
	failed := h.audit(t, &f) // checks every acknowledged key's record
	if ackedBeforeKill < inFlight {
		t.Errorf("%d reservations acknowledged before the kill, with %d calls in flight", ackedBeforeKill, inFlight)
	}
	f.note("acknowledged_before_kill=%d in_flight_at_kill=%d", ackedBeforeKill, len(held))
	h.recover(t, &f, failed)
	v.integrity(t)
	f.report(t, start)
}

// TestFaultProxy puts our RESP-aware proxy between the store and Redis.
func TestFaultProxy(t *testing.T) {
	redis := redistest.Start(t)

	// The reply of every fifth key's claim, and of every fifth key's
	// finalize, is dropped after the script ran, and the connection is cut.
	// The orchestrator re-sends the same operation id: the store must answer
	// "already applied", and nothing may double.
	t.Run("drop replies after the script ran", func(t *testing.T) {
		start := time.Now()
		proxy := newFaultProxy(t, redis.Addr())
		v := newVendor(t, 0)
		// Every call must complete: its attempt has to fit in its lease
		// after reconnecting for re-sends, which 1 s did not on a loaded
		// machine (the attempt ran out of its dispatch deadline: unknown).
		h := newLibHarness(t, newStore(t, newClient(t, proxy.Addr()), redisstore.Options{Lease: 3 * libLease}), v)
		h.orch.StoreRetries = 6
		var mu sync.Mutex
		seen := map[string]int{}
		droppedClaims := map[string]bool{}
		var droppedFinalizes atomic.Int64
		proxy.SetRule(func(cmd []string) faultproxy.Action {
			kind, key := faultproxy.ScriptKind(cmd)
			if kind != "claim" && kind != "finalize" {
				return faultproxy.Pass
			}
			mu.Lock()
			defer mu.Unlock()
			k := key[strings.LastIndexByte(key, ':')+1:]
			seen[kind]++
			if seen[kind+k] > 0 || seen[kind]%5 != 0 {
				seen[kind+k]++
				return faultproxy.Pass
			}
			seen[kind+k]++
			return faultproxy.DropReplyCut
		})
		// Counted when the reply is dropped, so Redis ran the script: a
		// command marked to drop may never reach Redis when its connection
		// is cut first for another one.
		proxy.SetOnDropped(func(cmd []string) {
			kind, key := faultproxy.ScriptKind(cmd)
			mu.Lock()
			defer mu.Unlock()
			if kind == "claim" {
				droppedClaims[key[strings.LastIndexByte(key, ':')+1:]] = true
			} else {
				droppedFinalizes.Add(1)
			}
		})
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 40 {
					h.call(context.Background(), idempotency.NewKey())
				}
			})
		}
		wg.Wait()
		proxy.SetRule(nil)
		var f figures
		if failed := h.audit(t, &f); len(failed) != 0 {
			t.Errorf("%d calls failed; with re-sends every call should have completed", len(failed))
		}
		h.mu.Lock()
		for k, r := range h.results {
			if r.err == nil && (r.out.Receipt.Outcome != "accepted" || r.out.Receipt.AttemptCount != 1) {
				t.Errorf("%s: receipt %+v", k, r.out.Receipt)
			}
		}
		h.mu.Unlock()
		mu.Lock()
		appliedN := 0
		for k := range droppedClaims {
			key, _ := idempotency.ParseKey(k)
			if h.store.wasApplied(key) {
				appliedN++
			} else {
				t.Errorf("%s: its claim reply was dropped, but no re-sent claim answered already applied", k)
			}
		}
		mu.Unlock()
		if len(droppedClaims) == 0 || droppedFinalizes.Load() == 0 {
			t.Errorf("the rule dropped %d claim and %d finalize replies; want some of each", len(droppedClaims), droppedFinalizes.Load())
		}
		f.note("dropped_claim_replies=%d answered_already_applied=%d dropped_finalize_replies=%d", len(droppedClaims), appliedN, droppedFinalizes.Load())
		v.integrity(t)
		f.report(t, start)
	})

	// 3ms of latency on every batch of commands, and every connection cut
	// every 150ms.
	t.Run("latency and cut connections", func(t *testing.T) {
		start := time.Now()
		proxy := newFaultProxy(t, redis.Addr())
		proxy.SetLatency(3 * time.Millisecond)
		v := newVendor(t, time.Millisecond)
		h := newLibHarness(t, newStore(t, newClient(t, proxy.Addr()), redisstore.Options{Lease: libLease}), v)
		// No re-sends: a cut fails the call closed, and recovery after the
		// lease must finish it without a second effect.
		h.orch.StoreRetries = -1
		stop := make(chan struct{})
		cuts := 0
		go func() {
			tick := time.NewTicker(150 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(2 * time.Second)
			for {
				select {
				case <-tick.C:
					cuts += proxy.CutAll()
				case <-deadline:
					close(stop)
					return
				}
			}
		}()
		h.load(8, stop)
		proxy.SetLatency(0)
		var f figures
		failed := h.audit(t, &f)
		f.note("connections_cut=%d", cuts)
		h.recover(t, &f, failed)
		v.integrity(t)
		f.report(t, start)
	})
}
