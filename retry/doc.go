// Package retry makes the outbound attempts of a tool call: exactly one HTTP
// attempt per reservation, with no hidden retry below it, so that the
// attempt_count on a receipt equals the number of requests the vendor could
// have seen.
//
// The one recommended path is an Orchestrator per gateway and one Do per
// tool call:
//
//	o := &retry.Orchestrator{Store: store} // zero Policy: production
//	target := &retry.HTTPTarget{URL: "https://api.stripe.com/v1/charges", Header: auth}
//	route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{ // once per tool
//		Connection: "conn_stripe", Provider: "stripe", URL: target.URL,
//		Credential: "STRIPE_SECRET_KEY", // names the vendor account, never holds its key
//	})
//	out, err := o.Do(ctx, retry.Call{
//		Scope: scope, Key: key, KeySource: source, Arguments: args, Spec: spec,
//		Route: route, Target: target,
//	})
//	// err: a refusal (errors.Is against idempotency.ErrRequestMismatch,
//	// ErrInProgress, ErrOutcomeUnknown, effectspec.ErrPolicyDenied, ...),
//	// nothing was sent. Otherwise out.Receipt says what happened, out.Result
//	// holds the vendor's answer (fresh or replayed).
//
// The Route holds every fact the claim's fingerprint covers (the URL's
// scheme, host and path template, the method, where the key goes, the
// vendor account): build it with idempotency.NewRoute, or take a federated
// one from broker.Prepare. Do refuses a Route that lacks one
// (idempotency.ErrWeakRoute) before any store call.
//
// A Target of its own uses a long-lived Executor and one Do per reserved
// attempt:
//
//	var exec retry.Executor // keep it: it pools keep-alive connections
//
//	res := exec.Do(ctx, req) // ctx: the dispatch deadline inside the lease
//	switch res.Phase {
//	case retry.BeforeSend: // proven: the vendor got no byte; may be attempted again
//	case retry.PostSend:   // the vendor may have seen it: the outcome is unknown
//	case retry.Responded:  // res.Status, res.Header, res.Body (or res.Truncated)
//	}
//
// What must not leak: every credential a Target sends is reported as a
// SecretHolder or in Call.Secrets, so that it is scrubbed from the vendor's
// answer. The body and headers of OnAttempt's Result are not scrubbed yet,
// and the error an *Error wraps may quote the request: log neither.
//
// Orchestrator.Do lists the rules of a call's lifecycle, Executor how no
// transport re-sends a request, and Phase what each outcome proves. The
// contract is docs/DESIGN.md section 8.
package retry
