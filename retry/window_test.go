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
