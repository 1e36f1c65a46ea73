package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/mcpdirect"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// callTool is the handler of every tool and capability.
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	res, observe, err := g.callObserved(ctx, req)
	observe()
	return res, err
}

// callObserved is callTool but for the call's log line and the end of
// OnCall, which it leaves to observe: the direct path runs observe once the
// answer has left, so the caller does not wait for them.
func (g *Gateway) callObserved(ctx context.Context, req *mcp.CallToolRequest) (_ *mcp.CallToolResult, observe func(), _ error) {
	growStack()
	start := time.Now()
	ci := callInfoOf(req)
	if ci == nil {
		// Unreachable: the front authenticates every request.
		return nil, func() {}, rpcError(refusal{reason: "unauthorized", status: http.StatusUnauthorized, msg: "unauthenticated call"}, "")
	}
	name := req.Params.Name
	cs := CallStart{Tool: name, Workspace: ci.workspace, KeySource: ci.source}
	if req.Extra != nil {
		cs.Header = req.Extra.Header
	}
	var done func(CallEnd)
	if g.cfg.OnCall != nil {
		ctx, done = g.cfg.OnCall(ctx, cs)
	}
	res, out, r := g.run(ctx, ci, req.Params)
	end := CallEnd{CallStart: cs, Elapsed: time.Since(start), Key: out.Key.String()}
	if end.Key == "" {
		end.Key = ci.key.String()
	}
	if r != nil {
		end.Refusal = r.reason
		g.refused(r.reason)
		return nil, func() {
			g.log.LogAttrs(ctx, slog.LevelInfo, "tools/call refused", slog.String("workspace", ci.workspace), slog.String("tool", name),
				slog.String("key", end.Key), slog.String("key_source", string(ci.source)), slog.Duration("elapsed", end.Elapsed),
				slog.String("reason", r.reason), slog.String("error", r.logText()))
			if done != nil {
				done(end)
			}
		}, rpcError(*r, end.Key)
	}
	rc := out.Receipt
	end.Receipt = &rc
	if rc.KeySource != "" {
		// The record's source of the key: a resume that sent only its
		// ticket runs under the ticket's key, which the front did not
		// mint, whatever it resolved before reading the ticket.
		end.KeySource = idempotency.KeySource(rc.KeySource)
	}
	return res, func() {
		// LogAttrs: the line of every call, without boxing its attributes.
		g.log.LogAttrs(ctx, slog.LevelInfo, "tools/call", slog.String("workspace", ci.workspace), slog.String("tool", name),
			slog.String("key", end.Key), slog.String("key_source", string(end.KeySource)), slog.Duration("elapsed", end.Elapsed),
			slog.String("outcome", string(rc.Outcome)), slog.Int("attempts", rc.AttemptCount),
			slog.Int("status", rc.Status), slog.Bool("replayed", rc.Replayed))
		if done != nil {
			done(end)
		}
	}, nil
}

// callDirect is callObserved for the direct path, which also writes a
// result of the gateway's own shape without reflection.
func (g *Gateway) callDirect(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, bool, func(), error) {
	res, observe, err := g.callObserved(ctx, req)
	ci := callInfoOf(req)
	return res, ci != nil && ci.splice != nil && ci.splice.Plain(), observe, err
}

// callInfoOf returns what the front resolved for req, or nil.
func callInfoOf(req *mcp.CallToolRequest) *callInfo {
	if req.Extra == nil || req.Extra.TokenInfo == nil {
		return nil
	}
	ci, _ := req.Extra.TokenInfo.Extra[tokenExtraCall].(*callInfo)
	return ci
}

