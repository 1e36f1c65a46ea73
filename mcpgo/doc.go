// Package mcpgo makes the tools of a github.com/mark3labs/mcp-go server
// idempotent, as [mcpgateway.InProcess] does for the go-sdk: each call's
// key comes from the Idempotency-Key header or the params._meta member
// [mcpgateway.MetaKey] (minted when neither is sent, and echoed in both
// places), a [retry.Orchestrator] claims it, a finished call is replayed,
// and the receipt is the result's _meta member [mcpgateway.MetaReceipt].
//
// The one path: add the tools to the server, then serve it through [New]
// with each tool's EffectSpec (binding in_process, or in_process_keyed for
// a handler that passes [Attempt]'s key to an idempotent downstream):
//
//	s := server.NewMCPServer("notes", "1.0.0")
//	s.AddTool(mcp.NewTool("notes.create"), createNote)
//	h, err := mcpgo.New(s, mcpgo.Config{
//		Orchestrator: &retry.Orchestrator{Store: store, Policy: policy},
//		Specs:        []effectspec.Spec{spec},
//	})
//	mux.Handle("/mcp", h)
//
// mcp-go decodes arguments into float64 numbers, so [New]'s handler reads
// the raw request body first and hashes the raw arguments with the core's
// rules (9007199254740993 and 9007199254740992 are two requests). It
// refuses, as the gateway does, a body with a member name twice and a key
// under a near-miss name (Idempotency_Key, idempotencyKey in _meta, ...).
// A handler that needs the exact arguments reads them from [Attempt].
//
// The production policy denies in_process writes (an unknown outcome can
// never be retried): set [retry.Orchestrator.Policy] to allow them.
package mcpgo
