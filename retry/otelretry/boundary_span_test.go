package otelretry_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/obol-gateway/obol/retry/otelretry"
)

const (
	clientTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientParent = "00f067aa0ba902b7"
)

// TestInjectWritesNoTracestate: a span whose context carries a tracestate
// (a client's, say) reaches the vendor as its traceparent only.
func TestInjectWritesNoTracestate(t *testing.T) {
	tid, _ := trace.TraceIDFromHex(clientTrace)
	sid, _ := trace.SpanIDFromHex(clientParent)
	ts, err := trace.ParseTraceState("clientvendor=ct-state-7781")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	h := http.Header{}
	otelretry.Inject(trace.ContextWithSpanContext(context.Background(), sc), h)
	if got, want := h.Get("Traceparent"), "00-"+clientTrace+"-"+clientParent+"-01"; got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
	if v := h.Values("Tracestate"); len(v) != 0 {
		t.Errorf("tracestate %q sent", v)
	}
}

// TestServerSpan: the span ServerSpan starts is a root of the gateway's
// own trace, sampled by the gateway's sampler whatever the client's flag,
// with one link to the client's span (no tracestate); a missing or invalid
// traceparent gives a root without links.
func TestServerSpan(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header http.Header
		link   bool
	}{
		{"sampled client", http.Header{"Traceparent": {"00-" + clientTrace + "-" + clientParent + "-01"}, "Tracestate": {"k=v-7781"}}, true},
		{"unsampled client", http.Header{"Traceparent": {"00-" + clientTrace + "-" + clientParent + "-00"}}, true},
		{"invalid traceparent", http.Header{"Traceparent": {"00-" + clientTrace + "-0000000000000000-01"}}, false},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)) // default: parent-based, always on at the root
			defer tp.Shutdown(context.Background())
			// A context that already carries the client's span must not
			// make it the parent either.
			ctx := context.Background()
			if tc.header != nil {
				tid, _ := trace.TraceIDFromHex(clientTrace)
				sid, _ := trace.SpanIDFromHex(clientParent)
				ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, Remote: true}))
			}
			_, span := tp.Tracer("test").Start(ctx, "tools/call", append(otelretry.ServerSpan(tc.header), trace.WithSpanKind(trace.SpanKindServer))...)
			span.End()
			ended := rec.Ended()
			if len(ended) != 1 {
				t.Fatalf("%d spans recorded, want 1 (sampled)", len(ended))
			}
			sp := ended[0]
			if sp.Parent().IsValid() || sp.SpanContext().TraceID().String() == clientTrace || !sp.SpanContext().IsSampled() {
				t.Errorf("span in trace %s under %v sampled %v, want a sampled root of its own trace",
					sp.SpanContext().TraceID(), sp.Parent(), sp.SpanContext().IsSampled())
			}
			links := sp.Links()
			if !tc.link {
				if len(links) != 0 {
					t.Errorf("links %v, want none", links)
				}
				return
			}
			if len(links) != 1 || links[0].SpanContext.TraceID().String() != clientTrace || links[0].SpanContext.SpanID().String() != clientParent ||
				links[0].SpanContext.TraceState().Len() != 0 || fmt.Sprint(links[0].Attributes) != fmt.Sprint([]attribute.KeyValue{attribute.String("obol.link", "client")}) {
				t.Errorf("links %+v, want one to the client's span without tracestate", links)
			}
		})
	}
}
