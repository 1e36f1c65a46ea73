package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// InProcessConnection is the scope's connection segment of every in-process
// tool (DESIGN, section "In-process tools"): the tool runs in the gateway,
// no connection is resolved.
const InProcessConnection = "inproc"

// DefaultInProcessServer names the server of an in-process tool whose
// [InProcessTool.Server] is empty: the route's host and provider.
const DefaultInProcessServer = "local"

// A Handler runs one attempt of an in-process tool: the call's arguments in
// a.Arguments, and in a.Key the attempt's vendor key, which a keyed tool
// passes to its idempotent downstream. It must honour ctx. What it returns
// decides the attempt (DESIGN, section "In-process tools"):
//
//   - a result without IsError: accepted; the result is stored and replayed;
//   - an error wrapping [ErrRejected] ([Reject]): definitely_rejected, the
//     error's text the answer;
//   - an error wrapping [ErrNothingDone] ([NothingDone]): nothing was done;
//     the attempt counts but burns nothing, so the handler may run once more;
//   - an IsError result, any other error, a panic, or no answer before
//     ctx ends: unknown, never success.
type Handler func(ctx context.Context, a retry.Attempt) (*mcp.CallToolResult, error)

// Reject marks err as a definite rejection: the handler had no effect and
// will have none for these arguments. A nil err is a rejection without
// reason.
func Reject(err error) error {
	if err == nil {
		return ErrRejected
	}
	return fmt.Errorf("%w: %w", ErrRejected, err)
}

// NothingDone marks err as a handler's report that it did nothing yet (it
// checked its own state, say a busy lock, before any effect): the attempt
// is proven not sent. A nil err is such a report without reason.
func NothingDone(err error) error {
	if err == nil {
		return ErrNothingDone
	}
	return fmt.Errorf("%w: %w", ErrNothingDone, err)
}

// InProcessTool is a tool whose handler runs inside the gateway as each
// call's attempt.
type InProcessTool struct {
	// Spec is the tool's EffectSpec, with binding in_process (the handler
	// passes no key on: a call whose outcome is unknown never runs again)
	// or in_process_keyed (it passes the attempt's key to an idempotent
	// downstream: the rules of a vendor binding).
	Spec        effectspec.Spec
	Description string       // as Tool's
	InputSchema *InputSchema // as Tool's
	Handler     Handler
	// Server names the server whose handler runs the tool: the route's
	// host and provider, in its fingerprint. If empty, "local".
	Server string
	// Credential names the downstream account the handler acts as (never
	// a secret): another account is another destination. If empty,
	// idempotency.NoCredential.
	Credential string
}

// InProcess returns the [Tool] of t, for [Config.Tools]: scope connection
// [inProcessConnection], a route from [idempotency.NewRoute], and a target
// that runs t.Handler once per attempt.
func InProcess(t InProcessTool) (Tool, error) {
	if t.Handler == nil {
		return Tool{}, fmt.Errorf("%w: in-process tool %s has no Handler", ErrInvalidConfig, t.Spec.Tool)
	}
	server := t.Server
	if server == "" {
		server = DefaultInProcessServer
	}
	route, err := idempotency.NewRoute(t.Spec, idempotency.RouteTarget{Connection: InProcessConnection, Provider: server,
		Server: server, Credential: t.Credential})
	if err != nil {
		return Tool{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return Tool{Spec: t.Spec, Description: t.Description, InputSchema: t.InputSchema, Connection: InProcessConnection,
		Route: route, Target: inProcessTarget{t.Handler}}, nil
}

// inProcessTarget runs a Handler as a retry.Target.
type inProcessTarget struct{ h Handler }

type handlerAnswer struct {
	res      *mcp.CallToolResult
	err      error
	panicked bool
}

// Send runs the handler once, unless the attempt's send deadline has passed
// (the slot may be another gateway's by then): that attempt never ran. The
// handler runs on a goroutine of its own so that a panic is an outcome and
// ctx's end an answer; a handler that ignores ctx runs on after it, and its
// result is discarded.
func (t inProcessTarget) Send(ctx context.Context, a retry.Attempt) retry.Result {
	if dl, ok := retry.SendDeadline(ctx); ok && !time.Now().Before(dl) {
		return retry.Result{Phase: retry.BeforeSend, Err: &retry.Error{Phase: retry.BeforeSend, Op: "handler",
			Reason: "send deadline passed", Err: retry.ErrSendDeadline}}
	}
	done := make(chan handlerAnswer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- handlerAnswer{panicked: true}
			}
		}()
		res, err := t.h(ctx, a)
		done <- handlerAnswer{res: res, err: err}
	}()
	var ans handlerAnswer
	select {
	case ans = <-done:
	case <-ctx.Done():
		return unknownRun("no answer before the attempt's deadline", ctx.Err())
	}
	switch {
	case ans.panicked:
		return unknownRun("panic", errors.New("mcpgateway: handler panicked"))
	case errors.Is(ans.err, ErrNothingDone):
		return retry.Result{Phase: retry.BeforeSend, Err: &retry.Error{Phase: retry.BeforeSend, Op: "handler", Reason: "nothing done", Err: ans.err}}
	case errors.Is(ans.err, ErrRejected):
		return answered(effectspec.InProcessRejected, &mcp.CallToolResult{IsError: true,
			Content: []mcp.Content{&mcp.TextContent{Text: strings.TrimPrefix(ans.err.Error(), ErrRejected.Error()+": ")}}})
	case ans.err != nil:
		return unknownRun("error", ans.err)
	case ans.res == nil:
		return unknownRun("no result", errors.New("mcpgateway: handler returned no result and no error"))
	case ans.res.IsError:
		// The handler's own error result: kept for the agent, unknown.
		return answered(http500, ans.res)
	}
	return answered(effectspec.InProcessAccepted, ans.res)
}

// http500 is the status of an IsError result: in no list, so unknown.
const http500 = 500

func unknownRun(reason string, err error) retry.Result {
	return retry.Result{Phase: retry.PostSend, Err: &retry.Error{Phase: retry.PostSend, Op: "handler", Reason: reason, Err: err}}
}

// answered is a handler's result as a responded attempt: its JSON is the
// stored body, which a replay renders back (result).
func answered(status int, res *mcp.CallToolResult) retry.Result {
	body, err := json.Marshal(res)
	if err != nil {
		return unknownRun("result not encodable", err)
	}
	return retry.Result{Phase: retry.Responded, Status: status, Body: body}
}

// inProcessResult renders the stored body of an in-process call (the
// handler's result as JSON) as the result the handler returned, with meta
// for the gateway's names. ok is false for a body that is not one.
func inProcessResult(body []byte, meta mcp.Meta) (*mcp.CallToolResult, bool) {
	var res mcp.CallToolResult
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, false
	}
	res.Meta = meta
	return &res, true
}
