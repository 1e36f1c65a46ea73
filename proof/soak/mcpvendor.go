package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"
)

// The stand-in upstream MCP servers: raw JSON-RPC over Streamable HTTP, one
// stateless (protocol 2026-07-28: server/discover, the per-request headers
// and _meta) and one with sessions (2025-11-25: initialize, Mcp-Session-Id,
// and a 404 for a session it no longer knows). Both serve the same three
// tools and deduplicate on the key where the tool looks for it, as the
// dedup vendor routes do; their executions are effects of the vendors'
// ground truth like any vendor's.

const (
	mcpModern = "2026-07-28"
	mcpLegacy = "2025-11-25"
	// mcpMetaKey is where the charge tool looks for its key (the meta
	// binding's default member).
	mcpMetaKey = "dev.obol/idempotency-key"
	// mcpPlanted is the value of a dev.obol/ member every upstream result
	// carries: the gateway drops such members, so no reply may show it.
	mcpPlanted = "planted_by_the_upstream"
)

// Modes of the MCP upstreams besides vendor.go's (normal, 503, hangup,
// stall): an SSE answer cut mid-event after the tool ran, and the sessions
// upstream forgetting every session (an instant fault, not a mode that
// lasts).
const (
	modeSSECut       vendorMode = "sse_cut"
	modeSessionsLost vendorMode = "sessions_lost"
)

// mcpUpstream is one stand-in MCP server, at its path on the vendors'
// server.
type mcpUpstream struct {
	name     string          // its route name for the fault schedule
	sessions bool            // 2025-11-25 with sessions; else stateless 2026-07-28
	live     map[string]bool // session ids it knows; vendors.mu
}

// mcpTool is one tool of the upstreams and where it reads its key.
type mcpTool struct {
	name    string
	keyFrom string // "meta" (params._meta[mcpMetaKey]), "argument" (arguments.idempotency_key) or ""
}

var mcpTools = []mcpTool{{"charge", "meta"}, {"create_ticket", "argument"}, {"post_note", ""}}

// mcpRouteNames are the upstreams' names for their fault schedule
// (mcpFaults).
var mcpRouteNames = []string{"mcp", "mcp_sessions"}

// modesFor is the modes the fault schedule may put upstream name into.
func modesFor(name string) []vendorMode {
	modes := []vendorMode{mode503, modeHangup, modeStall, modeSSECut}
	if name == "mcp_sessions" {
		modes = append(modes, modeSessionsLost)
	}
	return modes
}

// rpcMessage is any JSON-RPC message the upstreams read.
type rpcMessage struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  json.RawMessage `json:"error,omitempty"`
}

// rpcParams is what the upstreams read of a request's params.
type rpcParams struct {
	Name      string                     `json:"name"`
	Arguments json.RawMessage            `json:"arguments"`
	Cursor    string                     `json:"cursor"`
	Meta      map[string]json.RawMessage `json:"_meta"`
}

// mcpArgs is what a tool reads of its arguments: the soak's callBody and
// the ticket tool's key.
type mcpArgs struct {
	Slot           string `json:"slot"`
	Marker         string `json:"marker"`
	Amount         int    `json:"amount"`
	IdempotencyKey string `json:"idempotency_key"`
}

// toolRefusesAmount is the amounts every tool refuses with isError true,
// without running: the same slot always gets the same refusal.
func toolRefusesAmount(amount int) bool { return amount%10 == 7 }

// expireSessions makes the upstream name forget every session: each
// gateway's next request there gets a 404.
func (v *vendors) expireSessions(name string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, up := range v.mcp {
		if up.name == name {
			n += len(up.live)
			clear(up.live)
		}
	}
	return n
}

// mcpFigures is what the MCP upstreams saw and did, for the table.
func (v *vendors) mcpFigures() map[string]int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return maps.Clone(v.mcpStats)
}

func (v *vendors) mcpNote(k string) {
	v.mu.Lock()
	v.mcpStats[k]++
	v.mu.Unlock()
}

