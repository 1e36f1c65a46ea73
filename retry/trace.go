package retry

import (
	"context"

	"github.com/obol-gateway/obol/internal/spanattr"
)

// A Tracer records the steps of a call as spans, so that retry needs no
// tracing library: otelretry adapts OpenTelemetry to it. Start begins a span
// named name, a child of the span ctx carries, and returns a context
// carrying the new span and the function that ends it, with the call's
// error (nil on success) and attributes learnt meanwhile. The span in the
// ctx given to [Orchestrator.Do] should be the gateway's own, not one a
// client sent (otelretry.ServerSpan): the attempts' spans, and the
// traceparent a vendor gets, follow it.
//
// The spans are named obol.claim, obol.attempt (each attempt),
// obol.reserve (a second attempt's reservation) and obol.finalize. The
// [Orchestrator] never passes an argument value, a key or a header: the
// attributes' keys are obol.workspace, obol.tool, obol.connection,
// obol.key_source, obol.binding, obol.attempt (the attempt number),
// obol.phase, obol.vendor.status, obol.claim.status, obol.outcome and
// obol.attempt_count. The errors it passes hold no header value or URL, but
// one a [Target] made may quote what it sent: redact before recording.
type Tracer interface {
	Start(ctx context.Context, name string, attrs ...Attr) (context.Context, func(err error, attrs ...Attr))
}

// Attr is one span attribute. Value is a string, an int or a bool.
type Attr struct {
	Key   string
	Value any
}

// Span names.
const (
	spanClaim    = "obol.claim"
	spanAttempt  = "obol.attempt"
	spanReserve  = "obol.reserve"
	spanFinalize = "obol.finalize"
)

// Attribute keys: the strings the [Tracer] documentation lists.
const (
	attrWorkspace    = spanattr.Workspace
	attrTool         = spanattr.Tool
	attrConnection   = spanattr.Connection
	attrKeySource    = spanattr.KeySource
	attrClaimStatus  = spanattr.ClaimStatus
	attrBinding      = spanattr.Binding
	attrAttempt      = spanattr.Attempt
	attrPhase        = spanattr.Phase
	attrStatus       = spanattr.Status
	attrOutcome      = spanattr.Outcome
	attrAttemptCount = spanattr.AttemptCount
)

func noEnd(error, ...Attr) {}

// span starts a span through o.Tracer, or nothing when it is nil.
func (o *Orchestrator) span(ctx context.Context, name string, attrs ...Attr) (context.Context, func(error, ...Attr)) {
	if o.Tracer == nil {
		return ctx, noEnd
	}
	return o.Tracer.Start(ctx, name, attrs...)
}
