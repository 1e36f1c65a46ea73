package main

import "github.com/obol-gateway/obol/mcpgateway"

// The wire names the tests of this package read, now the gateway's.
type errorData = mcpgateway.ErrorData

const (
	metaKey     = mcpgateway.MetaKey
	metaReceipt = mcpgateway.MetaReceipt
	metaApprove = mcpgateway.MetaApprove
	metaTicket  = mcpgateway.MetaTicket
	headerKey   = mcpgateway.HeaderKey
)

const (
	maxArgBytes          = 256 << 10 // mcpgateway.Config.MaxArgumentBytes when zero
	retryNote            = mcpgateway.RetryNote
	storeUnavailableText = "store_unavailable: the idempotency store is unavailable; retry with the same key"
	outOfMemoryText      = "out_of_memory: the idempotency store is out of memory; retry later with the same key"
	codeInvalidRequest   = -32600
	listBody             = `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
)
