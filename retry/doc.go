// Package retry makes the outbound attempts of a tool call: exactly one HTTP
// attempt per reservation, with no hidden retry below it, so that the
// attempt_count on a receipt equals the number of requests the vendor could
// have seen. The one recommended path is an [Orchestrator] per gateway and
// one [Orchestrator.Do] per tool call:
//
//	o := &retry.Orchestrator{Store: store} // zero Policy: production
//	target := &retry.HTTPTarget{URL: "https://api.stripe.com/v1/charges", Header: auth}
//	route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{ // once per tool
//		Connection: "conn_stripe", Provider: "stripe", URL: target.URL,
//		Credential: "STRIPE_SECRET_KEY", // names the vendor account, never holds its key
//	})
//	tool, err := retry.NewDispatch(spec, route, target) // once per tool: checked here
//	out, err := o.Do(ctx, retry.Call{
//		Scope: scope, Key: key, KeySource: source, Arguments: args, Dispatch: tool,
//	})
//
// An error is a refusal, and nothing was sent: errors.Is matches it against
// [idempotency.ErrRequestMismatch], [idempotency.ErrInProgress],
// [idempotency.ErrOutcomeUnknown], [effectspec.ErrPolicyDenied], ..., and
// a [*RefusalError] says when to retry or whether a new key is safe.
// Otherwise the [Answer]'s Receipt says what happened and its Result holds
// the vendor's answer (fresh or replayed).
//
// What must not leak: every credential a [Target] sends is reported as a
// [SecretHolder] or in Call.Secrets, so that it is scrubbed from the vendor's
// answer. The body and headers of OnAttempt's Result are not scrubbed yet,
// and the error an [*Error] wraps may quote the request: log neither. A
// Target of its own sends through a long-lived [Executor]; [Phase] says what
// each outcome proves. The contract is docs/DESIGN.md, "Attempts and retries".
package retry
