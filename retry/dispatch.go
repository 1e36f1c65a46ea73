package retry

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/ident"
	"github.com/obol-gateway/obol/receipt"
)

// Dispatch is a tool's dispatch checked once, when the tool is registered:
// its EffectSpec, its Route with the fingerprint the claim pins, its Target
// and the secrets scrubbed from its answers. Name it in every call of the
// tool ([Call.Dispatch]) and [Orchestrator.Do] checks only what depends on
// the call: its scope, its arguments, its key.
//
// A Dispatch is immutable and safe for concurrent use.
type Dispatch struct {
	spec    effectspec.Spec
	route   idempotency.Route        // its Binding set as the claim pins it
	claim   idempotency.ClaimRequest // the fields every claim of the tool shares
	target  Target
	secrets []string
	red     receipt.Redactor // of secrets

	// What a call's own checks need, proved here once.
	dedup     bool              // the vendor deduplicates on the key: a Target's Retryable may earn a second attempt
	retryable []int             // the statuses that may earn a second attempt ([effectspec.Spec.Retryable])
	deny      error             // the strictest Policy's decision: nil, and every Policy allows the tool
	scopeOf   idempotency.Scope // Connection and Tool proved valid scope segments; zero if not

	decided atomic.Pointer[decision] // a Policy's decision when deny is set, see decide
}

// decision is a Policy's decision on a Dispatch's spec.
type decision struct {
	policy effectspec.Policy
	err    error
}

// NewDispatch checks a tool's dispatch: spec from [effectspec.Parse],
// [effectspec.ParseList] or [effectspec.New] (else
// [effectspec.ErrUnvalidated]), a route with every fact its fingerprint
// needs and spec's kind and binding (else an error wrapping
// [idempotency.ErrWeakRoute]), a non-nil target, and secrets (with the
// target's, if it is a [SecretHolder]) of [receipt.MinSecretLen] bytes at
// least. A target whose Secrets change later is read only here.
func NewDispatch(spec effectspec.Spec, route idempotency.Route, target Target, secrets ...string) (*Dispatch, error) {
	return newDispatch(&Call{Spec: spec, Route: route, Target: target, Secrets: secrets}, receipt.NewRedactor)
}

// newDispatch checks the Spec, Route, Target and Secrets of c and makes
// them a Dispatch whose Redactor redactor makes.
func newDispatch(c *Call, redactor func(secrets ...string) receipt.Redactor) (*Dispatch, error) {
	if c.Target == nil {
		return nil, errors.New("retry: Call.Target is nil")
	}
	if !c.Spec.Validated() {
		return nil, fmt.Errorf("retry: Call.Spec: %w", effectspec.ErrUnvalidated)
	}
	if err := checkRoute(c.Spec, c.Route); err != nil {
		return nil, err
	}
	s, err := callSecrets(c)
	if err != nil {
		return nil, err
	}
	d := &Dispatch{spec: c.Spec, route: boundRoute(c.Spec, c.Route), target: c.Target, secrets: s}
	d.claim = idempotency.ClaimRequest{
		Binding:          d.route.Binding,
		Route:            d.route.Record(),
		ApprovalRequired: c.Spec.Approval == effectspec.ApprovalRequired,
		Timeout:          c.Spec.AttemptTimeout(),
		VendorWindow:     c.Spec.VendorWindow(),
	}
	if len(s) > 0 {
		d.red = redactor(s...)
	}
	d.dedup = c.Spec.Propagation() != effectspec.PropagationNone
	for _, st := range c.Spec.Status.Retryable {
		if c.Spec.Retryable(st) {
			d.retryable = append(d.retryable, st)
		}
	}
	// The zero Policy is the strictest: what it allows, every Policy does.
	d.deny = effectspec.Policy{}.Check(c.Spec)
	// A scope's segments are checked one by one: with a valid workspace
	// in it, this connection and tool make a valid scope with any.
	if sc := (idempotency.Scope{Workspace: "w", Connection: d.route.Connection, Tool: c.Spec.Tool}); sc.Validate() == nil {
		d.scopeOf = sc
	}
	return d, nil
}