// run resolves and runs one call. It returns a result, or a refusal.
func (g *Gateway) run(ctx context.Context, ci *callInfo, p *mcp.CallToolParamsRaw) (*mcp.CallToolResult, retry.Answer, *refusal) {
	args := []byte(p.Arguments)
	if len(args) > g.cfg.MaxArgumentBytes {
		return nil, retry.Answer{}, &refusal{reason: "arguments_too_large", status: http.StatusRequestEntityTooLarge, msg: "arguments larger than " + sizeText(g.cfg.MaxArgumentBytes)}
	}
	if t := bytes.TrimSpace(idempotency.ArgumentsOrEmpty(args)); len(t) > 0 && t[0] != '{' {
		return nil, retry.Answer{}, &refusal{reason: "invalid_arguments", status: http.StatusBadRequest, msg: "arguments must be a JSON object"}
	}
	var ticket string
	if v, ok := p.Meta[metaTicket]; ok {
		t, isStr := v.(string)
		if !isStr || !idempotency.ValidTicketID(t) {
			return nil, retry.Answer{}, &refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: "_meta " + metaTicket + " must be an apt_ ticket id"}
		}
		ticket = t
	}
	// The front decided the key from the same bytes (callkey.Key); a key
	// in _meta that the SDK read otherwise would mean two parsers disagree.
	if v, ok := p.Meta[metaKey]; ok {
		ks, isStr := v.(string)
		if k, err := idempotency.ParseKey(ks); !isStr || err != nil || k != ci.key {
			return nil, retry.Answer{}, &refusal{reason: "malformed_key", status: http.StatusBadRequest, msg: "_meta " + metaKey + " is not the effective key"}
		}
	}
	call := retry.Call{
		Scope:     idempotency.Scope{Workspace: ci.workspace, Tool: p.Name},
		Key:       ci.key,
		KeySource: ci.source,
		Arguments: json.RawMessage(args),
		Ticket:    ticket,
	}
	// Arguments that break the input schema are refused inside the claim
	// (retry.Call.Refuse): a final record under the key still replays;
	// otherwise nothing is written and nothing sent (docs/DESIGN.md, "Scope and
	// the Redis key").
	var schemaRefusal *refusal
	var spec effectspec.Spec // the dispatched tool's, for a policy denial's text
	if t := g.tools[p.Name]; t != nil {
		spec = t.Spec
		schemaRefusal = g.views[p.Name].Load().check(args)
		call.Scope.Connection = t.Connection
		call.Dispatch = g.dispatch[p.Name]
	} else {
		// A capability: scoped as unresolved, dispatched to the provider
		// pinned in the store now, whose route the claim stores with a new
		// record. A completed call replays whatever the pin says now; an
		// unknown one whose pin moved is a destination_conflict, never a
		// redispatch. The arguments must pass the capability's schema and
		// the provider's, whose vendor receives them.
		schemaRefusal = g.caps[p.Name].InputSchema.check(args)
		pin, r := g.currentPin(ctx, p.Name)
		if r != nil {
			return nil, retry.Answer{}, r
		}
		pt := g.tools[pin]
		spec = pt.Spec
		if schemaRefusal == nil {
			schemaRefusal = g.views[pin].Load().check(args)
		}
		call.Dispatch = g.dispatch[pin]
	}
	if schemaRefusal != nil {
		call.Refuse = &refusalError{*schemaRefusal}
	}
	// Quotas, decided here without a store call (docs/DESIGN.md, "Quotas
	// and headroom"): the rate refuses the call before its claim; in_flight
	// and store_full refuse any dispatch (a final record still replays);
	// stored_bytes refuses only a new record.
	adm := g.quotas.admit(ci.workspace)
	if r := adm.refused(); r != nil {
		return nil, retry.Answer{}, r
	}
	if call.Refuse == nil {
		call.Refuse = adm.refuse()
	}
	call.NoCreate = adm.noCreate()
	out, err := g.orch.Do(ctx, call)
	adm.done()
	if err != nil {
		r := g.classify(err)
		if r.reason == effectspec.ReasonPolicyDenied {
			r.msg = policyDeniedText(spec)
		}
		return nil, out, &r
	}
	return result(out, ci, g.isUpstreamResult(out)), out, nil
}

