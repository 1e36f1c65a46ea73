// Package otelhooks traces an [mcpgateway] gateway with OpenTelemetry: a
// root span per tools/call (the client's traceparent is a link, never the
// parent), the orchestrator's spans beneath it, and the attempt's
// traceparent on every vendor request; no key, argument or credential in
// any span (docs/DESIGN.md, "refserver wire contract").
//
// The one recommended path: a provider from the OTEL_EXPORTER_OTLP_*
// variables, on the gateway's config before [mcpgateway.New]:
//
//	tp, err := otelhooks.FromEnv(ctx, "my-gateway", log) // nil when unset
//	if tp != nil {
//		defer tp.Shutdown(context.Background())
//		otelhooks.Instrument(&gc, tp)
//	}
//	gw, err := mcpgateway.New(gc)
//
// The core mcpgateway pulls in no tracing SDK: this package does.
package otelhooks
