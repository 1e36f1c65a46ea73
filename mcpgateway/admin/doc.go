// Package admin is a gateway's admin API: an [http.Handler] for the /v1
// endpoints an operator uses (approve or deny held calls, list and settle
// unknown calls, list pending approvals, read receipts, pin capabilities,
// advance the scope version, acknowledge lost store data) and GET
// /healthz, and [Client], the Go client of the same API. Each answer is
// one Go type shared by both (docs/DESIGN.md, "refserver wire contract").
//
// Mount the handler next to the MCP endpoint:
//
//	h, err := admin.New(admin.Config{
//		Store:      store,                // a *redisstore.Store serves every endpoint
//		Approver:   approvers.Name,       // approver key -> approver name
//		Workspace:  apiKeys.Workspace,    // workspace key -> workspace id
//		Workspaces: []string{"ws_acme"},
//		Scope:      tools.Scope,          // the scope of a call to a tool
//		Classify:   gw.Classify,          // refusals as the MCP endpoint's
//	})
//	mux.Handle("/mcp", gw)
//	mux.Handle("/v1/", h)
//	mux.Handle("/healthz", h)
//
// Every admin request needs an approver key but a receipt read, which
// takes the workspace's own key; a workspace key may not list or settle.
// Each request's store calls end with [Config.StoreTimeout]: a store that
// does not answer is 503 store_unavailable in time, never a request that
// hangs. Every write is safe to repeat.
package admin
