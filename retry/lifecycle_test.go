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
// refused: provably nothing sent, twice) leaves the slot open, for an
// unsupported tool too, and the call is refused as vendor unreachable rather
// than answered unknown: the next call with the key dispatches, and the
// vendor sees it once. Its receipt counts the two reservations that never
// left (attempt_count 3, vendor 1). Before, the first call read "outcome
// unknown" with attempt_count 2.
func TestUnsentAttemptsFreeTheSlot(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, bind := range []effectspec.BindingKind{effectspec.BindingUnsupported, effectspec.BindingHeader} {
			down := httptest.NewServer(http.NotFoundHandler())
			downURL := down.URL
			down.Close() // connection refused from now on
			st := b.open(t, 5*time.Second)
			o := orch(st, 5*time.Second)
			o.UnreachableRetryAfter = 1500 * time.Millisecond
			c := call(downURL, spec(bind), idempotency.NewKey(), &retry.Executor{})
			out, err := o.Do(context.Background(), c)
			var ue *retry.RefusalError
			if !errors.Is(err, idempotency.ErrVendorUnreachable) || !errors.As(err, &ue) || ue.RetryAfter != 1500*time.Millisecond {
				t.Fatalf("%s: Do: %v (%+v), want a RefusalError with RetryAfter 1.5s", bind, err, out.Receipt)
			}
			if reason, status := idempotency.Reason(err); reason != "vendor_unreachable" || status != 503 {
				t.Fatalf("%s: reason %q %d", bind, reason, status)
			}
			if out.Key != c.Key || out.Result != nil {
				t.Fatalf("%s: answer %+v", bind, out)
			}
			rec, err := st.Lookup(context.Background(), c.Scope, c.Key)
			if err != nil || rec.SentAttempts != 0 || rec.AttemptCount != 2 || rec.State != effectspec.Unknown {
				t.Fatalf("%s: record %+v (%v): want unknown, 2 attempts, none that may have left", bind, rec, err)
			}
			v := newVendor(t, status(201))
			c.Target = &retry.HTTPTarget{Executor: &retry.Executor{}, URL: v.URL + "/charge", Header: http.Header{"Authorization": {"Bearer sk_test_secret"}}}
			out, err = o.Do(context.Background(), c)
			expect(t, out, err, effectspec.Accepted, 3, v.seen.Load())
			if v.seen.Load() != 1 {
				t.Fatalf("%s: vendor saw %d requests, want 1", bind, v.seen.Load())
			}
		}
	})
}

// TestUnreachableAfterAnAttemptMayHaveLeft: a redispatch of an unknown slot
// (its first attempt was read by the vendor, which hung up) that cannot
// connect is still unknown: the slot's count says an attempt may have left,
// so the answer is the unknown receipt, never vendor_unreachable.
func TestUnreachableAfterAnAttemptMayHaveLeft(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t, 5*time.Second)
		o := orch(st, 5*time.Second)
		url, seen := closeAfterRead(t)
		c := call(url, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Unknown, 1, seen.Load())
		down := httptest.NewServer(http.NotFoundHandler())
		down.Close()
		c.Target = &retry.HTTPTarget{Executor: &retry.Executor{}, URL: down.URL + "/charge"}
		out, err = o.Do(context.Background(), c)
		if errors.Is(err, idempotency.ErrVendorUnreachable) {
			t.Fatalf("redispatch of an unknown slot: %v, want the unknown receipt", err)
		}
		expect(t, out, err, effectspec.Unknown, 3, seen.Load())
		if out.Receipt.SafeNewKey == nil || *out.Receipt.SafeNewKey {
			t.Fatalf("safe_new_key %v, want false", out.Receipt.SafeNewKey)
		}
		if rec, err := st.Lookup(context.Background(), c.Scope, c.Key); err != nil || rec.SentAttempts != 1 {
			t.Fatalf("record %+v (%v): want one attempt that may have left", rec, err)
		}
	})
}

// TestOtherBeforeSendCausesKeepTheirAnswer: an attempt stopped unsent by
// anything but a failed connection (its send deadline, an in-process
// handler's NothingDone) on a slot that never sent is not vendor_unreachable:
// the vendor may well be reachable.
func TestOtherBeforeSendCausesKeepTheirAnswer(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		o := orch(b.open(t, 5*time.Second), 5*time.Second)
		for _, cause := range []error{retry.ErrSendDeadline, context.DeadlineExceeded} {
			c := call("http://vendor.invalid", spec(effectspec.BindingHeader), idempotency.NewKey(), nil)
			c.Target = retry.TargetFunc(func(context.Context, retry.Attempt) retry.Result {
				return retry.Result{Phase: retry.BeforeSend, Err: &retry.Error{Phase: retry.BeforeSend, Op: "round trip", Reason: "stopped", Err: cause}}
			})
			out, err := o.Do(context.Background(), c)
			expect(t, out, err, effectspec.Unknown, 1, 0)
		}
	})
}
