package retry_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// TestInjectHeadersLoseToHeaderAndKey: what InjectHeaders sets reaches the
// vendor, but never overrides the configured headers or the key.
func TestInjectHeadersLoseToHeaderAndKey(t *testing.T) {
	var got http.Header
	v := newVendor(t, func(n int64, w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		status(201)(n, w, r)
	})
	m := miniredis.RunT(t)
	o := orch(openStore(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true}, 5*time.Second, true), 5*time.Second)
	key := idempotency.NewKey()
	c := call(v.URL, spec(effectspec.BindingHeader), key, &retry.Executor{})
	c.Target.(*retry.HTTPTarget).InjectHeaders = func(_ context.Context, h http.Header) {
		h.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		h.Set("Authorization", "Bearer injected")
		h.Set("Idempotency-Key", "injected")
		h.Set("Content-Type", "text/plain")
	}
	out, err := o.Do(context.Background(), c)
	expect(t, out, err, "accepted", 1, v.seen.Load())
	for k, want := range map[string]string{
		"Traceparent":     "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		"Authorization":   "Bearer sk_test_secret",
		"Idempotency-Key": out.Receipt.VendorKey,
		"Content-Type":    "application/json",
	} {
		if got.Get(k) != want {
			t.Errorf("%s = %q, want %q", k, got.Get(k), want)
		}
	}
}

type spanKey struct{}

// recorder is a Tracer that notes each span's name, its parent (the ctx
// value of the span it was started under) and its attributes.
type recorder struct {
	mu    sync.Mutex
	spans []string
}

func (r *recorder) Start(ctx context.Context, name string, attrs ...retry.Attr) (context.Context, func(error, ...retry.Attr)) {
	parent, _ := ctx.Value(spanKey{}).(string)
	return context.WithValue(ctx, spanKey{}, name), func(err error, end ...retry.Attr) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.spans = append(r.spans, fmt.Sprintf("%s<%s %v %v err=%v", name, parent, attrs, end, err != nil))
	}
}

// TestTracerSpans: with a Tracer, every step is a span under the caller's,
// and the Target runs under its attempt's span; without one, nothing.
func TestTracerSpans(t *testing.T) {
	v := newVendor(t, status(201))
	m := miniredis.RunT(t)
	o := orch(openStore(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true}, 5*time.Second, true), 5*time.Second)
	rec := &recorder{}
	o.Tracer = rec
	c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
	var under string
	inner := c.Target
	c.Target = retry.TargetFunc(func(ctx context.Context, a retry.Attempt) retry.Result {
		under, _ = ctx.Value(spanKey{}).(string)
		return inner.Send(ctx, a)
	})
	ctx := context.WithValue(context.Background(), spanKey{}, "caller")
	if _, err := o.Do(ctx, c); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"obol.claim<caller [{obol.workspace ws_acme} {obol.tool pay.charge} {obol.connection conn_pay} {obol.key_source supplied} {obol.binding header}] [{obol.claim.status claimed}] err=false",
		"obol.attempt<caller [{obol.attempt 1} {obol.binding header}] [{obol.phase responded} {obol.vendor.status 201}] err=false",
		"obol.finalize<caller [{obol.attempt 1}] [{obol.outcome accepted} {obol.attempt_count 1}] err=false",
	}
	if fmt.Sprint(rec.spans) != fmt.Sprint(want) {
		t.Errorf("spans\n%q\nwant\n%q", rec.spans, want)
	}
	if under != "obol.attempt" {
		t.Errorf("Target ran under span %q", under)
	}
}
