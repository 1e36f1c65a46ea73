// Package otelretry adapts OpenTelemetry to the hooks of package retry: a
// Tracer for retry.Orchestrator.Tracer, whose spans (the claim, each
// attempt, the finalize) are children of the span in the call's context,
// and Inject for retry.HTTPTarget.InjectHeaders, which sends the attempt
// span's W3C traceparent to the vendor. Spans hold no argument value, key
// or header, and an error's message only when it is known to be safe
// (Tracer.Describe).
//
// See docs/DESIGN.md for the lifecycle the spans follow.
package otelretry