// serveMCP is an upstream MCP server's endpoint.
func (v *vendors) serveMCP(w http.ResponseWriter, r *http.Request, up *mcpUpstream) {
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		v.mu.Lock()
		delete(up.live, r.Header.Get("Mcp-Session-Id"))
		v.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		return
	default:
		// No standalone stream for server messages.
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	v.mu.Lock()
	if !strings.Contains(r.Header.Get("Authorization"), "_soak_") {
		v.badAuth++
	}
	v.mu.Unlock()
	var m rpcMessage
	if json.Unmarshal(raw, &m) != nil {
		v.mcpNote("mcp_protocol_refusals")
		writeRPCError(w, http.StatusBadRequest, nil, -32700, "parse error", nil)
		return
	}
	var p rpcParams
	_ = json.Unmarshal(m.Params, &p)
	if up.sessions {
		if !v.legacyHandshake(w, r, up, m) {
			return
		}
	} else if !v.modernHeaders(w, r, m, p) {
		return
	}
	switch {
	case m.Method == "" && len(m.ID) > 0:
		// A response to our own request on a call's stream.
		v.mcpNote("mcp_server_requests_answered")
		w.WriteHeader(http.StatusAccepted)
		return
	case len(m.ID) == 0:
		w.WriteHeader(http.StatusAccepted) // a notification
		return
	}
	switch m.Method {
	case "server/discover":
		v.mcpNote("mcp_discovers")
		writeRPCResult(w, m.ID, map[string]any{
			"resultType": "complete", "supportedVersions": []string{mcpModern},
			"capabilities": map[string]any{"tools": map[string]any{}},
			"_meta":        map[string]any{"io.modelcontextprotocol/serverInfo": map[string]string{"name": "soak-" + up.name, "version": "1.0.0"}},
		})
	case "tools/list":
		v.mcpNote("mcp_tools_lists")
		writeRPCResult(w, m.ID, toolsPage(p.Cursor, up.sessions))
	case "ping":
		writeRPCResult(w, m.ID, map[string]any{})
	case "tools/call":
		v.mcpCall(w, r, up, m, p)
	default:
		status := http.StatusOK
		if !up.sessions {
			status = http.StatusNotFound // as the go-sdk's stateless server
		}
		writeRPCError(w, status, m.ID, -32601, "method not found", nil)
	}
}

// legacyHandshake serves initialize and checks the session of every other
// request of the sessions upstream; false when it answered.
func (v *vendors) legacyHandshake(w http.ResponseWriter, r *http.Request, up *mcpUpstream, m rpcMessage) bool {
	switch m.Method {
	case "initialize":
		v.mu.Lock()
		v.seq++
		sid := fmt.Sprintf("ses_%s_%d", up.name, v.seq)
		up.live[sid] = true
		v.mcpStats["mcp_sessions_created"]++
		v.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", sid)
		writeRPCResult(w, m.ID, map[string]any{
			"protocolVersion": mcpLegacy, "capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo": map[string]string{"name": "soak-" + up.name, "version": "1.0.0"},
		})
		return false
	case "server/discover":
		// An upstream older than discovery does not know the method.
		v.mcpNote("mcp_discover_refused")
		writeRPCError(w, http.StatusOK, m.ID, -32601, "method not found", nil)
		return false
	}
	if pv := r.Header.Get("Mcp-Protocol-Version"); pv != "" && pv != mcpLegacy {
		v.mcpNote("mcp_protocol_refusals")
		writeRPCError(w, http.StatusBadRequest, m.ID, -32022, "unsupported protocol version",
			map[string]any{"supported": []string{mcpLegacy}, "requested": pv})
		return false
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		v.mcpNote("mcp_protocol_refusals")
		http.Error(w, "Bad Request: missing session ID", http.StatusBadRequest)
		return false
	}
	v.mu.Lock()
	ok := up.live[sid]
	if !ok {
		v.mcpStats["mcp_unknown_session_404"]++
	}
	v.mu.Unlock()
	if !ok {
		http.Error(w, "session not found", http.StatusNotFound)
		return false
	}
	return true
}

