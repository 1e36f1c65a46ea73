package mcpgo

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/retry"
)

// target runs a tool's mcp-go handler as a retry.Target, with the rules of
// an in-process tool of mcpgateway (DESIGN, section "In-process tools").
type target struct{ h server.ToolHandlerFunc }

type answer struct {
	res      *mcp.CallToolResult
	err      error
	panicked bool
}

// Send runs the handler once, unless the attempt's send deadline has
// passed. It runs on a goroutine of its own, so that a panic is an outcome
// and ctx's end an answer.
func (t target) Send(ctx context.Context, a retry.Attempt) retry.Result {
	if dl, ok := retry.SendDeadline(ctx); ok && !time.Now().Before(dl) {
		return retry.Result{Phase: retry.BeforeSend, Err: &retry.Error{Phase: retry.BeforeSend, Op: "handler",
			Reason: "send deadline passed", Err: retry.ErrSendDeadline}}
	}
	req, ok := ctx.Value(requestKey{}).(mcp.CallToolRequest)
	if !ok {
		// Only wrap's calls carry mcp-go's request: nothing to run.
		return retry.Result{Phase: retry.BeforeSend, Err: &retry.Error{Phase: retry.BeforeSend, Op: "handler",
			Reason: "no mcp-go request", Err: errors.New("mcpgo: attempt without the call's mcp-go request")}}
	}
	ctx = context.WithValue(ctx, attemptKey{}, a)
	done := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				done <- answer{panicked: true}
			}
		}()
		res, err := t.h(ctx, req)
		done <- answer{res: res, err: err}
	}()
	var ans answer
	select {
	case ans = <-done:
	case <-ctx.Done():
		return unknown("no answer before the attempt's deadline", ctx.Err())
	}
	switch {
	case ans.panicked:
		return unknown("panic", errors.New("mcpgo: handler panicked"))
	case errors.Is(ans.err, mcpgateway.ErrNothingDone):
		return retry.Result{Phase: retry.BeforeSend, Err: &retry.Error{Phase: retry.BeforeSend, Op: "handler", Reason: "not run", Err: ans.err}}
	case errors.Is(ans.err, mcpgateway.ErrRejected):
		return stored(effectspec.InProcessRejected, mcp.NewToolResultError(strings.TrimPrefix(ans.err.Error(), mcpgateway.ErrRejected.Error()+": ")))
	case ans.err != nil:
		return unknown("error", ans.err)
	case ans.res == nil:
		return unknown("no result", errors.New("mcpgo: handler returned no result and no error"))
	case ans.res.IsError:
		// The handler's own error result: kept for the client, unknown.
		return stored(statusUnknown, ans.res)
	}
	return stored(effectspec.InProcessAccepted, ans.res)
}

// statusUnknown is the status of an IsError result: in no list, so unknown.
const statusUnknown = 500

func unknown(reason string, err error) retry.Result {
	return retry.Result{Phase: retry.PostSend, Err: &retry.Error{Phase: retry.PostSend, Op: "handler", Reason: reason, Err: err}}
}

// stored is a handler's result as a responded attempt: its JSON is the
// stored body, which a replay renders back.
func stored(status int, res *mcp.CallToolResult) retry.Result {
	body, err := json.Marshal(res)
	if err != nil {
		return unknown("result not encodable", err)
	}
	return retry.Result{Phase: retry.Responded, Status: status, Body: body}
}
