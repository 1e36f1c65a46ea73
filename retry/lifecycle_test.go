package retry_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// TestUnbuildableRequestIsNeverRetried: a body pointer that crosses a
// string can never be written, so the request can never be built. It fails
// the same way every time: one reservation, no second attempt, nothing sent.
func TestUnbuildableRequestIsNeverRetried(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		v := newVendor(t, status(201))
		var results []retry.Result
		o := orch(b.open(t, 5*time.Second), 5*time.Second)
		c := call(v.URL, spec(effectspec.BindingBodyPointer), idempotency.NewKey(), &retry.Executor{})
		c.Arguments = []byte(`{"amount": 100, "meta": "not an object"}`)
		tgt := c.Target
		c.Target = retry.TargetFunc(func(ctx context.Context, a retry.Attempt) retry.Result {
			res := tgt.Send(ctx, a)
			results = append(results, res)
			return res
		})
		out, err := o.Do(context.Background(), c)
		if len(results) != 1 || results[0].Phase != retry.BeforeSend || !errors.Is(results[0].Err, idempotency.ErrInvalidRequest) {
			t.Fatalf("attempts %+v: want one before_send attempt with idempotency.ErrInvalidRequest", results)
		}
		if v.seen.Load() != 0 {
			t.Fatalf("vendor saw %d requests", v.seen.Load())
		}
		if !errors.Is(err, idempotency.ErrInvalidRequest) || out.Receipt.Outcome == effectspec.Accepted {
			t.Fatalf("Do: %v (receipt %+v), want idempotency.ErrInvalidRequest", err, out.Receipt)
		}
	})
}

// TestUnsentAttemptsFreeTheSlot: a vendor that cannot be reached (connection
// refused: provably nothing sent, twice) leaves an unsupported tool's slot
// open: the next call with the key dispatches, and the vendor sees it once.
// Before, the slot answered outcome_unknown for good though nothing left.
func TestUnsentAttemptsFreeTheSlot(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		down := httptest.NewServer(http.NotFoundHandler())
		downURL := down.URL
		down.Close() // connection refused from now on
		st := b.open(t, 5*time.Second)
		o := orch(st, 5*time.Second)
		c := call(downURL, spec(effectspec.BindingUnsupported), idempotency.NewKey(), &retry.Executor{})
		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Unknown, 2, 0)
		rec, err := st.Lookup(context.Background(), c.Scope, c.Key)
		if err != nil || rec.SentAttempts != 0 {
			t.Fatalf("record %+v (%v): want no attempt that may have left", rec, err)
		}
		v := newVendor(t, status(201))
		c.Target = &retry.HTTPTarget{Executor: &retry.Executor{}, URL: v.URL + "/charge", Header: http.Header{"Authorization": {"Bearer sk_test_secret"}}}
		out, err = o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Accepted, 3, v.seen.Load())
		if v.seen.Load() != 1 {
			t.Fatalf("vendor saw %d requests, want 1", v.seen.Load())
		}
	})
}
