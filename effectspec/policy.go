package effectspec

import (
	"fmt"

	"github.com/obol-gateway/obol/internal/ident"
)

// Environment names where a gateway runs. The zero Environment reads as
// Production, and so does any name this package does not know: a typo must
// never switch the policy off.
type Environment string

const (
	Production  Environment = "production"
	Staging     Environment = "staging"
	Development Environment = "development"
	Test        Environment = "test"
)

// ParseEnvironment accepts "" (Production) and the names above, and refuses
// anything else, so configuration typos are caught at load time.
func ParseEnvironment(s string) (Environment, error) {
	switch e := Environment(s); e {
	case "":
		return Production, nil
	case Production, Staging, Development, Test:
		return e, nil
	}
	return "", fmt.Errorf("effectspec: unknown environment %s (want production, staging, development or test)", quoteTrunc(s))
}

// isProduction reports whether e counts as production: everything except
// staging, development and test.
func (e Environment) isProduction() bool {
	switch e {
	case Staging, Development, Test:
		return false
	}
	return true
}

// Policy decides, before any claim, whether a call may go ahead. The zero
// Policy is production with no exceptions.
type Policy struct {
	// Environment is where the gateway runs; see Environment.
	Environment Environment
	// AllowUnsupportedWrites lets writes whose vendor cannot deduplicate on
	// our key (binding unsupported, every federated route) run in production.
	// Such a call whose first attempt ends unknown is never sent again.
	AllowUnsupportedWrites bool
}

// Check returns nil or an error wrapping ErrPolicyDenied (wire reason
// ReasonPolicyDenied): in production, a write whose vendor cannot
// deduplicate on our key is denied unless AllowUnsupportedWrites is set.
// Reads and non-production environments always pass.
func (p Policy) Check(s Spec) error {
	if s.Effect == EffectRead || !p.Environment.isProduction() || p.AllowUnsupportedWrites || s.vendorDedup() {
		return nil
	}
	name := s.Tool
	if !ident.Valid(name) {
		name = quoteTrunc(name)
	}
	return fmt.Errorf("%w: %s: a write whose vendor cannot deduplicate on the key (binding %s) is not allowed in production",
		ErrPolicyDenied, name, s.bindingName())
}

func (s Spec) bindingName() string {
	if s.Route == RouteFederated {
		return "unsupported on a federated route"
	}
	if s.Idempotency.Kind == "" {
		return string(BindingUnsupported)
	}
	return quoteTrunc(string(s.Idempotency.Kind))
}
