// Package effectspec declares, per tool, what a call does to the world and
// how the gateway's idempotency key reaches the vendor: the EffectSpec.
//
// The recommended path: load the specs once, check the policy before any
// claim, propagate the effective key into each attempt, and classify what the
// vendor answered.
//
//	specs, err := effectspec.ParseList(data) // every problem at once
//	...
//	if err := policy.Check(spec); err != nil { // before any claim
//		return err // errors.Is(err, effectspec.ErrPolicyDenied)
//	}
//	body, prop, err := spec.Apply(req.Header, args, key.String())
//	...
//	outcome := spec.Classify(resp.StatusCode)
//	again := spec.Retryable(resp.StatusCode) // the one immediate second attempt
//
// What must not go wrong: dispatch only with a spec that [Parse],
// [ParseList] or [New] returned ([Spec.Validated]); never send a call whose
// [Spec.Apply] failed; and in production a write whose vendor cannot
// deduplicate on the key is denied unless [Policy].AllowUnsupportedWrites
// says otherwise.
//
// Each rule where the contract is silent is on what it governs: loading on
// [Parse], the status lists on [Statuses], headers on [Binding].Header,
// an MCP tool's _meta member on [Binding].Meta,
// pointer writes on [SetAtPointer], timeouts on [Spec].Timeout, the vendor's
// window on [Binding].Window, errors on [FieldError] (the shape every
// package of the module refuses a field in), the policy on [Environment]
// and [Policy]. The contract is docs/DESIGN.md, "EffectSpec (JSON, one
// object per tool)".
package effectspec
