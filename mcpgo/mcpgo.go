package mcpgo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/retry"
)

// Config is what [New] needs. Zero fields other than Orchestrator and
// Specs take the defaults their docs name.
type Config struct {
	// Orchestrator runs every call of a tool in Specs. Required; its
	// Policy must allow the tools' bindings (the production policy denies
	// in_process writes).
	Orchestrator *retry.Orchestrator
	// Specs are the EffectSpecs of the server's tools to make idempotent,
	// one per tool (Spec.Tool is the tool's name), each with binding
	// in_process or in_process_keyed. Each tool must be on the server
	// already. The server's other tools are served as mcp-go serves them.
	Specs []effectspec.Spec
	// Workspace names the tenant of a request, whose keys are its own
	// (false: refused, HTTP 401). If nil, every request is workspace
	// "default".
	Workspace func(r *http.Request) (workspace string, ok bool)
	// Server names the server whose handlers run the tools, in their
	// routes' fingerprints. If empty, [mcpgateway.DefaultInProcessServer].
	Server string
	// MaxBodyBytes bounds a request body. If zero, 4 MiB.
	MaxBodyBytes int
}

// Defaults of [Config].
const (
	defaultWorkspace    = "default"
	defaultMaxBodyBytes = 4 << 20
)

// New wraps the handlers of cfg.Specs' tools on s and returns the handler
// of POST /mcp: mcp-go's Streamable HTTP server (stateless) behind a front
// that reads each body once, strictly, and resolves the call's key. A
// wrapped tool's handler runs as the call's one attempt (as an
// [mcpgateway.Handler] does): a result is accepted, an error wrapping
// [mcpgateway.ErrRejected] ([mcpgateway.Reject]) definitely_rejected, one
// wrapping [mcpgateway.ErrNothingDone] not run, anything else (an IsError
// result, another error, a panic) unknown. A refusal of the core
// (request_mismatch, in_progress, ...) is a JSON-RPC error whose message
// starts with its reason.
func New(s *server.MCPServer, cfg Config) (http.Handler, error) {
	if s == nil || cfg.Orchestrator == nil {
		return nil, errors.New("mcpgo: New needs a server and Config.Orchestrator")
	}
	if cfg.Workspace == nil {
		cfg.Workspace = func(*http.Request) (string, bool) { return defaultWorkspace, true }
	}
	if cfg.Server == "" {
		cfg.Server = mcpgateway.DefaultInProcessServer
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = defaultMaxBodyBytes
	}
	tools := make(map[string]bool, len(cfg.Specs))
	for _, spec := range cfg.Specs {
		st := s.GetTool(spec.Tool)
		if st == nil {
			return nil, fmt.Errorf("mcpgo: tool %q of Config.Specs is not on the server", spec.Tool)
		}
		if !spec.Idempotency.Kind.InProcess() {
			return nil, fmt.Errorf("mcpgo: tool %q: binding %q is not in_process or in_process_keyed", spec.Tool, spec.Idempotency.Kind)
		}
		route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{Connection: mcpgateway.InProcessConnection,
			Provider: cfg.Server, Server: cfg.Server, Credential: idempotency.NoCredential})
		if err != nil {
			return nil, fmt.Errorf("mcpgo: tool %q: %w", spec.Tool, err)
		}
		d, err := retry.NewDispatch(spec, route, target{st.Handler})
		if err != nil {
			return nil, fmt.Errorf("mcpgo: tool %q: %w", spec.Tool, err)
		}
		st.Handler = wrap(cfg.Orchestrator, d)
		s.AddTools(*st)
		tools[spec.Tool] = true
	}
	next := server.NewStreamableHTTPServer(s, server.WithStateLess(true))
	return &front{cfg: cfg, tools: tools, next: next}, nil
}

// callKey is the context key of the *call the front resolved.
type callKey struct{}

// call is what the front read of one tools/call of a wrapped tool.
type call struct {
	workspace string
	key       idempotency.Key
	source    idempotency.KeySource
	args      json.RawMessage // params.arguments as sent
	ticket    string
}

// attemptKey is the context key of the running attempt.
type attemptKey struct{}

// Attempt returns the attempt a wrapped handler runs as: the attempt's
// vendor key (which an in_process_keyed handler passes to its idempotent
// downstream) and the call's arguments as sent, numbers exact. ok is false
// outside a wrapped handler.
func Attempt(ctx context.Context) (a retry.Attempt, ok bool) {
	a, ok = ctx.Value(attemptKey{}).(retry.Attempt)
	return a, ok
}

// requestKey is the context key of mcp-go's request, which the target
// hands to the tool's handler.
type requestKey struct{}

// wrap is the handler of a wrapped tool: the call through o, its answer
// rendered as the result.
func wrap(o *retry.Orchestrator, d *retry.Dispatch) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		c, _ := ctx.Value(callKey{}).(*call)
		if c == nil {
			return nil, errors.New("invalid_request: the call did not pass through mcpgo.New's handler")
		}
		ctx = context.WithValue(ctx, requestKey{}, req)
		out, err := o.Do(ctx, retry.Call{
			Scope:     idempotency.Scope{Workspace: c.workspace, Tool: req.Params.Name, Connection: mcpgateway.InProcessConnection},
			Key:       c.key,
			KeySource: c.source,
			Arguments: c.args,
			Dispatch:  d,
			Ticket:    c.ticket,
		})
		if err != nil {
			return nil, refusal(err)
		}
		return result(out), nil
	}
}

// refusal is the error of a call the core refused: its wire reason, then
// the error's text.
func refusal(err error) error {
	reason, _ := idempotency.Reason(err)
	if reason == "" {
		reason = "internal"
	}
	return fmt.Errorf("%s: %w", reason, err)
}

// result renders an answer: the handler's stored result when there is
// one, else a text, with the key and the receipt in _meta.
func result(out retry.Answer) *mcp.CallToolResult {
	rc := out.Receipt
	meta := &mcp.Meta{AdditionalFields: map[string]any{mcpgateway.MetaKey: out.Key.String(), mcpgateway.MetaReceipt: rc}}
	if rc.Outcome == effectspec.Held {
		return &mcp.CallToolResult{Result: mcp.Result{Meta: meta}, Content: []mcp.Content{mcp.NewTextContent(fmt.Sprintf(
			"held for approval: ticket %s; call again with _meta %q = %q once it is approved", out.Ticket, mcpgateway.MetaTicket, out.Ticket))}}
	}
	var res mcp.CallToolResult
	if out.Result == nil || out.Result.BodyDropped || json.Unmarshal(out.Result.Body, &res) != nil {
		text := fmt.Sprintf("%s (status %d); no result was stored, see the receipt", rc.Outcome, rc.Status)
		res = mcp.CallToolResult{Content: []mcp.Content{mcp.NewTextContent(text)}}
	}
	res.Meta = meta
	res.IsError = rc.Outcome != effectspec.Accepted
	return &res
}
