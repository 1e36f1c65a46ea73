// Package nango is the broker adapter for Nango: its proxy and its
// synchronous actions, with Nango's own retries off.
//
// A routing with "path" goes to the proxy; one with "action" triggers an
// action. Both need "connection_id" and "provider_config_key":
//
//	b, err := nango.New(nango.Config{BaseURL: "https://api.nango.dev", Secret: os.Getenv("NANGO_SECRET_KEY")})
//	...
//	target, route, err := broker.Prepare(b, "hubspot.create_contact", map[string]string{
//		"connection_id": "user-42", "provider_config_key": "hubspot",
//		"method": "POST", "path": "/crm/v3/objects/contacts",
//	})
//
// # Wire
//
// Proxy: {method} {BaseURL}/proxy/{path}, with the arguments as the JSON
// body. Action: POST {BaseURL}/action/trigger with the body
// {"action_name": ..., "input": <arguments>}. Either way the arguments are
// sent byte for byte (absent arguments as {}). Every request carries
//
//	Authorization: Bearer <Secret>
//	Connection-Id: <connection_id>
//	Provider-Config-Key: <provider_config_key>
//	Retries: 0
//
// and an action also carries "X-Async: false". Retry-On and X-Max-Retries
// are never sent. The header names, the proxy's Retries and Retry-On, and
// the rule that the proxy forwards to the vendor only headers prefixed
// "Nango-Proxy-" (the prefix stripped) are from Nango's proxy reference:
//
//	https://nango.dev/docs/reference/backend/http-api/proxy
//	https://mintlify.wiki/nangohq/nango/reference/proxy
//
// The trigger body, X-Async, and X-Max-Retries (0 to 5, for asynchronous
// actions) are from:
//
//	https://nango.dev/docs/reference/backend/http-api/action/trigger.md
//	https://www.nango.dev/docs/implementation-guides/actions/async-actions
//
// Nango documents actions as superseded by tools; the trigger endpoint
// remains callable and is what this adapter speaks.
//
// # Decisions where the contract is silent
//
//   - "Retries: 0" is sent on actions too, not only on the proxy. Nango's
//     default is 0 today; sending it makes the request say what we need
//     whatever a future default becomes, and it is harmless where ignored.
//   - No Nango-Proxy- header is sent, so none of our headers reaches the
//     vendor: in particular never an idempotency key, which a broker does not
//     propagate.
//   - The proxy method defaults to POST and must be GET, POST, PUT, PATCH or
//     DELETE (the methods the proxy serves). A GET sends no body, so its
//     arguments must be absent or {}: anything else is refused rather than
//     dropped. Query parameters belong in the path.
//   - The path may carry a query but no fragment, and no "." or ".."
//     segment, even percent-encoded: after normalization such a path would
//     leave /proxy/ and reach Nango's own API with our secret.
//   - Responses pass through unchanged: the proxy relays the vendor's status,
//     headers and body, and a synchronous action answers with its output or
//     an error status. Nango's own refusals (unknown connection, bad secret)
//     are statuses the tool's EffectSpec classifies.
//   - Route's Path for an action is "/action/trigger/" plus the escaped
//     action name, so another action is another destination.
//   - Connection-Id and Provider-Config-Key must be printable ASCII without
//     spaces (at most 256 bytes); an action name, printable text.
package nango