// Spec is the tool's EffectSpec.
func (d *Dispatch) Spec() effectspec.Spec { return d.spec }

// errDispatchAndFields refuses a Call that names a Dispatch and also the
// fields it replaces: which of them to send would be a guess.
var errDispatchAndFields = errors.New("retry: Call.Dispatch is set with Spec, Route, Target or Secrets")

// dispatchOf returns the Dispatch of call and fills call's Spec, Route and
// Target from it, for the hooks. A call that names none gets one made of
// its own fields, checked as [NewDispatch] checks them.
func dispatchOf(call *Call) (*Dispatch, error) {
	if d := call.Dispatch; d != nil {
		// Any Tool says a Spec was set: a valid one always has one.
		if call.Target != nil || call.Spec.Tool != "" || call.Route != (idempotency.Route{}) || len(call.Secrets) > 0 {
			return nil, errDispatchAndFields
		}
		call.Spec, call.Route, call.Target = d.spec, d.route, d.target
		return d, nil
	}
	d, err := newDispatch(call, redactorFor)
	if err != nil {
		return nil, err
	}
	call.Route = d.route
	return d, nil
}

// decide is p's decision on d's spec ([effectspec.Policy.Check]), made
// once per Policy: an Orchestrator's does not change once it is in use.
// Only a spec the strictest Policy denies (deny) needs one.
func (d *Dispatch) decide(p effectspec.Policy) error {
	if dec := d.decided.Load(); dec != nil && dec.policy == p {
		return dec.err
	}
	err := p.Check(d.spec)
	d.decided.Store(&decision{policy: p, err: err})
	return err
}

// checkScope is s.Validate, less the segments d proved: per call, only
// the workspace of a scope whose connection and tool are d's.
func (d *Dispatch) checkScope(s idempotency.Scope) error {
	if d.scopeOf.Tool == "" || s.Connection != d.scopeOf.Connection || s.Tool != d.scopeOf.Tool || !ident.Valid(s.Workspace) {
		return s.Validate() // the whole check, and its error
	}
	return nil
}

// boundRoute is r with the binding the claim pins: spec's, or unsupported
// for a federated route or a spec without one.
func boundRoute(spec effectspec.Spec, r idempotency.Route) idempotency.Route {
	r.Binding = spec.Idempotency.Kind
	if spec.Route == effectspec.RouteFederated || r.Binding == "" {
		r.Binding = effectspec.BindingUnsupported
	}
	return r
}

// checkRoute refuses a Route that lacks a fact of its kind
// ([idempotency.Route.Check]), is of another kind than spec's route, or
// names another place for the key than spec's binding: its fingerprint
// would not tell this call's destination from another.
func checkRoute(spec effectspec.Spec, r idempotency.Route) error {
	if err := r.Check(); err != nil {
		return fmt.Errorf("retry: Call.Route: %w", err)
	}
	federated := spec.Route == effectspec.RouteFederated
	if federated != (r.Kind() == effectspec.RouteFederated) {
		return fmt.Errorf("retry: Call.Route: %w: %s: a %s route for a %s spec", idempotency.ErrWeakRoute, spec.Tool, r.Kind(), routeOf(spec))
	}
	if federated {
		return nil
	}
	var name string
	switch spec.Idempotency.Kind {
	case effectspec.BindingHeader:
		name = strings.ToLower(spec.Idempotency.Header)
	case effectspec.BindingBodyPointer:
		name = spec.Idempotency.Pointer
	case effectspec.BindingMeta:
		name = spec.Idempotency.Meta
		if name == "" && r.BindingName != "" {
			name = effectspec.DefaultMetaName
		}
	}
	if r.BindingName != name {
		return fmt.Errorf("retry: Call.Route: %w: %s: BindingName is not the spec's binding", idempotency.ErrWeakRoute, spec.Tool)
	}
	return nil
}

func routeOf(spec effectspec.Spec) effectspec.RouteKind {
	if spec.Route == "" {
		return effectspec.RouteNative
	}
	return spec.Route
}
