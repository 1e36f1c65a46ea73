package promhooks

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/obol-gateway/obol/idempotency"
)

// timedStore observes the duration of every store call the orchestrator
// makes that sits on a call's path (claim, reserve, renew, finalize,
// lookup, ticket). A Redis round trip is what an idempotent call adds to a
// plain one, so its latency is the figure to watch.
// Its observers are resolved once, so that a call does not hash labels.
type timedStore struct {
	idempotency.Store
	claim, reserve, renew, finalize, lookup, ticket prometheus.Observer
}

var _ idempotency.Store = timedStore{}

func newTimedStore(s idempotency.Store, seconds *prometheus.HistogramVec) timedStore {
	return timedStore{Store: s,
		claim: seconds.WithLabelValues("claim"), reserve: seconds.WithLabelValues("reserve"),
		renew: seconds.WithLabelValues("renew"), finalize: seconds.WithLabelValues("finalize"),
		lookup: seconds.WithLabelValues("lookup"), ticket: seconds.WithLabelValues("ticket")}
}

func observe(o prometheus.Observer, start time.Time) { o.Observe(time.Since(start).Seconds()) }

func (t timedStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	defer observe(t.claim, time.Now())
	return t.Store.Claim(ctx, req)
}

func (t timedStore) Reserve(ctx context.Context, req idempotency.ReserveRequest) (idempotency.Reservation, error) {
	defer observe(t.reserve, time.Now())
	return t.Store.Reserve(ctx, req)
}

func (t timedStore) Renew(ctx context.Context, req idempotency.RenewRequest) (time.Time, error) {
	defer observe(t.renew, time.Now())
	return t.Store.Renew(ctx, req)
}

func (t timedStore) Finalize(ctx context.Context, req idempotency.FinalizeRequest) (idempotency.Record, error) {
	defer observe(t.finalize, time.Now())
	return t.Store.Finalize(ctx, req)
}

func (t timedStore) Lookup(ctx context.Context, scope idempotency.Scope, key idempotency.Key) (idempotency.Record, error) {
	defer observe(t.lookup, time.Now())
	return t.Store.Lookup(ctx, scope, key)
}

func (t timedStore) Ticket(ctx context.Context, id string) (idempotency.Ticket, error) {
	defer observe(t.ticket, time.Now())
	return t.Store.Ticket(ctx, id)
}
