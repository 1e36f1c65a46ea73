// Package upstreamtest is an upstream MCP server for tests: hand-written
// JSON-RPC over net/http, so a test controls every byte and every fault.
//
// It speaks MCP 2026-07-28 (server/discover, the per-request _meta and
// Mcp-* headers, checked as the MCP Go SDK's server checks them) or, with
// [Options.Legacy], only 2025-11-25 (initialize and Mcp-Session-Id
// sessions, which [Server.ExpireSessions] ends). It answers in JSON, or in
// SSE with [Options.SSE]. It counts the requests and the executions under
// each key, params._meta["dev.obol/idempotency-key"] or
// arguments.idempotency_key, and with [Options.Dedup] executes a key once,
// as an Obol-fronted upstream or a vendor that takes an idempotency key
// does. [Server.Plan] queues the faults of the next tools/call requests.
//
//	up := upstreamtest.Start(t, upstreamtest.Options{Dedup: true})
//	up.Plan(upstreamtest.HangUp) // executes, then hangs up
//	// ... call create_ticket through the gateway at up.URL, twice ...
//	if n := up.Key(vendorKey).Executed; n != 1 {
//		t.Fatalf("executed %d times", n)
//	}
package upstreamtest
