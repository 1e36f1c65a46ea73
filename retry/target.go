package retry

import (
	"context"
	"encoding/json"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// Attempt is one reserved attempt of a call, as a [Target] sends it.
type Attempt struct {
	// Key is the key to send to the vendor: the slot's vendor key
	// (docs/DESIGN.md, "The key on the vendor hop"), never the client's key
	// (except for a record that holds no vendor key). A Target
	// propagates it as Spec declares (or not at all for unsupported bindings
	// and federated routes).
	Key idempotency.Key
	// Number is the attempt number, which is also the fencing token.
	Number int
	// Arguments are the call's JSON arguments, unchanged.
	Arguments json.RawMessage
	// Spec is the tool's EffectSpec.
	Spec effectspec.Spec
}

// A Target sends exactly one attempt and reports what happened on the wire.
// It never retries: the [Orchestrator] owns every retry. Send must honour ctx,
// whose deadline lies inside the attempt's lease.
type Target interface {
	Send(ctx context.Context, a Attempt) Result
}

// TargetFunc adapts a function to a [Target].
type TargetFunc func(ctx context.Context, a Attempt) Result

// Send calls f(ctx, a).
func (f TargetFunc) Send(ctx context.Context, a Attempt) Result { return f(ctx, a) }