// modernHeaders checks what 2026-07-28 requires of a request, as the
// go-sdk's stateless server does; false when it refused.
func (v *vendors) modernHeaders(w http.ResponseWriter, r *http.Request, m rpcMessage, p rpcParams) bool {
	if m.Method == "" || len(m.ID) == 0 {
		return true // responses and notifications carry no _meta triple
	}
	refuse := func(code int, msg string, data any) bool {
		v.mcpNote("mcp_protocol_refusals")
		writeRPCError(w, http.StatusBadRequest, m.ID, code, msg, data)
		return false
	}
	pv := r.Header.Get("Mcp-Protocol-Version")
	var metaPV string
	_ = json.Unmarshal(p.Meta["io.modelcontextprotocol/protocolVersion"], &metaPV)
	switch {
	case pv == "":
		return refuse(-32020, "Mcp-Protocol-Version header is required", nil)
	case pv != mcpModern:
		return refuse(-32022, "unsupported protocol version", map[string]any{"supported": []string{mcpModern}, "requested": pv})
	case r.Header.Get("Mcp-Method") != m.Method:
		return refuse(-32020, "Mcp-Method header does not match the body", nil)
	case metaPV == "":
		return refuse(-32602, `missing or invalid _meta field "io.modelcontextprotocol/protocolVersion"`, nil)
	case metaPV != pv:
		return refuse(-32020, "Mcp-Protocol-Version header does not match _meta", nil)
	case m.Method == "tools/call" && r.Header.Get("Mcp-Name") != p.Name:
		return refuse(-32020, "Mcp-Name header does not match the body", nil)
	}
	return true
}

// toolsPage is tools/list in two pages.
func toolsPage(cursor string, legacy bool) map[string]any {
	schema := func(withKey bool) map[string]any {
		props := map[string]any{"slot": map[string]string{"type": "string"}, "marker": map[string]string{"type": "string"},
			"amount": map[string]string{"type": "integer"}}
		req := []string{"slot"}
		if withKey {
			props["idempotency_key"] = map[string]string{"type": "string", "description": "unique for every request"}
			req = append(req, "idempotency_key")
		}
		return map[string]any{"type": "object", "properties": props, "required": req}
	}
	tool := func(t mcpTool) map[string]any {
		return map[string]any{"name": t.name, "description": "the soak's " + t.name, "inputSchema": schema(t.keyFrom == "argument"),
			"annotations": map[string]any{"destructiveHint": true, "idempotentHint": false}}
	}
	out := map[string]any{}
	if cursor == "" {
		out["tools"] = []any{tool(mcpTools[0]), tool(mcpTools[1])}
		out["nextCursor"] = "page2"
	} else {
		out["tools"] = []any{tool(mcpTools[2])}
	}
	if !legacy {
		out["resultType"] = "complete"
	}
	return out
}

