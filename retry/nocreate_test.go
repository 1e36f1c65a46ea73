package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// TestNoCreate: a call with NoCreate on a key without a record returns
// its error, sends nothing and writes nothing; the same call once the
// record exists replays it.
func TestNoCreate(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		v := newVendor(t, status(201))
		st := b.open(t, 5*time.Second)
		o := orch(st, 5*time.Second)
		c := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		full := errors.New("quota exceeded")
		c.NoCreate = full
		if _, err := o.Do(context.Background(), c); !errors.Is(err, full) {
			t.Fatalf("Do with NoCreate on a new key: %v, want its NoCreate error", err)
		}
		if _, err := st.Lookup(context.Background(), c.Scope, c.Key); !errors.Is(err, idempotency.ErrNotFound) {
			t.Fatalf("after a NoCreate refusal: Lookup %v, want ErrNotFound", err)
		}
		if v.seen.Load() != 0 {
			t.Fatalf("vendor saw %d requests", v.seen.Load())
		}
		c.NoCreate = nil
		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Accepted, 1, 1)
		c.NoCreate = full
		out, err = o.Do(context.Background(), c)
		if err != nil || out.Receipt.Outcome != effectspec.Accepted || v.seen.Load() != 1 {
			t.Fatalf("Do with NoCreate on an existing record: %v, outcome %s, vendor saw %d; want the replay",
				err, out.Receipt.Outcome, v.seen.Load())
		}
	})
}
