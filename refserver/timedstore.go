package main

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
type timedStore struct {
	idempotency.Store
	seconds *prometheus.HistogramVec // by op
}

var _ idempotency.Store = timedStore{}

func (t timedStore) observe(op string, start time.Time) {
	t.seconds.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

func (t timedStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	defer t.observe("claim", time.Now())
	return t.Store.Claim(ctx, req)
}

func (t timedStore) Reserve(ctx context.Context, req idempotency.ReserveRequest) (idempotency.Reservation, error) {
	defer t.observe("reserve", time.Now())
	return t.Store.Reserve(ctx, req)
}

func (t timedStore) Renew(ctx context.Context, req idempotency.RenewRequest) (time.Time, error) {
	defer t.observe("renew", time.Now())
	return t.Store.Renew(ctx, req)
}

func (t timedStore) Finalize(ctx context.Context, req idempotency.FinalizeRequest) (idempotency.Record, error) {
	defer t.observe("finalize", time.Now())
	return t.Store.Finalize(ctx, req)
}

func (t timedStore) Lookup(ctx context.Context, scope idempotency.Scope, key idempotency.Key) (idempotency.Record, error) {
	defer t.observe("lookup", time.Now())
	return t.Store.Lookup(ctx, scope, key)
}

func (t timedStore) Ticket(ctx context.Context, id string) (idempotency.Ticket, error) {
	defer t.observe("ticket", time.Now())
	return t.Store.Ticket(ctx, id)
}
