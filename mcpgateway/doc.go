// Package mcpgateway is the MCP layer of an idempotent tool-call gateway: an
// [http.Handler] for POST /mcp (the official go-sdk's Streamable HTTP,
// stateless) that reads each request once, strictly, takes the key from the
// Idempotency-Key header or params._meta["dev.obol/idempotency-key"], and
// runs every tools/call through a [retry.Orchestrator]: one claim, a replay
// of a finished call, a refusal for the same key with other arguments, the
// receipt in result._meta (DESIGN, section "refserver wire contract").
//
// The one path for a gateway: list each tool with its EffectSpec, a route
// from [idempotency.NewRoute] and its target, and serve the [Gateway]:
//
//	gw, err := mcpgateway.New(mcpgateway.Config{
//		Orchestrator: &retry.Orchestrator{Store: store},
//		Authenticate: func(token string) (string, bool) { ... }, // token -> workspace
//		Tools: []mcpgateway.Tool{{Spec: spec, Connection: "conn_pay", Route: route, Target: target}},
//	})
//	mux.Handle("/mcp", gw)
//
// Refusals are JSON-RPC errors whose error.data is an [ErrorData]; every
// answer to a tools/call carries the key in the Idempotency-Key header.
// Logging, metrics and tracing are hooks of [Config]; the package itself
// pulls in no metrics or tracing SDK.
package mcpgateway
