package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// wireStore holds the reply of the first claim it sees "on the wire": the
// claim is applied in the store at once, and its reply reaches the caller
// only when release is closed, or never if the caller's ctx ends first (as
// a client drops a reply whose context ended), or never for the first lose
// sends of that claim (a reply lost to a stalled Redis).
type wireStore struct {
	idempotency.Store
	applied chan struct{} // closed once the first claim ran in the store
	release chan struct{}
	lose    int64

	once  sync.Once
	op    atomic.Value // the first claim's op id
	sends atomic.Int64 // sends of that claim
}

func newWireStore(st idempotency.Store, lose int64) *wireStore {
	return &wireStore{Store: st, applied: make(chan struct{}), release: make(chan struct{}), lose: lose}
}

func (w *wireStore) Claim(ctx context.Context, r idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	first := false
	w.once.Do(func() { first = true; w.op.Store(r.OpID) })
	if op, _ := w.op.Load().(string); op != r.OpID {
		return w.Store.Claim(ctx, r) // a client's retry: another op id
	}
	n := w.sends.Add(1)
	res, err := w.Store.Claim(context.WithoutCancel(ctx), r)
	if first {
		close(w.applied)
	}
	if n <= w.lose {
		return idempotency.ClaimResult{}, fmt.Errorf("%w: reply lost", idempotency.ErrStoreUnavailable)
	}
	if first {
		select {
		case <-ctx.Done():
			return idempotency.ClaimResult{}, fmt.Errorf("%w: %w", idempotency.ErrStoreUnavailable, ctx.Err())
		case <-w.release:
		}
	}
	return res, err
}

// retryUntilSettled calls Do with c until the answer is not in_progress
// (the first claim's lease may still run), for at most lease + 2s.
func retryUntilSettled(t *testing.T, o *retry.Orchestrator, c retry.Call, lease time.Duration) (retry.Answer, error) {
	t.Helper()
	deadline := time.Now().Add(lease + 2*time.Second)
	for {
		out, err := o.Do(context.Background(), c)
		if !errors.Is(err, idempotency.ErrInProgress) || time.Now().After(deadline) {
			return out, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClaimSettledAfterCallerCancels: the caller's ctx ends while its claim
// of an unsupported call is on the wire. The claim ran, reserving attempt
// 1 that nobody sends; it must not burn the slot. The retry with the same
// key dispatches exactly once and ends accepted; its receipt counts the
// given-back attempt (2) while the vendor saw 1.
func TestClaimSettledAfterCallerCancels(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const lease = time.Second
		v := newVendor(t, status(201))
		ws := newWireStore(b.open(t, lease), 0)
		o := orch(ws, lease)
		c := call(v.URL, spec(effectspec.BindingUnsupported), idempotency.NewKey(), &retry.Executor{})

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { _, err := o.Do(ctx, c); done <- err }()
		<-ws.applied
		cancel()
		var err error
		select {
		case err = <-done:
		case <-time.After(200 * time.Millisecond):
			close(ws.release)
			err = <-done
		}
		if err == nil {
			t.Fatal("Do with a cancelled caller: no error")
		}
		if v.seen.Load() != 0 {
			t.Fatalf("the vendor saw %d requests for a cancelled call", v.seen.Load())
		}

		out, err := retryUntilSettled(t, o, c, lease)
		if err != nil {
			t.Fatalf("the retry with the same key: %v (want it dispatched)", err)
		}
		if out.Receipt.Outcome != effectspec.Accepted || out.Receipt.AttemptCount != 2 || out.Receipt.Replayed {
			t.Fatalf("the retry: outcome %s, attempt_count %d, replayed %v; want accepted, 2 (one given back), fresh",
				out.Receipt.Outcome, out.Receipt.AttemptCount, out.Receipt.Replayed)
		}
		if v.seen.Load() != 1 {
			t.Fatalf("the vendor saw %d requests, want 1", v.seen.Load())
		}
	})
}

// TestClaimSettledAfterLostReply: every reply to the claim that the caller
// waits for is lost (a stalled Redis that ran it later), so the caller gets
// store_unavailable; the claim is settled in the background and the retry
// with the same key dispatches exactly once.
func TestClaimSettledAfterLostReply(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const lease = time.Second
		v := newVendor(t, status(201))
		ws := newWireStore(b.open(t, lease), 3) // the first send and both StoreRetries
		close(ws.release)
		o := orch(ws, lease)
		c := call(v.URL, spec(effectspec.BindingUnsupported), idempotency.NewKey(), &retry.Executor{})
		if _, err := o.Do(context.Background(), c); !errors.Is(err, idempotency.ErrStoreUnavailable) {
			t.Fatalf("Do with every claim reply lost: %v, want store unavailable", err)
		}
		out, err := retryUntilSettled(t, o, c, lease)
		if err != nil {
			t.Fatalf("the retry with the same key: %v (want it dispatched)", err)
		}
		if out.Receipt.Outcome != effectspec.Accepted || out.Receipt.AttemptCount != 2 {
			t.Fatalf("the retry: outcome %s, attempt_count %d; want accepted, 2 (one given back)", out.Receipt.Outcome, out.Receipt.AttemptCount)
		}
		if v.seen.Load() != 1 {
			t.Fatalf("the vendor saw %d requests, want 1", v.seen.Load())
		}
	})
}

