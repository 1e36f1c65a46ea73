// Package nango is the broker adapter for Nango: its proxy and its
// synchronous actions, with Nango's own retries off.
//
// A routing with "path" goes to the proxy; one with "action" triggers an
// action. Both need "connection_id" and "provider_config_key". Build the
// [broker.Broker] with [New] and prepare each tool's routing with
// [broker.Prepare]:
//
//	b, err := nango.New(nango.Config{BaseURL: "https://api.nango.dev", Secret: os.Getenv("NANGO_SECRET_KEY")})
//	...
//	target, route, err := broker.Prepare(b, "hubspot.create_contact", map[string]string{
//		"connection_id": "user-42", "provider_config_key": "hubspot",
//		"method": "POST", "path": "/crm/v3/objects/contacts",
//	})
//
// Proxy: {method} {BaseURL}/proxy/{path}, with the arguments as the JSON
// body. Action: POST {BaseURL}/action/trigger with the body
// {"action_name": ..., "input": <arguments>}. Either way the arguments are
// sent byte for byte (absent arguments as {}), and every request carries
// "Retries: 0". The full header set, Nango's references for it, and where
// the choices the contract leaves open are made are in the package's
// README.md.
package nango
