package otelhooks

import (
	"context"
	"errors"
	"log/slog"
	"os"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/obol-gateway/obol/internal/spanattr"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/retry"
	"github.com/obol-gateway/obol/retry/otelretry"
)

// envEndpoint turns tracing on for [FromEnv]: spans go over OTLP/HTTP to
// this endpoint, and the other OTEL_EXPORTER_OTLP_* variables (headers,
// timeout, TLS) configure the exporter as OpenTelemetry defines them.
const envEndpoint = "OTEL_EXPORTER_OTLP_ENDPOINT"

// scopeName is the instrumentation scope of the tools/call spans: the
// package whose calls they are.
const scopeName = "github.com/obol-gateway/obol/mcpgateway"

// FromEnv returns a provider exporting over OTLP/HTTP when
// OTEL_EXPORTER_OTLP_ENDPOINT is set, else nil (the other
// OTEL_EXPORTER_OTLP_* variables configure the exporter as OpenTelemetry
// defines them); the caller flushes it with Shutdown. Its resource is
// service.name service plus OTEL_RESOURCE_ATTRIBUTES; its sampler
// OpenTelemetry's default or OTEL_TRACES_SAMPLER's. It routes
// OpenTelemetry's own messages to log as warnings with their fixed text only:
// they quote the values they could not parse (a header holding an API key,
// the endpoint). Errors name no variable's value either.
func FromEnv(ctx context.Context, service string, log *slog.Logger) (*sdktrace.TracerProvider, error) {
	if os.Getenv(envEndpoint) == "" {
		return nil, nil
	}
	otel.SetLogger(logr.New(otelLog{log}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) { log.Warn("tracing: a span export failed") }))
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, errors.New("otelhooks: the OTLP/HTTP exporter does not start; check the OTEL_EXPORTER_OTLP_* variables")
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && res == nil {
		res = resource.Default()
	}
	// The sampler decides at the root for every call: a call's span never
	// has the client's as its parent, so a client's flag decides nothing.
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// Instrument traces gc's calls with tp: a span per tools/call, the
// orchestrator's spans beneath it ([otelretry.Tracer]), and each HTTP
// target's traceparent sent to its vendor. It chains onto gc.OnCall (which
// still runs, inside the span). Call it once, before [mcpgateway.New].
//
// The span is a root ([otelretry.ServerSpan]): the client's traceparent, if
// valid, is a link to it, not its parent, so the client decides neither the
// trace the vendor sees nor whether the call is sampled, and its tracestate
// goes nowhere. It holds the tool, workspace and key source, and at its end
// the refusal's reason or the receipt's outcome, attempt count, status and
// replay flag; never the key, an argument or a credential.
func Instrument(gc *mcpgateway.Config, tp trace.TracerProvider) {
	tracer := tp.Tracer(scopeName)
	if gc.Orchestrator != nil {
		gc.Orchestrator.Tracer = &otelretry.Tracer{Tracer: tp.Tracer(otelretry.ScopeName)}
	}
	for _, t := range gc.Tools {
		if ht, ok := t.Target.(*retry.HTTPTarget); ok {
			ht.InjectHeaders = otelretry.Inject
		}
		if t.Upstream != nil {
			t.Upstream.InjectHeaders = otelretry.Inject
		}
	}
	prev := gc.OnCall
	gc.OnCall = func(ctx context.Context, c mcpgateway.CallStart) (context.Context, func(mcpgateway.CallEnd)) {
		attrs := []attribute.KeyValue{attribute.String("mcp.method.name", "tools/call"), attribute.String(spanattr.Tool, c.Tool),
			attribute.String(spanattr.Workspace, c.Workspace), attribute.String(spanattr.KeySource, string(c.KeySource))}
		opts := append(otelretry.ServerSpan(c.Header), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		ctx, span := tracer.Start(ctx, "tools/call", opts...)
		var end func(mcpgateway.CallEnd)
		if prev != nil {
			ctx, end = prev(ctx, c)
		}
		return ctx, func(e mcpgateway.CallEnd) {
			defer span.End()
			if end != nil {
				end(e)
			}
			if e.Refusal != "" {
				span.SetAttributes(attribute.String("obol.refusal", e.Refusal))
				span.SetStatus(codes.Error, e.Refusal)
			}
			if rc := e.Receipt; rc != nil {
				span.SetAttributes(attribute.String(spanattr.Outcome, string(rc.Outcome)), attribute.Int(spanattr.AttemptCount, rc.AttemptCount),
					attribute.Bool("obol.replayed", rc.Replayed))
				if rc.Status != 0 {
					span.SetAttributes(attribute.Int(spanattr.Status, rc.Status))
				}
			}
		}
	}
}

// otelLog is a logr sink for OpenTelemetry's messages, errors and warnings
// only, that logs their fixed text without the values and errors they
// carry.
type otelLog struct{ log *slog.Logger }

func (otelLog) Init(logr.RuntimeInfo)                 {}
func (otelLog) Enabled(level int) bool                { return level <= 1 } // errors and warnings
func (l otelLog) Info(_ int, msg string, _ ...any)    { l.log.Warn("tracing: " + msg) }
func (l otelLog) Error(_ error, msg string, _ ...any) { l.log.Warn("tracing: " + msg) }
func (l otelLog) WithValues(...any) logr.LogSink      { return l }
func (l otelLog) WithName(string) logr.LogSink        { return l }
