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
// The choices where the contract is silent are on the code they govern:
// parseRouting (fields, methods), checkPath (what a proxy path may hold),
// newRequest (the headers), proxyRequest (GET) and Dispatch (answers).
package nango
