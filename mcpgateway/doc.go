// Package mcpgateway is the MCP layer of an idempotent tool-call gateway: a
// [Gateway] is an [http.Handler] for POST /mcp (the go-sdk's Streamable
// HTTP, stateless) that reads each request once, strictly, takes the key
// from the Idempotency-Key header or the params._meta member [MetaKey],
// and runs every tools/call through a [retry.Orchestrator]: one claim, a
// replay of a finished call, a refusal for the key with other arguments
// ([ErrorData]), the receipt in the result._meta member [MetaReceipt]
// (DESIGN, section "refserver wire contract").
//
// The one path for a gateway: each tool's EffectSpec, a route from
// [idempotency.NewRoute] and a target, served by a [Gateway]:
//
//	gw, err := mcpgateway.New(mcpgateway.Config{
//		Orchestrator: &retry.Orchestrator{Store: store}, // zero Policy: production
//		Authenticate: func(token string) (string, bool) { ... }, // token -> workspace
//		Tools: []mcpgateway.Tool{{Spec: spec, Connection: "conn_pay", Route: route, Target: target}},
//	})
//	mux.Handle("/mcp", gw)
//
// A tool that runs inside the server (binding in_process or
// in_process_keyed): [InProcess] turns a [Handler] into a [Tool] whose
// handler is the call's one attempt (DESIGN, section "In-process tools"):
// returned is accepted, [Reject] definitely_rejected, anything else unknown.
// An in_process tool cannot be redispatched, so the production policy (the
// zero [retry.Orchestrator].Policy) denies its writes: spell out the policy
// that runs it, as [ExampleInProcess] does:
//
//	spec, _ := effectspec.Parse([]byte(`{"tool": "notes.create", "effect": "write", "idempotency": {"binding": "in_process"}}`))
//	tool, err := mcpgateway.InProcess(mcpgateway.InProcessTool{Spec: spec, Handler: handler})
//	gw, err := mcpgateway.New(mcpgateway.Config{Tools: []mcpgateway.Tool{tool},
//		Orchestrator: &retry.Orchestrator{Store: store, Policy: effectspec.Policy{Environment: effectspec.Development}}})
//
// [New] warns (Config.Logger) of a tool the policy denies on every new call.
//
// Logging, metrics and tracing are hooks of [Config]; the package pulls in
// no metrics or tracing SDK. Every protocol version the go-sdk speaks is
// served. A tools/call of a gateway tool whose headers the SDK would pass
// on is answered without the SDK, as the SDK answers it, byte for byte
// (internal/mcpdirect); every other request goes through the SDK.
package mcpgateway
