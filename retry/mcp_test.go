package retry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// rpcReq is a JSON-RPC message the fake upstream received.
type rpcReq struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Error  json.RawMessage `json:"error"`
	Header http.Header     `json:"-"`
}

// upstream is a raw net/http MCP server: 2026-07-28 stateless
// (server/discover) or, when legacy, 2025-11-25 sessions only. call
// answers each tools/call; n counts them from 1.
type upstream struct {
	*httptest.Server
	legacy bool
	tools  []string // tool objects, one per tools/list page

	mu       sync.Mutex
	methods  []string
	calls    []rpcReq
	replies  []rpcReq // responses of the gateway to the upstream's requests
	sessions map[string]bool
	next     int
	call     func(n int, w http.ResponseWriter, r *http.Request, req rpcReq)
	discover func(w http.ResponseWriter, req rpcReq) bool // true: answered
}

func newUpstream(t *testing.T, legacy bool, call func(n int, w http.ResponseWriter, r *http.Request, req rpcReq)) *upstream {
	u := &upstream{legacy: legacy, call: call, sessions: map[string]bool{},
		tools: []string{`{"name":"create","inputSchema":{"type":"object"}}`}}
	u.Server = httptest.NewServer(http.HandlerFunc(u.serve))
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req rpcReq
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	req.Header = r.Header.Clone()
	u.mu.Lock()
	if req.Method == "" {
		u.replies = append(u.replies, req)
		u.mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		return
	}
	u.methods = append(u.methods, req.Method)
	session := r.Header.Get("Mcp-Session-Id")
	known := u.sessions[session]
	u.mu.Unlock()
	if u.legacy && req.Method != "initialize" && req.Method != "server/discover" && !known {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	switch req.Method {
	case "server/discover":
		if u.discover != nil && u.discover(w, req) {
			return
		}
		if u.legacy {
			writeRPC(w, http.StatusBadRequest, req.ID, `"error":{"code":-32022,"message":"unsupported","data":{"supported":["2025-11-25"]}}`)
			return
		}
		writeRPC(w, 200, req.ID, `"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}}}`)
	case "initialize":
		u.mu.Lock()
		u.next++
		id := fmt.Sprintf("sess-%d", u.next)
		u.sessions[id] = true
		u.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", id)
		writeRPC(w, 200, req.ID, `"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"up","version":"1"}}`)
	case "notifications/initialized":
		w.WriteHeader(http.StatusAccepted)
	case "tools/list":
		var p struct {
			Cursor string `json:"cursor"`
		}
		json.Unmarshal(req.Params, &p)
		page := 0
		fmt.Sscan(p.Cursor, &page)
		next := ""
		if page+1 < len(u.tools) {
			next = fmt.Sprintf(`,"nextCursor":"%d"`, page+1)
		}
		writeRPC(w, 200, req.ID, `"result":{"tools":[`+u.tools[page]+`]`+next+`}`)
	case "tools/call":
		u.mu.Lock()
		u.calls = append(u.calls, req)
		n := len(u.calls)
		u.mu.Unlock()
		u.call(n, w, r, req)
	default:
		writeRPC(w, http.StatusNotFound, req.ID, `"error":{"code":-32601,"message":"no such method"}`)
	}
}

// expire ends every session: the next request under one is answered 404.
func (u *upstream) expire() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.sessions)
}

func (u *upstream) seen() (methods []string, calls []rpcReq) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.methods...), append([]rpcReq(nil), u.calls...)
}

