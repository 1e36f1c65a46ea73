package retry

import (
	"errors"
	"fmt"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
)

// Dispatch is a tool's dispatch checked once, when the tool is registered:
// its EffectSpec, its Route with the fingerprint the claim pins, its Target
// and the secrets scrubbed from its answers. Name it in every call of the
// tool ([Call.Dispatch]) and [Orchestrator.Do] skips the checks
// [NewDispatch] made, so a call's own work is its scope, its arguments'
// hash, the claim, the send and the finalize.
//
// A Dispatch is immutable and safe for concurrent use.
type Dispatch struct {
	spec    effectspec.Spec
	route   idempotency.Route   // its Binding set as Do sets it
	record  receipt.RouteRecord // route.Record(), fingerprint included
	target  Target
	secrets []string
	red     receipt.Redactor // of secrets

}

// NewDispatch checks a tool's dispatch as [Orchestrator.Do] checks a [Call]
// that names Spec, Route and Target itself: spec from effectspec.Parse,
// ParseList or New (else effectspec.ErrUnvalidated), a route with every
// fact its fingerprint needs and spec's kind and binding (else an error
// wrapping idempotency.ErrWeakRoute), a non-nil target, and secrets (with
// the target's, if it is a [SecretHolder]) of receipt.MinSecretLen bytes at
// least. A target whose Secrets change later is read only here.
func NewDispatch(spec effectspec.Spec, route idempotency.Route, target Target, secrets ...string) (*Dispatch, error) {
	c := Call{Spec: spec, Route: route, Target: target, Secrets: secrets}
	if err := checkDispatch(&c); err != nil {
		return nil, err
	}
	s, err := callSecrets(&c)
	if err != nil {
		return nil, err
	}
	d := &Dispatch{spec: spec, route: boundRoute(spec, route), target: target, secrets: s}
	d.record = d.route.Record()
	if len(s) > 0 {
		d.red = receipt.NewRedactor(s...)
	}
	return d, nil
}

// Spec is the tool's EffectSpec.
func (d *Dispatch) Spec() effectspec.Spec { return d.spec }

// Route is the tool's route, its Binding the one the claim pins.
func (d *Dispatch) Route() idempotency.Route { return d.route }

// Target is the tool's Target.
func (d *Dispatch) Target() Target { return d.target }

// errDispatchAndFields refuses a Call that names a Dispatch and also the
// fields it replaces: which of them to send would be a guess.
var errDispatchAndFields = errors.New("retry: Call.Dispatch is set with Spec, Route, Target or Secrets")

// checkDispatch is the part of Do's checks that a Dispatch makes once.
func checkDispatch(call *Call) error {
	if call.Target == nil {
		return errors.New("retry: Call.Target is nil")
	}
	if !call.Spec.Validated() {
		return fmt.Errorf("retry: Call.Spec: %w", effectspec.ErrUnvalidated)
	}
	return checkRoute(call.Spec, call.Route)
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

// prepare readies call for Do: from its Dispatch, or by the checks a
// Dispatch makes. It fills Spec, Route and Target from the Dispatch (hooks
// read them) and returns the route record the claim pins.
func prepare(call *Call) (receipt.RouteRecord, error) {
	if d := call.Dispatch; d != nil {
		if call.Target != nil || call.Spec.Validated() || call.Route != (idempotency.Route{}) || len(call.Secrets) > 0 {
			return receipt.RouteRecord{}, errDispatchAndFields
		}
		call.Spec, call.Route, call.Target = d.spec, d.route, d.target
		return d.record, nil
	}
	if err := checkDispatch(call); err != nil {
		return receipt.RouteRecord{}, err
	}
	if _, err := callSecrets(call); err != nil {
		return receipt.RouteRecord{}, err
	}
	call.Route = boundRoute(call.Spec, call.Route)
	return call.Route.Record(), nil
}
