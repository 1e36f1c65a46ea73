// Package effectspec declares, per tool, what a call does to the world and
// how the gateway's idempotency key reaches the vendor: the EffectSpec.
//
// The recommended path: load the specs once, check the policy before any
// claim, propagate the effective key into each attempt, and classify what the
// vendor answered.
//
//	specs, err := effectspec.ParseList(data) // every problem at once
//	...
//	if err := spec.Check(env); err != nil { // before any claim
//		return err // errors.Is(err, effectspec.ErrPolicyDenied)
//	}
//	body, prop, err := spec.Apply(req.Header, args, key.String())
//	...
//	outcome := spec.Classify(resp.StatusCode)
//	again := spec.Retryable(resp.StatusCode) // the one immediate second attempt
//
// # Decisions where the contract is silent
//
// Loading. Member names match exactly (JSON is case-sensitive; encoding/json
// alone would accept "Tool"). Unknown and repeated members, null, values of the
// wrong type and trailing data are errors. An absent effect, route, approval or
// idempotency.binding takes its documented zero default (write, native, none,
// unsupported); an explicit "" is an error, because it is more likely a
// templating slip than a choice. Validate, which sees only Go values, accepts
// the empty defaults. A status list element must be an integer literal; an
// empty list reads as absent. Spec.MarshalJSON leaves empty enumerated fields
// out, so Parse(json.Marshal(s)) gives back every valid s.
//
// Validated specs. Parse, ParseList and New return specs marked validated;
// Validate only checks. Spec.Validated is false for a literal, a spec decoded
// with encoding/json, the zero Spec and a validated spec changed since, and
// retry.Orchestrator refuses those with ErrUnvalidated before any claim: a
// rule that was never checked can never decide a dispatch.
//
// Errors. Each problem is a *FieldError rendered as
// "effectspec: TOOL: FIELD: MSG" and unwrapping to ErrInvalidSpec; Parse,
// ParseList and Validate return them all at once in a *ValidationError. A tool
// name that is empty or invalid is shown as its list position "[N]" or
// quoted, never verbatim. Errors never contain keys or request bodies.
//
// Tool names are 1 to 128 of A-Z a-z 0-9 _ . - (the MCP tool name alphabet),
// so a name can never be mistaken for another part of a message, a log line or
// a storage key. ParseList refuses two specs for the same tool.
//
// Headers. A header binding names a valid RFC 9110 token that is not
// reserved: framing and hop-by-hop headers (Host, Content-Length,
// Transfer-Encoding, Trailer, TE, Connection, Keep-Alive, Proxy-Connection,
// Upgrade, Expect), credentials (Authorization, which carries the vendor
// secret, Proxy-Authorization, Proxy-Authenticate, Cookie) and the headers that
// say how the body is read (Content-Type, Content-Encoding). Apply replaces
// every value of the header under any spelling and writes the canonical name.
//
// Status lists. Codes are 100-599 with no repeats in a list; accepted and
// definitely_rejected are disjoint and retryable shares no code with accepted.
// retryable may share codes with definitely_rejected (retry once, then the
// rejection is final). retryable on a spec without a vendor binding is valid
// but inert: Retryable is false for every status. in_use (the vendor still
// works on a request with the same key) shares no code with any other list;
// Classify reads it as unknown and Retryable as false even in a spec that
// breaks that rule.
//
// Timeout. An absent timeout is the zero Timeout, read as the default 30s
// (AttemptTimeout), and json.Marshal leaves it out, so a spec keeps following
// the default. An explicit "0s" or a negative duration is an error, as is
// anything above 15m; any Go duration string is accepted ("90s", "1m30s").
//
// JSON Pointer writes (SetAtPointer). The root pointer is refused. Existing
// members and elements are replaced in place; "-" appends to an array; every
// missing parent is created as an object, so a created "0" or "-" is a member
// name. An index must exist (no leading zeros, no padding with nulls); use "-"
// to append. A member named twice on the path is an error, because JSON
// parsers disagree on which one counts. An empty body reads as {}; a body that
// is not one valid JSON object or array is an error. Outside the written value
// the body is unchanged byte for byte.
//
// Retry and dedup. VendorDedup is true only for a header or body_pointer
// binding on a native route; Retryable additionally needs the status in the
// retryable list. A status listed as both accepted and rejected (an invalid
// spec) classifies as unknown.
//
// Policy. The zero Environment, and any name this package does not know, is
// production: a typo never switches the policy off (ParseEnvironment catches
// typos at load time). In production a write whose vendor cannot deduplicate
// on the key (binding unsupported, or any federated route) is denied with
// ErrPolicyDenied, wire reason "policy_denied"; Policy.AllowUnsupportedWrites
// is the explicit opt-out. Reads, staging, development and test always pass.
package effectspec