func writeRPC(w http.ResponseWriter, status int, id json.RawMessage, member string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,%s}`, id, member)
}

func writeSSE(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(200)
	for _, e := range events {
		fmt.Fprintf(w, "event: message\ndata: %s\n\n", e)
		w.(http.Flusher).Flush()
	}
}

// answer answers a tools/call with member (`"result":...` or
// `"error":...`), as JSON or as an SSE stream after a notification.
func answer(status int, member string, sse bool) func(int, http.ResponseWriter, *http.Request, rpcReq) {
	return func(_ int, w http.ResponseWriter, _ *http.Request, req rpcReq) {
		if sse {
			writeSSE(w, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`,
				fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,%s}`, req.ID, member))
			return
		}
		writeRPC(w, status, req.ID, member)
	}
}

// mcpSpec is an MCP tool's spec, built as a literal: the target reads it
// as it is.
func mcpSpec(binding effectspec.BindingKind, toolError effectspec.Outcome) effectspec.Spec {
	s := effectspec.Spec{Tool: "tickets.create", Effect: effectspec.EffectWrite, Route: effectspec.RouteNative,
		Idempotency: effectspec.Binding{Kind: binding}, Status: effectspec.Statuses{ToolError: toolError}}
	if binding == effectspec.BindingBodyPointer {
		s.Idempotency.Pointer = "/idempotency_key"
	}
	return s
}

func sendMCP(u *retry.MCPUpstream, sp effectspec.Spec, args string) (retry.Result, idempotency.Key) {
	key := idempotency.NewKey()
	res := u.Target("create").Send(context.Background(), retry.Attempt{Key: key, Number: 1, Arguments: []byte(args), Spec: sp})
	return res, key
}

func TestMCPUpstreamClassifies(t *testing.T) {
	ok := `"result":{"content":[{"type":"text","text":"done"}],"isError":false}`
	toolErr := `"result":{"content":[{"type":"text","text":"failed"}],"isError":true}`
	for _, tc := range []struct {
		name      string
		status    int
		member    string
		toolError effectspec.Outcome
		want      effectspec.Outcome
	}{
		{"result", 200, ok, "", effectspec.Accepted},
		{"isError, tool_error unset", 200, toolErr, "", effectspec.Unknown},
		{"isError, tool_error definitely_rejected", 200, toolErr, effectspec.DefinitelyRejected, effectspec.DefinitelyRejected},
		{"invalid params", 400, `"error":{"code":-32602,"message":"bad amount"}`, "", effectspec.DefinitelyRejected},
		{"method not found", 404, `"error":{"code":-32601,"message":"no such tool"}`, "", effectspec.DefinitelyRejected},
		{"internal error", 500, `"error":{"code":-32603,"message":"boom"}`, "", effectspec.Unknown},
		{"input required", 200, `"result":{"resultType":"input_required","inputRequests":{}}`, "", effectspec.Unknown},
		{"null result", 200, `"result":null`, "", effectspec.Unknown},
	} {
		for _, sse := range []bool{false, true} {
			if sse && tc.status != 200 {
				continue // an SSE answer is a 200
			}
			t.Run(fmt.Sprintf("%s/sse=%v", tc.name, sse), func(t *testing.T) {
				up := newUpstream(t, false, answer(tc.status, tc.member, sse))
				u := &retry.MCPUpstream{URL: up.URL, Logger: slog.New(slog.DiscardHandler)}
				res, key := sendMCP(u, mcpSpec(effectspec.BindingMeta, tc.toolError), `{"title":"x"}`)
				if res.Phase != retry.Responded || res.Outcome != tc.want || res.Status != tc.status || res.Retryable {
					t.Fatalf("phase %s outcome %q status %d retryable %v err %v; want responded %s %d",
						res.Phase, res.Outcome, res.Status, res.Retryable, res.Err, tc.want, tc.status)
				}
				var m struct {
					Result, Error json.RawMessage
				}
				json.Unmarshal([]byte("{"+tc.member+"}"), &m)
				want := m.Result
				if len(want) == 0 {
					want = m.Error
				}
				if !bytes.Equal(res.Body, want) {
					t.Fatalf("body %s, want %s", res.Body, want)
				}
				_, calls := up.seen()
				if len(calls) != 1 {
					t.Fatalf("%d tools/call, want 1", len(calls))
				}
				var p struct {
					Meta map[string]any `json:"_meta"`
				}
				json.Unmarshal(calls[0].Params, &p)
				if p.Meta[effectspec.DefaultMetaName] != key.String() {
					t.Fatalf("_meta %v lacks the key %s", p.Meta, key)
				}
			})
		}
	}
}

// TestMCPUpstreamSteps: server/discover and tools/list are sent once, before
// the first call; every attempt is one tools/call POST.
func TestMCPUpstreamSteps(t *testing.T) {
	up := newUpstream(t, false, answer(200, `"result":{"content":[]}`, false))
	up.tools = []string{`{"name":"other"}`, `{"name":"create","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"note":{"type":"string","x-mcp-header":"Bad Name"}}}}`}
	u := &retry.MCPUpstream{URL: up.URL}
	for range 2 {
		if res, _ := sendMCP(u, mcpSpec(effectspec.BindingUnsupported, ""), `{"region":"eu west","note":"n"}`); res.Outcome != effectspec.Accepted {
			t.Fatalf("outcome %s, err %v", res.Outcome, res.Err)
		}
	}
	methods, calls := up.seen()
	if got := strings.Join(methods, " "); got != "server/discover tools/list tools/list tools/call tools/call" {
		t.Fatalf("methods %s", got)
	}
	h := calls[1].Header
	for k, want := range map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "create",
		"Mcp-Param-Region": "eu west", "Accept": "application/json, text/event-stream", "Content-Type": "application/json"} {
		if h.Get(k) != want {
			t.Errorf("%s: %q, want %q", k, h.Get(k), want)
		}
	}
	var p struct {
		Meta map[string]any `json:"_meta"`
	}
	json.Unmarshal(calls[0].Params, &p)
	if p.Meta["io.modelcontextprotocol/protocolVersion"] != "2026-07-28" || p.Meta["io.modelcontextprotocol/clientCapabilities"] == nil {
		t.Fatalf("_meta %v", p.Meta)
	}
	if _, ok := p.Meta[effectspec.DefaultMetaName]; ok {
		t.Fatal("an unsupported binding sent a key")
	}
	tools, err := u.ListTools(context.Background())
	if err != nil || len(tools) != 2 || !strings.Contains(string(tools[1]), `"create"`) {
		t.Fatalf("ListTools: %s, %v", tools, err)
	}
}

