// Package mcpgateway is the MCP layer of an idempotent tool-call gateway: a
// [Gateway] is an [http.Handler] for POST /mcp (the go-sdk's Streamable
// HTTP, stateless) that takes the key from the Idempotency-Key header or
// the params._meta member [MetaKey] and runs every tools/call through a
// [retry.Orchestrator]: one claim, a replay of a finished call, a refusal
// ([ErrorData]), the receipt in result._meta[[MetaReceipt]] (DESIGN,
// section "refserver wire contract"). The one path, for an in-process tool
// ([InProcess]; an HTTP tool's Target is a [retry.HTTPTarget]):
//
//	spec, _ := effectspec.Parse([]byte(`{"tool": "notes.create", "effect": "write", "idempotency": {"binding": "in_process"}}`))
//	tool, err := mcpgateway.InProcess(mcpgateway.InProcessTool{Spec: spec, Handler: handler})
//	gw, err := mcpgateway.New(mcpgateway.Config{Tools: []mcpgateway.Tool{tool},
//		Authenticate: func(token string) (string, bool) { ... }, // token -> workspace
//		Orchestrator: &retry.Orchestrator{Store: store, Policy: effectspec.Policy{Environment: effectspec.Development}}})
//	mux.Handle("/mcp", gw)
//
// (The production policy denies in_process writes: they cannot be redispatched.)
//
// In front of an upstream MCP server, a tool's Target is the upstream's
// ([retry.MCPUpstream]), and [Gateway.Import] lists it as the upstream does
// (the Import example runs it):
//
//	upstream := &retry.MCPUpstream{URL: "https://mcp.payco.example/mcp"}
//	route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{Connection: "payco", Provider: "payco",
//		URL: upstream.URL, Credential: idempotency.NoCredential, UpstreamTool: "create"})
//	tool := mcpgateway.Tool{Spec: spec, Connection: "payco", Route: route, Target: upstream.Target("create"), Upstream: upstream}
//	gw, err := mcpgateway.New(mcpgateway.Config{Tools: []mcpgateway.Tool{tool}, Orchestrator: orch})
//	err = gw.Import(ctx) // tools/list: description, input schema, annotations
//
// Logging, metrics and tracing are hooks of [Config], with no SDK pulled in.
package mcpgateway
