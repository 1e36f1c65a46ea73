package proof

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
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
	out retry.Outcome
	err error
}

func newLibHarness(t testing.TB, raw *redisstore.Store, v *vendor) *libHarness {
	h := &libHarness{store: newCountingStore(raw), raw: raw, spec: libSpec(t), vendor: v, results: map[idempotency.Key]callResult{}}
	h.orch = &retry.Orchestrator{Store: h.store, Lease: libLease, StoreRetries: 3}
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
		if err == nil && h.finalizeMayRollBack && rec.State == idempotency.StateUnknown && rc.AttemptCount == rec.AttemptCount && rc.AttemptCount == n {
			rolledBack++
			continue
		}
		if err == nil && rc.Outcome == "unknown" && n < rc.AttemptCount && rc.AttemptCount == rec.AttemptCount && rec.State == idempotency.StateUnknown {
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

// recover calls every failed key again once faults are over (waiting out
// the lease on in_progress): each must end accepted, with the vendor
// having seen at least one request and no more than attempt_count.
func (h *libHarness) recover(t testing.TB, f *figures, keys []idempotency.Key) {
	t.Helper()
	for _, k := range keys {
		var r callResult
		for range 50 {
			r = h.call(context.Background(), k)
			f.calls++
			if !errors.Is(r.err, idempotency.ErrInProgress) {
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
	f.note("recovered=%d", len(keys))
}

// TestRedisRestartMidLoad stops Redis (AOF, fsync always) in the middle of a
// load, keeps it down for 300ms and starts it again. Calls during the outage
// must fail closed with a clear error and never send without a reservation.
func TestRedisRestartMidLoad(t *testing.T) {
	start := time.Now()
	redis := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	v := newVendor(t, 2*time.Millisecond)
	h := newLibHarness(t, newStore(t, newClient(t, redis.Addr()), redisstore.Options{Lease: libLease}), v)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { h.load(8, stop); close(done) }()
	time.Sleep(500 * time.Millisecond)
	redis.Stop()
	time.Sleep(300 * time.Millisecond) // longer than the orchestrator's re-sends
	redis.Restart()
	time.Sleep(700 * time.Millisecond)
	close(stop)
	<-done
	var f figures
	failed := h.audit(t, &f)
	if len(failed) == 0 {
		t.Errorf("no call failed: the outage was not under load")
	}
	h.recover(t, &f, failed)
	v.integrity(t)
	f.report(t, start)
}

// TestRedisKill9AOF kills Redis (appendonly yes, appendfsync always) with
// SIGKILL under load and restarts it: every acknowledged reservation and
// every key the vendor saw must still have its record.
func TestRedisKill9AOF(t *testing.T) {
	start := time.Now()
	redis := redistest.Start(t, "--appendonly", "yes", "--appendfsync", "always")
	v := newVendor(t, 2*time.Millisecond)
	h := newLibHarness(t, newStore(t, newClient(t, redis.Addr()), redisstore.Options{Lease: libLease}), v)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { h.load(8, stop); close(done) }()
	time.Sleep(700 * time.Millisecond)
	redis.Kill()
	ackedBeforeKill := len(h.store.acked())
	time.Sleep(600 * time.Millisecond) // longer than the orchestrator's re-sends
	redis.Restart()
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	var f figures
	failed := h.audit(t, &f) // checks every acknowledged key's record
	if ackedBeforeKill == 0 {
		t.Errorf("no reservation was acknowledged before the kill")
	}
	f.note("acknowledged_before_kill=%d", ackedBeforeKill)
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
		h := newLibHarness(t, newStore(t, newClient(t, proxy.Addr()), redisstore.Options{Lease: libLease}), v)
		h.orch.StoreRetries = 6
		var mu sync.Mutex
		seen := map[string]int{}
		droppedClaims := map[string]bool{}
		var droppedFinalizes atomic.Int64
		proxy.setRule(func(cmd []string) action {
			kind, key := scriptKind(cmd)
			if kind != "claim" && kind != "finalize" {
				return pass
			}
			mu.Lock()
			defer mu.Unlock()
			k := key[strings.LastIndexByte(key, ':')+1:]
			seen[kind]++
			if seen[kind+k] > 0 || seen[kind]%5 != 0 {
				seen[kind+k]++
				return pass
			}
			seen[kind+k]++
			if kind == "claim" {
				droppedClaims[k] = true
			} else {
				droppedFinalizes.Add(1)
			}
			return dropReplyCut
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
		proxy.setRule(nil)
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
		proxy.setLatency(3 * time.Millisecond)
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
					cuts += proxy.cutAll()
				case <-deadline:
					close(stop)
					return
				}
			}
		}()
		h.load(8, stop)
		proxy.setLatency(0)
		var f figures
		failed := h.audit(t, &f)
		f.note("connections_cut=%d", cuts)
		h.recover(t, &f, failed)
		v.integrity(t)
		f.report(t, start)
	})
}
