package otelretry

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/obol-gateway/obol/retry"
)

// ScopeName is the instrumentation scope of the spans made by a Tracer
// whose Tracer field is nil.
const ScopeName = "github.com/obol-gateway/obol/retry"

// Tracer implements retry.Tracer with OpenTelemetry. The zero value uses
// the global TracerProvider.
type Tracer struct {
	// Tracer makes the spans. If nil, the global TracerProvider's tracer
	// named ScopeName, looked up at each span.
	Tracer trace.Tracer
	// Describe, if non-nil, gives the status description of a span that
	// failed with err; it must not return a secret or an argument value. If
	// nil, the description is the message of the *retry.Error in err's
	// chain (a fixed vocabulary: phase, step, cause) and empty for any other
	// error, since a Target's own error may quote what it sent.
	Describe func(err error) string
}

var _ retry.Tracer = (*Tracer)(nil)

// Start starts an internal span named name as a child of ctx's span.
func (t *Tracer) Start(ctx context.Context, name string, attrs ...retry.Attr) (context.Context, func(error, ...retry.Attr)) {
	tr := t.Tracer
	if tr == nil {
		tr = otel.Tracer(ScopeName)
	}
	ctx, span := tr.Start(ctx, name, trace.WithAttributes(convert(attrs)...))
	return ctx, func(err error, attrs ...retry.Attr) {
		span.SetAttributes(convert(attrs)...)
		if err != nil {
			span.SetStatus(codes.Error, t.describe(err))
		}
		span.End()
	}
}

func (t *Tracer) describe(err error) string {
	if t.Describe != nil {
		return t.Describe(err)
	}
	if e, ok := errors.AsType[*retry.Error](err); ok {
		return e.Error()
	}
	return ""
}

// convert maps retry attributes to OpenTelemetry's; a value of another type
// than string, int or bool is dropped rather than formatted, since its
// text could hold anything.
func convert(attrs []retry.Attr) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(attrs))
	for _, a := range attrs {
		switch v := a.Value.(type) {
		case string:
			out = append(out, attribute.String(a.Key, v))
		case int:
			out = append(out, attribute.Int(a.Key, v))
		case bool:
			out = append(out, attribute.Bool(a.Key, v))
		}
	}
	return out
}

// Inject writes the W3C traceparent (and tracestate) of ctx's span into h,
// whatever the global propagator is: the vendor sees which attempt it got.
// It writes nothing when ctx carries no valid span.
func Inject(ctx context.Context, h http.Header) {
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}
