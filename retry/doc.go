// Package retry makes the outbound attempts of a tool call: exactly one HTTP
// attempt per reservation, with no hidden retry below it, so that the
// attempt_count on a receipt equals the number of requests the vendor could
// have seen.
//
// The one recommended path is an Orchestrator per gateway and one Do per
// tool call:
//
//	o := &retry.Orchestrator{Store: store} // zero Policy: production
//	out, err := o.Do(ctx, retry.Call{
//		Scope: scope, Key: key, KeySource: source, Arguments: args, Spec: spec,
//		Route:  idempotency.Route{Connection: "conn_stripe", Provider: "stripe", ...},
//		Target: &retry.HTTPTarget{URL: url, Header: auth},
//	})
//	// err: a refusal (errors.Is against idempotency.ErrRequestMismatch,
//	// ErrInProgress, ErrOutcomeUnknown, effectspec.ErrPolicyDenied, ...),
//	// nothing was sent. Otherwise out.Receipt says what happened, out.Result
//	// holds the vendor's answer (fresh or replayed).
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