// result renders an outcome as a tool result. The vendor body is the text
// content, and also structuredContent when it is a JSON object.
// definitely_rejected and unknown are results with isError true. A held
// call is a result (not an error) with _meta dev.obol/approval {"ticket",
// "status": "pending"}; calling again before the decision answers the same
// ticket. With ci, the receipt and the body go to ci.splice, and the
// result holds their placeholders: the front writes them
// ([mcpdirect.Splice]). With upstream, the body is an upstream MCP tool's
// answer: its CallToolResult is answered as such (upstreamResult).
func result(out retry.Answer, ci *callInfo, upstream bool) *mcp.CallToolResult {
	var sp *mcpdirect.Splice
	var rcMeta any = out.Receipt
	if ci != nil {
		sp = mcpdirect.NewSplice()
		ci.splice = sp
		if b, err := out.Receipt.MarshalJSON(); err == nil {
			rcMeta = sp.SetReceipt(b)
		}
		// Else the receipt itself: the SDK reports that it does not encode.
	}
	res := &mcp.CallToolResult{Meta: mcp.Meta{metaKey: out.Key.String(), metaReceipt: rcMeta}}
	rc := out.Receipt
	if rc.Outcome == effectspec.Held {
		res.Meta[metaApprove] = map[string]string{"ticket": out.Ticket, "status": string(idempotency.TicketPending)}
		res.Content = []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"held for approval: ticket %s. After POST /v1/approvals/%s/approve, call again with _meta %q = %q.",
			out.Ticket, out.Ticket, metaTicket, out.Ticket)}}
		return res
	}
	res.IsError = rc.Outcome != effectspec.Accepted
	if effectspec.BindingKind(rc.Binding).InProcess() && out.Result != nil && !out.Result.BodyDropped {
		if ipr, ok := inProcessResult(out.Result.Body, res.Meta); ok {
			ipr.IsError = res.IsError
			return ipr
		}
	}
	if upstream && out.Result != nil && !out.Result.BodyDropped {
		if sp != nil {
			if ur, ok := upstreamSpliced(sp, out.Result.Body, res.Meta, res.IsError); ok {
				return ur
			}
		}
		if ur, ok := upstreamResult(out.Result.Body, res.Meta, res.IsError); ok {
			return ur
		}
	}
	var text string
	switch {
	case out.Result != nil && out.Result.BodyDropped:
		text = fmt.Sprintf("vendor status %d; the body was larger than the store keeps", out.Result.Status)
	case out.Result != nil && sp != nil && len(out.Result.Body) > 0:
		// Encoded once, by the front: a non-empty body has a non-empty
		// text, so the defaults below never replace it.
		var structured json.RawMessage
		text, structured = sp.SetBody(out.Result.Body)
		if structured != nil {
			res.StructuredContent = structured
		}
	case out.Result != nil:
		body := out.Result.Body
		text = strings.ToValidUTF8(string(body), string(utf8.RuneError))
		if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '{' && json.Valid(t) {
			res.StructuredContent = json.RawMessage(t)
		}
	}
	switch rc.Outcome {
	case effectspec.Accepted:
		if out.Result == nil {
			// Settled accepted by an operator without the vendor's answer:
			// say so rather than answer an empty text.
			text = settledText(rc)
		}
	case effectspec.Unknown:
		if text == "" {
			text = "outcome unknown: the vendor may or may not have acted on this call; see the receipt"
		}
	case effectspec.DefinitelyRejected:
		switch {
		case text != "":
		case rc.Resolution != nil:
			// An operator's settlement, not a vendor's answer: there is
			// no vendor status to quote.
			text = settledText(rc)
		default:
			text = fmt.Sprintf("rejected by the vendor (status %d)", rc.Status)
		}
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: text}}
	if sp != nil {
		sp.SetPlain()
	}
	return res
}

// settledText is the text of a call an operator settled without the
// vendor's answer: its outcome, who settled it and when (the receipt's
// resolution).
func settledText(rc receipt.Receipt) string {
	by, at := "an operator", ""
	if r := rc.Resolution; r != nil {
		by = r.By
		if !r.At.IsZero() {
			at = " at " + r.At.UTC().Format(settledAtLayout)
		}
	}
	return string(rc.Outcome) + ": settled by " + by + at + " after checking with the vendor; the vendor's answer was not recorded, see the receipt"
}

// settledAtLayout is the receipt's time layout (millisecond precision, UTC).
const settledAtLayout = "2006-01-02T15:04:05.000Z07:00"

// callStack is about how much stack a tools/call needs below callTool: the
// orchestrator, the store and its Redis client, the vendor's HTTP client.
const callStack = 16 << 10

// growStack grows the calling goroutine's stack to hold a whole tools/call
// at once. The SDK runs every call on a goroutine of its own, whose stack
// starts small; left alone, it grows (a copy of the whole stack, every
// frame adjusted) twice per call, deep inside the claim and again in the
// finalize, which cost about 5% of a call's CPU. Growing it here copies
// only the few frames above. A call the front answers itself runs on the
// connection's goroutine, whose stack stays grown from one request to the
// next: there it costs the frame's zeroing only.
//
//go:noinline
func growStack() {
	var frame [callStack]byte
	keepFrame(frame[:])
}

// keepFrame stops the compiler from dropping growStack's frame.
//
//go:noinline
func keepFrame(b []byte) {
	if len(b) != callStack {
		panic("mcpgateway: growStack frame")
	}
}