// downStore answers every claim store_unavailable without running it while
// down is set: a Redis that cannot be reached.
type downStore struct {
	idempotency.Store
	down atomic.Bool
}

func (d *downStore) Claim(ctx context.Context, r idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	if d.down.Load() {
		return idempotency.ClaimResult{}, fmt.Errorf("%w: unreachable", idempotency.ErrStoreUnavailable)
	}
	return d.Store.Claim(ctx, r)
}

// TestClaimRecoveryLifecycle: the re-senders are capped, report what they
// did, give back the attempt a late answer reserved, and stop at Close.
func TestClaimRecoveryLifecycle(t *testing.T) {
	b := backends()[0]
	st := &downStore{Store: b.open(t, 5*time.Second)}
	st.down.Store(true)
	events := make(chan retry.ClaimRecovery, 16)
	o := orch(st, 5*time.Second)
	o.ClaimWait, o.MaxClaimRecoveries = 100*time.Millisecond, 1
	o.OnClaimRecovery = func(_ *retry.Call, ev retry.ClaimRecovery) { events <- ev }
	next := func(want retry.ClaimRecovery) {
		t.Helper()
		select {
		case ev := <-events:
			if ev != want {
				t.Fatalf("recovery event %q, want %q", ev, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no recovery event, want %q", want)
		}
	}
	v := newVendor(t, status(201))
	sp := spec(effectspec.BindingUnsupported)
	a := call(v.URL, sp, idempotency.NewKey(), &retry.Executor{})
	if _, err := o.Do(context.Background(), a); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("Do with the store down: %v", err)
	}
	next(retry.RecoveryStarted)
	if _, err := o.Do(context.Background(), call(v.URL, sp, idempotency.NewKey(), &retry.Executor{})); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("Do with the store down: %v", err)
	}
	next(retry.RecoveryDropped) // MaxClaimRecoveries 1
	if n := o.ClaimRecoveries(); n != 1 {
		t.Fatalf("ClaimRecoveries %d, want 1", n)
	}

	// The store comes back: the re-sent claim reserves attempt 1, which is
	// given back at once.
	st.down.Store(false)
	next(retry.RecoveryGivenBack)
	rec, err := st.Lookup(context.Background(), a.Scope, a.Key)
	if err != nil || rec.State != effectspec.Unknown || rec.AttemptCount != 1 || rec.SentAttempts != 0 {
		t.Fatalf("after the give-back: %+v %v; want unknown, 1 attempt, none sent", rec, err)
	}
	out, err := o.Do(context.Background(), a)
	expect(t, out, err, effectspec.Accepted, 2, v.seen.Load())

	st.down.Store(true)
	if _, err := o.Do(context.Background(), call(v.URL, sp, idempotency.NewKey(), &retry.Executor{})); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("Do with the store down: %v", err)
	}
	next(retry.RecoveryStarted)
	o.Close()
	next(retry.RecoveryAbandoned)
	if n := o.ClaimRecoveries(); n != 0 {
		t.Fatalf("ClaimRecoveries after Close: %d", n)
	}
	if _, err := o.Do(context.Background(), call(v.URL, sp, idempotency.NewKey(), &retry.Executor{})); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("Do after Close with the store down: %v", err)
	}
	next(retry.RecoveryDropped)
	o.Close() // twice is fine
}
