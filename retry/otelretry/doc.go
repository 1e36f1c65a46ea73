// Package otelretry adapts OpenTelemetry to the hooks of package retry: a
// [Tracer] for [retry.Orchestrator].Tracer, whose spans (the claim, each
// attempt, the finalize) are children of the span in the call's context,
// and [Inject] for [retry.HTTPTarget].InjectHeaders, which sends the
// attempt span's W3C traceparent to the vendor and never a tracestate.
// Spans hold no argument value, key or header, and an error's message only
// when it is known to be safe (Tracer.Describe).
//
// A gateway is a trust boundary: start the span of each call with
// [ServerSpan], so a client's traceparent is a link, not the parent, and
// the trace the vendor sees and the sampling of the call are the gateway's.
//
// See docs/DESIGN.md for the lifecycle the spans follow.
package otelretry
