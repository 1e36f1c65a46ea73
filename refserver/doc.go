// Command refserver is the Obol reference gateway: an MCP server (Streamable
// HTTP, official Go SDK) at POST /mcp whose every tools/call runs the
// idempotency core end to end: claim in Redis, dispatch to the vendor or a
// broker, finalize, replay.
//
// The one recommended path to try it:
//
//	go run ./refserver            # demo config, demo vendor, embedded store
//
// and for real use:
//
//	refserver -config gateway.json -redis redis://127.0.0.1:6379 -addr 0.0.0.0:8080
//
// Flags: -config FILE (DESIGN.md section 11 format), -redis URL (redis://,
// rediss://, valkey://, valkeys://, unix:///path/to/socket, or
// comma-separated Cluster seeds), -addr HOST:PORT (default 127.0.0.1:8080).
// Without -redis the URL comes from OBOL_REDIS_URL, so a password never has
// to be on the command line; without either, the embedded store is not
// durable. Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT is set. For
// diagnosis, -cpuprofile FILE and -exectrace FILE record serving until
// shutdown (profiles).
//
// One operator subcommand, read-only (README.md, "Upgrading the key scope"):
//
//	refserver scope-status -redis URL -prefix obol: [-progress N]
//
// Endpoints:
//
//	POST /mcp                              MCP: tools/list, tools/call (Bearer workspace key)
//	POST /v1/approvals/{ticket}/approve    approver key
//	POST /v1/approvals/{ticket}/deny       approver key
//	GET  /v1/receipts/{key}?tool=NAME      workspace key; another workspace's key is 404
//	POST /v1/capabilities/{name}/pin       approver key, body {"provider": "tool.name"}
//	GET  /v1/unknown?workspace=ID          approver key; ?cursor=, ?limit= (at most 100)
//	POST /v1/receipts/{key}/resolve?tool=NAME&workspace=ID
//	                                       approver key, body {"outcome": "accepted"|"definitely_rejected",
//	                                       "attempt_count": N (required, as listed), "note": "..."}
//	GET  /healthz, GET /metrics            no key
//
// The wire contract is docs/DESIGN.md section 11. Where it is silent, the
// choice is on the code it governs: the front of POST /mcp (mcpFront,
// parseEnvelope, effectiveKey, nearMiss, sanitizer), refusals (refusal), tools/list
// (toolDef, parseInputSchema, checkShape), results (result), capabilities
// (currentPin, seedPins), configuration (loadConfig), the demo
// (demoVendor), limits (maxBodyBytes) and timeouts (run, bounded).
package main
