package retry_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// A vendor binding lets an unknown call be sent again only while the
// vendor still deduplicates on its key: the orchestrator claims with the
// spec's idempotency.window, and after it the retry is outcome_unknown and
// sends nothing (docs/DESIGN.md, "The record and its lifecycle").
func TestRetryAfterVendorWindow(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const lease, window = time.Second, 2 * time.Second
		o := orch(b.open(t, lease), lease)
		v := newVendor(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close() // read, then hung up: the outcome is unknown
			}
		})
		sp := spec(effectspec.BindingHeader)
		sp.Idempotency.Window = window
		c := call(v.URL, effectspec.MustNew(sp), idempotency.NewKey(), &retry.Executor{})
		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Unknown, 1, v.seen.Load())
		// From here a new attempt's lease would end outside the window.
		time.Sleep(window - lease + 100*time.Millisecond)
		if _, err := o.Do(context.Background(), c); !errors.Is(err, idempotency.ErrOutcomeUnknown) {
			t.Fatalf("retry after the vendor's window: %v, want ErrOutcomeUnknown", err)
		}
		if n := v.seen.Load(); n != 1 {
			t.Fatalf("vendor saw %d requests, want 1", n)
		}
	})
}

// A retry loop on an unknown call of a keyed tool reaches the vendor at
// most max_attempts times, spaced: from the third attempt on, a retry
// before its backoff ends is outcome_unknown with a retry-after, and past
// max_attempts (the spec's, else the orchestrator's) one without, saying
// why (docs/DESIGN.md, "The record and its lifecycle", "Redispatch limits").
func TestRetryLoopBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const lease = time.Second
		o := orch(b.open(t, lease), lease)
		v := newVendor(t, func(_ int64, w http.ResponseWriter, _ *http.Request) {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close() // read, then hung up: the outcome is unknown
			}
		})
		loop := func(sp effectspec.Spec) *retry.RefusalError {
			t.Helper()
			c := call(v.URL, effectspec.MustNew(sp), idempotency.NewKey(), &retry.Executor{})
			var ou *retry.RefusalError
			for i := range 10 {
				out, err := o.Do(context.Background(), c)
				if errors.As(err, &ou) && errors.Is(err, idempotency.ErrOutcomeUnknown) {
					return ou
				}
				if err != nil || out.Receipt.Outcome != effectspec.Unknown {
					t.Fatalf("call %d: %+v, %v; want unknown", i, out, err)
				}
			}
			t.Fatal("ten retries, none refused")
			return nil
		}
		sp := spec(effectspec.BindingHeader)
		sp.MaxAttempts = 2
		before := v.seen.Load()
		if ou := loop(sp); !ou.MaxAttemptsReached || ou.RetryAfter != 0 || v.seen.Load()-before != 2 {
			t.Fatalf("spec max_attempts 2: %+v, vendor saw %d; want max_attempts reached after 2", ou, v.seen.Load()-before)
		}
		sp.MaxAttempts = 0
		before = v.seen.Load()
		if ou := loop(sp); ou.MaxAttemptsReached || ou.RetryAfter <= 0 || ou.RetryAfter > 2*lease || v.seen.Load()-before != 2 {
			t.Fatalf("default max_attempts: %+v, vendor saw %d; want a backoff of up to 2 leases after 2", ou, v.seen.Load()-before)
		}
		o.MaxAttempts = 1
		before = v.seen.Load()
		if ou := loop(sp); !ou.MaxAttemptsReached || v.seen.Load()-before != 1 {
			t.Fatalf("orchestrator max_attempts 1: %+v, vendor saw %d; want max_attempts reached after 1", ou, v.seen.Load()-before)
		}
	})
}
