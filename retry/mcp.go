package retry

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
)

// MCPUpstream is one upstream MCP server reached over Streamable HTTP, as
// a vendor: each attempt of a tool call to it is exactly one tools/call
// POST through Executor (docs/DESIGN.md, "Attempts and retries"). Keep one
// per upstream server: it caches what the upstream told it once
// (server/discover, or a 2025-11-25 session) for every tool of the server.
// It is safe for concurrent use; its fields must not change after first
// use.
type MCPUpstream struct {
	// URL is the upstream's Streamable HTTP endpoint.
	URL string
	// Header is sent with every request, for example the connection's
	// Authorization. It may hold secrets: as [HTTPTarget.Header].
	Header http.Header
	// Executor makes each request. If nil, the Executor shared by every
	// target whose Executor is nil.
	Executor *Executor
	// InjectHeaders, as [HTTPTarget.InjectHeaders]. If nil, none.
	InjectHeaders func(ctx context.Context, h http.Header)
	// Logger receives what the upstream asked that the gateway refused (a
	// server-to-client request on a call's stream). If nil, slog.Default().
	Logger *slog.Logger
}

// Target returns the [Target] of the upstream's tool named tool.
func (u *MCPUpstream) Target(tool string) Target {
	return TargetFunc(func(ctx context.Context, a Attempt) Result {
		return Result{Phase: BeforeSend, Err: newError(BeforeSend, "request", errors.New("retry: MCP route not built yet"))}
	})
}

// ListTools returns the upstream's tools (tools/list, every page), each
// the JSON object the upstream sent.
func (u *MCPUpstream) ListTools(ctx context.Context) ([]json.RawMessage, error) {
	return nil, errors.New("retry: MCP route not built yet")
}