// TestMCPUpstreamLegacySession: a 2025-11-25 upstream gets initialize and
// its session; a 404 to the session is not run, and the next attempt
// initializes again.
func TestMCPUpstreamLegacySession(t *testing.T) {
	up := newUpstream(t, true, answer(200, `"result":{"content":[]}`, true))
	u := &retry.MCPUpstream{URL: up.URL}
	sp := mcpSpec(effectspec.BindingBodyPointer, "")
	if res, _ := sendMCP(u, sp, `{}`); res.Outcome != effectspec.Accepted {
		t.Fatalf("outcome %s, err %v", res.Outcome, res.Err)
	}
	up.expire()
	res, _ := sendMCP(u, sp, `{}`)
	if res.Phase != retry.BeforeSend || !errors.Is(res.Err, idempotency.ErrVendorUnreachable) || !strings.Contains(res.Err.Error(), "404") {
		t.Fatalf("expired session: phase %s err %v", res.Phase, res.Err)
	}
	res, key := sendMCP(u, sp, `{"idempotency_key":"mine"}`)
	if res.Outcome != effectspec.Accepted {
		t.Fatalf("after re-initialize: outcome %s, err %v", res.Outcome, res.Err)
	}
	methods, calls := up.seen()
	want := "server/discover initialize notifications/initialized tools/call tools/call initialize notifications/initialized tools/call"
	if got := strings.Join(methods, " "); got != want {
		t.Fatalf("methods %s\nwant    %s", got, want)
	}
	last := calls[len(calls)-1]
	if last.Header.Get("Mcp-Session-Id") != "sess-2" || last.Header.Get("Mcp-Protocol-Version") != "2025-11-25" {
		t.Fatalf("headers %v", last.Header)
	}
	var p struct {
		Meta      json.RawMessage            `json:"_meta"`
		Arguments map[string]json.RawMessage `json:"arguments"`
	}
	json.Unmarshal(last.Params, &p)
	if string(p.Arguments["idempotency_key"]) != `"`+key.String()+`"` || p.Meta != nil {
		t.Fatalf("params %s: want the key at the pointer and no _meta", last.Params)
	}
}

func TestMCPUpstreamNotRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		member string
	}{
		{"unauthorized", 401, `"error":{"code":-32001,"message":"no"}`},
		{"header mismatch", 400, `"error":{"code":-32020,"message":"Mcp-Name"}`},
		{"version", 400, `"error":{"code":-32022,"message":"version"}`},
		{"obol vendor_unreachable", 200, `"error":{"code":-32000,"message":"x","data":{"reason":"vendor_unreachable","status":503}}`},
		{"obol quota_exceeded", 200, `"error":{"code":-32000,"message":"x","data":{"reason":"quota_exceeded","status":429}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newUpstream(t, false, answer(tc.status, tc.member, false))
			u := &retry.MCPUpstream{URL: up.URL}
			res, _ := sendMCP(u, mcpSpec(effectspec.BindingMeta, ""), `{}`)
			if res.Phase != retry.BeforeSend || !errors.Is(res.Err, idempotency.ErrVendorUnreachable) {
				t.Fatalf("phase %s err %v", res.Phase, res.Err)
			}
			// Not run: the next attempt discovers again.
			sendMCP(u, mcpSpec(effectspec.BindingMeta, ""), `{}`)
			methods, _ := up.seen()
			if methods[len(methods)-3] != "server/discover" {
				t.Fatalf("methods %v: no new discovery", methods)
			}
		})
	}
	// An Obol store_unavailable may follow a dispatch: unknown.
	up := newUpstream(t, false, answer(200, `"error":{"code":-32603,"message":"x","data":{"reason":"store_unavailable"}}`, false))
	res, _ := sendMCP(&retry.MCPUpstream{URL: up.URL}, mcpSpec(effectspec.BindingMeta, ""), `{}`)
	if res.Phase != retry.Responded || res.Outcome != effectspec.Unknown {
		t.Fatalf("store_unavailable: phase %s outcome %s", res.Phase, res.Outcome)
	}
}

func TestMCPUpstreamDiscoverFails(t *testing.T) {
	up := newUpstream(t, false, answer(200, `"result":{}`, false))
	up.discover = func(w http.ResponseWriter, req rpcReq) bool {
		http.Error(w, "down", http.StatusBadGateway)
		return true
	}
	res, _ := sendMCP(&retry.MCPUpstream{URL: up.URL}, mcpSpec(effectspec.BindingMeta, ""), `{}`)
	if res.Phase != retry.BeforeSend || !errors.Is(res.Err, idempotency.ErrVendorUnreachable) {
		t.Fatalf("phase %s err %v", res.Phase, res.Err)
	}
	if _, calls := up.seen(); len(calls) != 0 {
		t.Fatalf("%d tools/call after a failed discovery", len(calls))
	}
	// Unreachable: nothing listens.
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	res, _ = sendMCP(&retry.MCPUpstream{URL: dead.URL}, mcpSpec(effectspec.BindingMeta, ""), `{}`)
	if res.Phase != retry.BeforeSend || !errors.Is(res.Err, idempotency.ErrVendorUnreachable) {
		t.Fatalf("unreachable: phase %s err %v", res.Phase, res.Err)
	}
}

// TestMCPUpstreamStreamCut: a stream that ends before the response, after
// the POST was written, is post_send.
func TestMCPUpstreamStreamCut(t *testing.T) {
	up := newUpstream(t, false, func(_ int, w http.ResponseWriter, _ *http.Request, req rpcReq) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"res", req.ID)
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	res, _ := sendMCP(&retry.MCPUpstream{URL: up.URL}, mcpSpec(effectspec.BindingMeta, ""), `{}`)
	if res.Phase != retry.PostSend || res.Status != 200 {
		t.Fatalf("phase %s status %d err %v", res.Phase, res.Status, res.Err)
	}
}

// TestMCPUpstreamRefusesServerRequests: a request of the upstream on the
// call's stream is answered with an error and logged (its method only).
func TestMCPUpstreamRefusesServerRequests(t *testing.T) {
	var up *upstream
	up = newUpstream(t, false, func(_ int, w http.ResponseWriter, _ *http.Request, req rpcReq) {
		writeSSE(w, `{"jsonrpc":"2.0","id":"srv-1","method":"elicitation/create","params":{"message":"secret question"}}`)
		// The upstream waits for the answer before it goes on.
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			up.mu.Lock()
			n := len(up.replies)
			up.mu.Unlock()
			if n > 0 {
				break
			}
		}
		fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[]}}\n\n", req.ID)
	})
	var log bytes.Buffer
	u := &retry.MCPUpstream{URL: up.URL, Logger: slog.New(slog.NewTextHandler(&log, nil))}
	res, _ := sendMCP(u, mcpSpec(effectspec.BindingMeta, ""), `{}`)
	if res.Outcome != effectspec.Accepted {
		t.Fatalf("outcome %s err %v", res.Outcome, res.Err)
	}
	up.mu.Lock()
	replies := up.replies
	up.mu.Unlock()
	if len(replies) != 1 || string(replies[0].ID) != `"srv-1"` || !strings.Contains(string(replies[0].Error), "-32601") {
		t.Fatalf("replies %+v", replies)
	}
	if !strings.Contains(log.String(), "elicitation/create") || strings.Contains(log.String(), "secret question") {
		t.Fatalf("log %q", log.String())
	}
}

func TestMCPUpstreamTruncates(t *testing.T) {
	big := `"result":{"content":[{"type":"text","text":"` + strings.Repeat("a", 8<<10) + `"}]}`
	for _, sse := range []bool{false, true} {
		up := newUpstream(t, false, answer(200, big, sse))
		u := &retry.MCPUpstream{URL: up.URL, Executor: &retry.Executor{MaxResponseBytes: 4 << 10}}
		res, _ := sendMCP(u, mcpSpec(effectspec.BindingMeta, ""), `{}`)
		if res.Phase != retry.Responded || !res.Truncated || res.Outcome != effectspec.Unknown || res.Body != nil {
			t.Fatalf("sse=%v: phase %s truncated %v outcome %s", sse, res.Phase, res.Truncated, res.Outcome)
		}
	}
}

func TestMCPUpstreamRetryable(t *testing.T) {
	for _, tc := range []struct {
		binding effectspec.BindingKind
		want    bool
	}{{effectspec.BindingMeta, true}, {effectspec.BindingBodyPointer, true}, {effectspec.BindingUnsupported, false}} {
		up := newUpstream(t, false, func(_ int, w http.ResponseWriter, _ *http.Request, _ rpcReq) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "busy", http.StatusServiceUnavailable)
		})
		res, _ := sendMCP(&retry.MCPUpstream{URL: up.URL}, mcpSpec(tc.binding, ""), `{}`)
		if res.Phase != retry.Responded || res.Outcome != effectspec.Unknown || res.Retryable != tc.want {
			t.Fatalf("%s: phase %s outcome %s retryable %v", tc.binding, res.Phase, res.Outcome, res.Retryable)
		}
	}
}

// mcpCall is a call of the upstream's tool through the Orchestrator, with
// a validated spec on a native route.
func mcpCall(t *testing.T, u *retry.MCPUpstream, binding effectspec.BindingKind, key idempotency.Key, args string) retry.Call {
	t.Helper()
	s := effectspec.Spec{Tool: "tickets.create", Effect: effectspec.EffectWrite, Route: effectspec.RouteNative,
		Idempotency: effectspec.Binding{Kind: binding}}
	if binding == effectspec.BindingBodyPointer {
		s.Idempotency.Pointer = "/idempotency_key"
	}
	sp := effectspec.MustNew(s)
	route, err := idempotency.NewRoute(sp, idempotency.RouteTarget{Connection: "conn_up", Provider: "acme", URL: u.URL, Credential: idempotency.NoCredential})
	if err != nil {
		t.Fatal(err)
	}
	return retry.Call{Scope: idempotency.Scope{Workspace: "ws_acme", Connection: "conn_up", Tool: sp.Tool}, Key: key,
		KeySource: idempotency.KeySupplied, Arguments: []byte(args), Spec: sp, Route: route, Target: u.Target("create")}
}

func TestMCPUpstreamOrchestrated503(t *testing.T) {
	o := orch(backends()[0].open(t, 5*time.Second), 5*time.Second)
	busyOnce := func(n int, w http.ResponseWriter, r *http.Request, req rpcReq) {
		if n == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		answer(200, `"result":{"content":[]}`, false)(n, w, r, req)
	}
	// body_pointer: the 503 earns the second attempt, with the same key.
	up := newUpstream(t, false, busyOnce)
	u := &retry.MCPUpstream{URL: up.URL}
	out, err := o.Do(context.Background(), mcpCall(t, u, effectspec.BindingBodyPointer, idempotency.NewKey(), `{"title":"t","idempotency_key":"model-made"}`))
	_, calls := up.seen()
	expect(t, out, err, effectspec.Accepted, 2, int64(len(calls)))
	var keys []string
	for _, c := range calls {
		var p struct {
			Arguments struct {
				Key string `json:"idempotency_key"`
			} `json:"arguments"`
		}
		json.Unmarshal(c.Params, &p)
		keys = append(keys, p.Arguments.Key)
	}
	if len(keys) != 2 || keys[0] != out.Receipt.VendorKey || keys[1] != keys[0] {
		t.Fatalf("keys %v, want the vendor key %s twice", keys, out.Receipt.VendorKey)
	}
	// unsupported: no second attempt.
	up2 := newUpstream(t, false, busyOnce)
	out, err = o.Do(context.Background(), mcpCall(t, &retry.MCPUpstream{URL: up2.URL}, effectspec.BindingUnsupported, idempotency.NewKey(), `{}`))
	_, calls = up2.seen()
	expect(t, out, err, effectspec.Unknown, 1, int64(len(calls)))
	if len(calls) != 1 || out.Receipt.Status != 503 {
		t.Fatalf("%d calls, status %d", len(calls), out.Receipt.Status)
	}
}

// TestMCPUpstreamOrchestratedNotRun: a session lost before the call is not
// run, so it is the cycle's second attempt that re-initializes, and a slot
// whose every attempt was refused before it ran answers vendor_unreachable.
func TestMCPUpstreamOrchestratedNotRun(t *testing.T) {
	o := orch(backends()[0].open(t, 5*time.Second), 5*time.Second)
	up := newUpstream(t, true, answer(200, `"result":{"content":[]}`, false))
	u := &retry.MCPUpstream{URL: up.URL}
	if out, err := o.Do(context.Background(), mcpCall(t, u, effectspec.BindingBodyPointer, idempotency.NewKey(), `{}`)); err != nil || out.Receipt.Outcome != effectspec.Accepted {
		t.Fatalf("first: %v %v", out.Receipt.Outcome, err)
	}
	up.expire()
	out, err := o.Do(context.Background(), mcpCall(t, u, effectspec.BindingBodyPointer, idempotency.NewKey(), `{}`))
	if err != nil || out.Receipt.Outcome != effectspec.Accepted || out.Receipt.AttemptCount != 2 {
		t.Fatalf("after expiry: %s with %d attempts, %v", out.Receipt.Outcome, out.Receipt.AttemptCount, err)
	}
	// Refused twice before running: nothing left, vendor_unreachable.
	no := newUpstream(t, false, answer(401, `"error":{"code":-32001,"message":"no"}`, false))
	_, err = o.Do(context.Background(), mcpCall(t, &retry.MCPUpstream{URL: no.URL}, effectspec.BindingBodyPointer, idempotency.NewKey(), `{}`))
	var re *retry.RefusalError
	if !errors.As(err, &re) || !errors.Is(err, idempotency.ErrVendorUnreachable) {
		t.Fatalf("refused upstream: %v", err)
	}
	if _, calls := no.seen(); len(calls) != 2 {
		t.Fatalf("%d tools/call, want 2 (the cycle's second attempt)", len(calls))
	}
}

// TestMCPUpstreamHashWithoutPointer: a retry whose arguments differ only
// at the pointer retries the same slot.
func TestMCPUpstreamHashWithoutPointer(t *testing.T) {
	o := orch(backends()[0].open(t, 5*time.Second), 5*time.Second)
	up := newUpstream(t, false, answer(200, `"result":{"content":[]}`, false))
	u := &retry.MCPUpstream{URL: up.URL}
	key := idempotency.NewKey()
	first, err := o.Do(context.Background(), mcpCall(t, u, effectspec.BindingBodyPointer, key, `{"title":"t","idempotency_key":"uuid-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	again, err := o.Do(context.Background(), mcpCall(t, u, effectspec.BindingBodyPointer, key, `{"idempotency_key":"uuid-2","title":"t"}`))
	if err != nil || !again.Receipt.Replayed || again.Receipt.RequestHash != first.Receipt.RequestHash {
		t.Fatalf("retry with another key at the pointer: %v replayed %v", err, again.Receipt.Replayed)
	}
	if _, err := o.Do(context.Background(), mcpCall(t, u, effectspec.BindingBodyPointer, key, `{"title":"other","idempotency_key":"uuid-1"}`)); !errors.Is(err, idempotency.ErrRequestMismatch) {
		t.Fatalf("other arguments: %v, want a request mismatch", err)
	}
	if _, calls := up.seen(); len(calls) != 1 {
		t.Fatalf("%d tools/call, want 1", len(calls))
	}
}

// TestMCPUpstreamScrubsSecret: the upstream's credential never reaches the
// stored answer or an error.
func TestMCPUpstreamScrubsSecret(t *testing.T) {
	const secret = "sk_live_MCP_TOPSECRET_42"
	up := newUpstream(t, false, func(_ int, w http.ResponseWriter, r *http.Request, req rpcReq) {
		writeRPC(w, 200, req.ID, `"result":{"content":[{"type":"text","text":"you sent `+r.Header.Get("Authorization")+`"}]}`)
	})
	o := orch(backends()[0].open(t, 5*time.Second), 5*time.Second)
	u := &retry.MCPUpstream{URL: up.URL, Header: http.Header{"Authorization": {"Bearer " + secret}}}
	c := mcpCall(t, u, effectspec.BindingBodyPointer, idempotency.NewKey(), `{}`)
	out, err := o.Do(context.Background(), c)
	if err != nil || out.Result == nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out.Result.Body), secret) || !strings.Contains(string(out.Result.Body), receipt.Redacted) {
		t.Fatalf("body %s", out.Result.Body)
	}
	_, calls := up.seen()
	if calls[0].Header.Get("Authorization") != "Bearer "+secret {
		t.Fatal("the upstream did not get its credential")
	}
}

// TestMCPUpstreamConcurrentFirstCalls: calls that start together share one
// discovery.
func TestMCPUpstreamConcurrentFirstCalls(t *testing.T) {
	up := newUpstream(t, false, answer(200, `"result":{"content":[]}`, false))
	u := &retry.MCPUpstream{URL: up.URL}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if res, _ := sendMCP(u, mcpSpec(effectspec.BindingMeta, ""), `{}`); res.Outcome != effectspec.Accepted {
				t.Errorf("outcome %s err %v", res.Outcome, res.Err)
			}
		})
	}
	wg.Wait()
	methods, calls := up.seen()
	discovers := 0
	for _, m := range methods {
		if m == "server/discover" {
			discovers++
		}
	}
	if discovers != 1 || len(calls) != 16 {
		t.Fatalf("%d discoveries, %d calls; want 1 and 16", discovers, len(calls))
	}
}