// mcpCall is one tools/call: the tool runs (or deduplicates) as a vendor
// route does, under the upstream's mode.
func (v *vendors) mcpCall(w http.ResponseWriter, r *http.Request, up *mcpUpstream, m rpcMessage, p rpcParams) {
	var tool *mcpTool
	for i := range mcpTools {
		if mcpTools[i].name == p.Name {
			tool = &mcpTools[i]
		}
	}
	if tool == nil {
		writeRPCError(w, http.StatusOK, m.ID, -32602, "unknown tool", nil)
		return
	}
	var a mcpArgs
	_ = json.Unmarshal(p.Arguments, &a)
	key := ""
	switch tool.keyFrom {
	case "meta":
		_ = json.Unmarshal(p.Meta[mcpMetaKey], &key)
	case "argument":
		key = a.IdempotencyKey
	}
	// The client's _meta is never forwarded: only the meta binding's
	// member may be a dev.obol/ one.
	var forwarded []string
	for k := range p.Meta {
		if strings.HasPrefix(k, "dev.obol/") && !(tool.keyFrom == "meta" && k == mcpMetaKey) {
			forwarded = append(forwarded, k)
		}
	}
	path := r.URL.Path + "#" + tool.name

	v.mu.Lock()
	mode := v.modes[up.name]
	if mode == "" || mode == modeSessionsLost {
		mode = modeNormal
	}
	v.seen[a.Slot]++
	v.seq++
	n := v.seq
	if len(forwarded) > 0 {
		v.forwardedMeta[a.Slot] = append(v.forwardedMeta[a.Slot], forwarded...)
	}
	v.log(a.Slot, "vendor %s: request #%d key=%q mode=%s", path, v.seen[a.Slot], key, mode)
	if mode == mode503 {
		v.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		writeRPCError(w, http.StatusServiceUnavailable, m.ID, -32000, "overloaded, try again later", nil)
		return
	}
	dedupKey := up.name + "|" + key
	result, replayed := v.answers[dedupKey]
	if replayed && key != "" {
		v.mcpStats["mcp_deduplicated"]++
		v.log(a.Slot, "vendor %s: deduplicated on key %q, first answer replayed", path, key)
	} else if toolRefusesAmount(a.Amount) {
		v.mcpStats["mcp_tool_errors"]++
		result, _ = json.Marshal(map[string]any{"isError": true, "content": []any{map[string]string{"type": "text", "text": "amount refused"}}})
		v.log(a.Slot, "vendor %s: tool error, nothing done", path)
	} else {
		// The effect happens now, before any answer can be lost.
		v.effects[a.Slot] = append(v.effects[a.Slot], effect{at: time.Now(), vendorKey: key, route: up.name})
		if key != "" {
			if _, ok := v.keyOwner[key]; !ok {
				v.keyOwner[key] = a.Slot
			}
			v.keyExec[dedupKey]++
		}
		v.mcpStats["mcp_executions"]++
		obj := map[string]any{"id": fmt.Sprintf("obj_%d", n), "slot": a.Slot, "marker": a.Marker}
		text, _ := json.Marshal(obj)
		result, _ = json.Marshal(map[string]any{
			"content":           []any{map[string]string{"type": "text", "text": string(text)}},
			"structuredContent": obj,
			"_meta":             map[string]string{"dev.obol/upstream-note": mcpPlanted},
		})
		if key != "" {
			v.answers[dedupKey] = result
		}
		v.log(a.Slot, "vendor %s: effect performed (effect #%d of the slot)", path, len(v.effects[a.Slot]))
	}
	// Every other answer is an SSE stream; on the sessions upstream every
	// fourth stream asks the client something first.
	sse := n%2 == 0 || mode == modeSSECut
	ask := up.sessions && n%8 == 0
	if sse {
		v.mcpStats["mcp_sse_answers"]++
	}
	if ask {
		v.mcpStats["mcp_server_requests_sent"]++
	}
	v.mu.Unlock()

	if !up.sessions {
		result = withResultType(result)
	}
	switch mode {
	case modeHangup:
		hangUp(w)
		return
	case modeStall:
		time.Sleep(v.stall)
	}
	resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": json.RawMessage(result)})
	if !sse {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	event := func(id string, data []byte) {
		fmt.Fprintf(w, "event: message\nid: %s\ndata: %s\n\n", id, data)
		_ = rc.Flush()
	}
	if up.sessions {
		fmt.Fprintf(w, "event: prime\nid: %d_0\ndata: \n\n", n) // as 2025-11-25 servers open a stream
	}
	event(fmt.Sprintf("%d_1", n), []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}`))
	if ask {
		event(fmt.Sprintf("%d_2", n), fmt.Appendf(nil, `{"jsonrpc":"2.0","id":"srv_%d","method":"elicitation/create","params":{"message":"Proceed?","requestedSchema":{"type":"object","properties":{}}}}`, n))
	}
	if mode == modeSSECut {
		// Half the response event, then the connection goes.
		fmt.Fprintf(w, "event: message\nid: %d_3\ndata: %s", n, resp[:len(resp)/2])
		_ = rc.Flush()
		panic(http.ErrAbortHandler)
	}
	event(fmt.Sprintf("%d_3", n), resp)
}

// withResultType marks a result complete, as 2026-07-28 results are.
func withResultType(result []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(result, &m) != nil {
		return result
	}
	m["resultType"] = json.RawMessage(`"complete"`)
	out, _ := json.Marshal(m)
	return out
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if c, _, err := hj.Hijack(); err == nil {
			_ = c.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

func writeRPCResult(w http.ResponseWriter, id json.RawMessage, result any) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string, data any) {
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
