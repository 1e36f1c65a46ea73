// Package promhooks counts an [mcpgateway] gateway in Prometheus metrics:
// claims, attempts, outcomes, replays, refusals, store errors and latencies,
// background claim recoveries, and what an operator watches (unknown calls
// per workspace, settlements, lost store data). The names and labels are
// docs/DESIGN.md's, "refserver wire contract".
//
// The one recommended path: instrument the gateway's config before
// [mcpgateway.New] and serve the metrics:
//
//	m := promhooks.New()
//	m.Instrument(&gc) // chains onto gc's hooks, times gc.Orchestrator's store
//	gw, err := mcpgateway.New(gc)
//	mux.Handle("GET /metrics", m.Handler())
//
// [Metrics.WatchUnknown] adds obol_unknown_calls; [Metrics.Refusal],
// [Metrics.StoreError] and [Metrics.Settlement] count what admin endpoints
// see. The core mcpgateway pulls in no metrics SDK: this package does.
package promhooks
