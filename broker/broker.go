package broker

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/ident"
	"github.com/obol-gateway/obol/retry"
)

// Call is one attempt of a federated tool call as a Broker sends it. It has
// no key: a broker never propagates the idempotency key.
type Call struct {
	// Tool is the gateway's tool name. Adapters use it only in the Route;
	// the broker-side tool (Nango action, Composio tool slug, proxy path)
	// comes from Routing.
	Tool string
	// Arguments are the call's JSON arguments; absent ones (nil, blank,
	// null: idempotency.ArgumentsOrEmpty) read as {}.
	Arguments json.RawMessage
	// Routing holds the adapter's routing fields, such as connection_id.
	Routing map[string]string
	// Attempt is the reserved attempt number. It is informational: nothing
	// derived from it is sent.
	Attempt int
}

// A Broker dispatches federated calls through a catalog broker (Nango,
// Composio).
//
// Dispatch makes exactly one HTTP request through a retry.Executor and
// returns what the Executor reports: before_send, post_send or responded. It
// never retries and never asks the broker to retry. A call it refuses before
// sending (bad routing, bad arguments) is before_send with an error that
// unwraps to one of this package's sentinels (see Refused). Statuses pass
// through unchanged, including the broker's own (a Nango 404 for an unknown
// connection, a Composio 401): the tool's EffectSpec classifies them like
// any vendor status, so a federated spec should list the broker's refusals
// it knows to be harmless. The one translation is Composio's
// "successful": false, documented in broker/composio. Adapters send through
// their own zero retry.Executor unless given one; sharing the gateway's
// shares its limits and keep-alive pool.
//
// A Broker that sends credentials should also have a method
// Secrets() []string returning them, each at least receipt.MinSecretLen
// bytes long: Target reports them to the orchestrator, which scrubs them from
// the broker's answers (docs/DESIGN.md, "Attempts and retries").
//
// Route validates routing fields without sending anything and returns the
// non-secret dispatch facts the claim pins (docs/DESIGN.md, "Request hash and
// dispatch fingerprint"). Prepare calls it when the tool is configured, so that
// bad routing fails at load time. The Route's Connection is the broker-side
// connection (Nango connection_id, Composio connected_account_id), not the
// gateway's broker id: it decides where the effect lands, so a key reused
// against another broker-side connection is a destination_conflict. Its Broker
// names the adapter kind.
type Broker interface {
	Dispatch(ctx context.Context, call Call) retry.Result
	Route(tool string, routing map[string]string) (idempotency.Route, error)
}

// Target adapts b to the orchestrator: each Send becomes one Dispatch of tool
// with a copy of routing taken now. Send refuses (before_send) an Attempt
// whose Spec fails ValidateSpec, and it never passes the Attempt's key on.
//
// The Target is a retry.SecretHolder: its Secrets are b's when b has a
// method Secrets() []string (both adapters do), so that the orchestrator
// scrubs the broker's key from every answer; else none.
func Target(b Broker, tool string, routing map[string]string) retry.Target {
	return &target{b: b, tool: tool, routing: maps.Clone(routing)}
}

// Prepare validates routing and returns the Target that sends tool with it and
// the Route that the claim pins (docs/DESIGN.md, "Request hash and dispatch
// fingerprint"). Use it when the tool is configured, instead of Route and
// Target apart.
//
// A Broker with a Prepare method of this signature (both adapters) builds
// both from one parse of routing, and its Target never parses routing
// again, so a fingerprint cannot be pinned for one routing and sent to
// another. For any other Broker, Prepare calls Route and then Target.
func Prepare(b Broker, tool string, routing map[string]string) (retry.Target, idempotency.Route, error) {
	if p, ok := b.(preparer); ok {
		return p.Prepare(tool, routing)
	}
	rt, err := b.Route(tool, routing)
	if err != nil {
		return nil, idempotency.Route{}, err
	}
	return Target(b, tool, routing), rt, nil
}

type preparer interface {
	Prepare(tool string, routing map[string]string) (retry.Target, idempotency.Route, error)
}

type target struct {
	b       Broker
	tool    string
	routing map[string]string
}

func (t *target) Send(ctx context.Context, a retry.Attempt) retry.Result {
	if err := ValidateSpec(a.Spec); err != nil {
		return Refused(err)
	}
	return t.b.Dispatch(ctx, Call{
		Tool:      t.tool,
		Arguments: a.Arguments,
		Routing:   maps.Clone(t.routing),
		Attempt:   a.Number,
	})
}

func (t *target) Secrets() []string {
	if h, ok := t.b.(interface{ Secrets() []string }); ok {
		return h.Secrets()
	}
	return nil
}

var _ retry.SecretHolder = (*target)(nil)

// ValidateSpec reports whether spec may be dispatched through a broker: its
// route must be "federated" and its binding "unsupported" (or absent), so
// that propagation is "none", as a federated call's receipt shows. It
// complements spec.Validate, which a loaded spec has already passed; Target
// checks it again on every attempt.
//
// Its error is an [*effectspec.FieldError] of the spec's route or binding
// that wraps [ErrNotFederated] or [ErrVendorBinding].
func ValidateSpec(spec effectspec.Spec) error {
	if spec.Route != effectspec.RouteFederated {
		return &effectspec.FieldError{Err: ErrNotFederated, Subject: quoteTool(spec.Tool), Field: "route",
			Problem: `must be "federated" for a broker`}
	}
	b := spec.Idempotency
	if (b.Kind != "" && b.Kind != effectspec.BindingUnsupported) || b.Header != "" || b.Pointer != "" {
		return &effectspec.FieldError{Err: ErrVendorBinding, Subject: quoteTool(spec.Tool), Field: "idempotency.binding",
			Problem: `must be "unsupported": a broker never propagates the key`}
	}
	return nil
}

// quoteTool is the tool name as an error shows it: a name that is not a
// valid one is quoted and cut short, since it may be anything.
func quoteTool(tool string) string {
	if ident.Valid(tool) {
		return tool
	}
	if len(tool) > 64 {
		tool = tool[:64] + "..."
	}
	return strconv.Quote(tool)
}

// Refused is the Result of a call refused before any byte was sent: phase
// before_send with a *retry.Error whose chain holds both err and
// idempotency.ErrInvalidRequest, so the orchestrator knows that repeating the
// attempt cannot help, exactly as for a request the Executor itself refuses.
// err's message must hold no secret; adapters only pass this package's
// sentinels and [*effectspec.FieldError] values.
func Refused(err error) retry.Result {
	return retry.Result{Phase: retry.BeforeSend, Err: &retry.Error{
		Phase:  retry.BeforeSend,
		Op:     "request",
		Reason: "invalid request",
		Err:    fmt.Errorf("%w: %w", idempotency.ErrInvalidRequest, err),
	}}
}
