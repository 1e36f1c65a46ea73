// Package mcpgateway is the MCP layer of an idempotent tool-call gateway: an
// [http.Handler] for POST /mcp (the go-sdk's Streamable HTTP, stateless) that
// reads each request once, strictly, takes the key from the Idempotency-Key
// header or params._meta["dev.obol/idempotency-key"], and runs every
// tools/call through a [retry.Orchestrator]: one claim, a replay of a
// finished call, a refusal for the key with other arguments, the receipt in
// result._meta (DESIGN, section "refserver wire contract").
//
// The one path for a gateway: each tool's EffectSpec, a route from
// [idempotency.NewRoute] and a target, served by a [Gateway]:
//
//	gw, err := mcpgateway.New(mcpgateway.Config{
//		Orchestrator: &retry.Orchestrator{Store: store},
//		Authenticate: func(token string) (string, bool) { ... }, // token -> workspace
//		Tools: []mcpgateway.Tool{{Spec: spec, Connection: "conn_pay", Route: route, Target: target}},
//	})
//	mux.Handle("/mcp", gw)
//
// The one path for a tool that runs inside the server (binding in_process,
// or in_process_keyed when its handler passes the attempt's key to an
// idempotent downstream): [InProcess] turns a [Handler] into a [Tool], whose
// handler runs as the call's one attempt (DESIGN, section "In-process
// tools"): returned is accepted, [Reject] definitely_rejected, anything else
// unknown, never success.
//
//	tool, err := mcpgateway.InProcess(mcpgateway.InProcessTool{Spec: spec, Handler: h})
//
// Logging, metrics and tracing are hooks of [Config]; the package pulls in no
// metrics or tracing SDK. Every protocol version the go-sdk speaks is served,
// 2026-07-28 (server/discover, no handshake) and the older ones (initialize).
package mcpgateway
