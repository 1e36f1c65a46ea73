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

// ScopeName is the instrumentation scope of the spans made by a [Tracer]
// whose Tracer field is nil.
const ScopeName = "github.com/obol-gateway/obol/retry"

// Tracer implements [retry.Tracer] with OpenTelemetry. The zero value uses
// the global TracerProvider.
type Tracer struct {
	// Tracer makes the spans. If nil, the global TracerProvider's tracer
	// named [ScopeName], looked up at each span.
	Tracer trace.Tracer
	// Describe, if non-nil, gives the status description of a span that
	// failed with err; it must not return a secret or an argument value. If
	// nil, the description is the message of the [*retry.Error] in err's
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

// Inject writes the W3C traceparent of ctx's span into h, whatever the
// global propagator is: the vendor sees which attempt it got. It never
// writes a tracestate (nor baggage): a span's tracestate may have come from
// a client's, which is not the vendor's to read. It writes nothing when ctx
// carries no valid span.
func Inject(ctx context.Context, h http.Header) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	ctx = trace.ContextWithSpanContext(ctx, sc.WithTraceState(trace.TraceState{}))
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}

// ServerSpan returns the options that start a gateway's span for a call
// whose client sent the request headers h, at the trust boundary: the
// span is a new root, so the trace the vendor sees and the sampling
// decision are the gateway's (a client's "not sampled" flag cannot hide a
// call, nor its trace id join the vendor's logs to the client's), and a
// valid traceparent of the client's becomes a link (attribute obol.link=client), without its
// tracestate. Pass them to [trace.Tracer].Start with the span kind and
// attributes.
func ServerSpan(h http.Header) []trace.SpanStartOption {
	opts := []trace.SpanStartOption{trace.WithNewRoot()}
	if h == nil {
		return opts
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(h))
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc.WithTraceState(trace.TraceState{}),
			Attributes: []attribute.KeyValue{attribute.String(attrLinkKind, linkClient)}}))
	}
	return opts
}

// The attribute [ServerSpan] puts on the link to a client's span:
// obol.link=client.
const (
	attrLinkKind = "obol.link"
	linkClient   = "client"
)
