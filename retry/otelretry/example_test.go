package otelretry_test

import (
	"net/http"

	"go.opentelemetry.io/otel"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
	"github.com/obol-gateway/obol/retry/otelretry"
)

// A gateway traces its calls: the orchestrator's spans go under the span in
// each Do's ctx, and the vendor receives each attempt's traceparent.
func Example() {
	var store idempotency.Store // a redisstore.Store
	o := &retry.Orchestrator{
		Store:  store,
		Tracer: &otelretry.Tracer{Tracer: otel.Tracer("gateway")},
	}
	target := &retry.HTTPTarget{
		URL:           "https://api.vendor.example/v1/charges",
		Header:        http.Header{"Authorization": {"Bearer ..."}},
		InjectHeaders: otelretry.Inject,
	}
	_, _ = o, target
}
