package upstreamtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Protocol versions and names of the wire.
const (
	// Version is the protocol a server speaks unless [Options.Legacy].
	Version = "2026-07-28"
	// LegacyVersion is the only protocol a legacy server speaks.
	LegacyVersion = "2025-11-25"
	// MetaKey is the _meta member whose value a server counts as a key.
	MetaKey = "dev.obol/idempotency-key"
	// ArgKey is the argument whose value a server counts as a key.
	ArgKey = "idempotency_key"

	metaVersion      = "io.modelcontextprotocol/protocolVersion"
	metaCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo   = "io.modelcontextprotocol/serverInfo"
	sessionHeader    = "Mcp-Session-Id"
)

// JSON-RPC error codes the server answers with.
const (
	codeMethodNotFound     = -32601
	codeInvalidParams      = -32602
	codeHeaderMismatch     = -32020
	codeUnsupportedVersion = -32022
	codeServer             = -32000
)

// Fault is what the server does with one tools/call; see [Server.Plan].
type Fault int

const (
	// OK executes the call and answers its result.
	OK Fault = iota
	// HangUp executes the call, then closes the connection without an
	// answer.
	HangUp
	// CutStream executes the call, starts an SSE answer and closes the
	// connection in the middle of the result's event.
	CutStream
	// Busy answers 503 with "Retry-After: 1" and a JSON-RPC error, without
	// executing.
	Busy
	// InvalidParams answers the JSON-RPC error -32602, without executing.
	InvalidParams
	// ToolError answers a result with isError true, without executing.
	ToolError
	// QuotaExceeded answers as an Obol gateway refuses a call it did not
	// run: 429, error -32000 with data.reason "quota_exceeded".
	QuotaExceeded
	// Elicit executes the call and answers on an SSE stream that carries an
	// elicitation/create request before the result.
	Elicit
)

// Options configure a [Server].
type Options struct {
	// Legacy makes the server speak only 2025-11-25: initialize, then
	// every request in the session its Mcp-Session-Id names.
	Legacy bool
	// SSE answers every request on an SSE stream; otherwise in JSON.
	SSE bool
	// Dedup executes a key ([MetaKey] first, else [ArgKey]) once: a later
	// call under it gets the first execution's result again.
	Dedup bool
	// Token, if set, is required as "Authorization: Bearer Token"; a
	// request without it is answered 401.
	Token string
	// Tools are the server's tools; nil means [DefaultTools].
	Tools []Tool
	// ResultMeta is added to the _meta of every tools/call result.
	ResultMeta map[string]any
}

// Tool is one tool of a [Server]. Every tool executes the same way: it
// counts, and its result names the execution (structuredContent
// {"id": "tkt_N", "tool": name}).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// DefaultTools are create_ticket, which takes an optional idempotency_key
// argument as a vendor's create tool does, and echo.
func DefaultTools() []Tool {
	return []Tool{
		{Name: "create_ticket", Description: "Creates a ticket. Pass a unique idempotency_key for every request.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},` +
				`"idempotency_key":{"type":"string","description":"unique for every request"}},"required":["title","idempotency_key"]}`),
			Annotations: json.RawMessage(`{"destructiveHint":false,"idempotentHint":false}`)},
		{Name: "echo", Description: "Echoes its arguments.", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
}

// Counts are tools/call requests that reached a tool and how many of them
// it executed.
type Counts struct {
	Received int
	Executed int
}

// Request is one POST the server read.
type Request struct {
	// Method is the JSON-RPC method; "" for a response.
	Method string
	Header http.Header
	Body   []byte
}

// Server is a running upstream MCP server.
type Server struct {
	// URL is the server's endpoint, http://127.0.0.1:PORT/mcp.
	URL string
	// HTTP is the server under the endpoint.
	HTTP *httptest.Server

	o     Options
	tools map[string]Tool

	mu       sync.Mutex
	plan     []Fault
	sessions map[string]bool
	nsession int
	total    Counts
	byKey    map[string]*Counts
	done     map[string]json.RawMessage
	reqs     []Request
}

// Start starts a server on loopback, closed when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := New(o)
	t.Cleanup(s.Close)
	return s
}

// New starts a server on loopback; [Server.Close] stops it.
func New(o Options) *Server {
	if o.Tools == nil {
		o.Tools = DefaultTools()
	}
	s := &Server{o: o, tools: map[string]Tool{}, sessions: map[string]bool{},
		byKey: map[string]*Counts{}, done: map[string]json.RawMessage{}}
	for _, tl := range o.Tools {
		s.tools[tl.Name] = tl
	}
	s.HTTP = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.HTTP.URL + "/mcp"
	return s
}

// Close stops the server and closes its connections.
func (s *Server) Close() {
	s.HTTP.CloseClientConnections()
	s.HTTP.Close()
}

// Plan queues faults: each tools/call takes the first, until none is left;
// then calls are [OK].
func (s *Server) Plan(f ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.plan = append(s.plan, f...)
}

// Planned is how many planned faults no call has taken yet.
func (s *Server) Planned() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.plan)
}

// ClearPlan drops the planned faults no call has taken and returns how
// many there were.
func (s *Server) ClearPlan() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.plan)
	s.plan = nil
	return n
}

// ExpireSessions ends every session: a request in one is answered 404.
func (s *Server) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.sessions)
}

// Key is the counts of the tools/call requests that carried key as
// _meta[MetaKey] or as arguments.idempotency_key.
func (s *Server) Key(key string) Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.byKey[key]; c != nil {
		return *c
	}
	return Counts{}
}

// Keys are the keys tools/call requests carried, in the order first seen.
func (s *Server) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	seen := map[string]bool{}
	for _, r := range s.reqs {
		if r.Method != "tools/call" {
			continue
		}
		for _, k := range keysOf(r.Body) {
			if k != "" && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// Total is the counts of every tools/call request to a known tool.
func (s *Server) Total() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// Requests are the POSTs the server read, in order; with method set, only
// those of that JSON-RPC method ("" for every POST).
func (s *Server) Requests(method string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.reqs {
		if method == "" || r.Method == method {
			out = append(out, r)
		}
	}
	return out
}

// message is one JSON-RPC message as read.
type message struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

func (m *message) isCall() bool { return m.Method != "" && len(m.ID) > 0 && string(m.ID) != "null" }

// callParams are the params of a request, as far as the server reads them.
type callParams struct {
	Name      string                     `json:"name"`
	Arguments json.RawMessage            `json:"arguments"`
	Meta      map[string]json.RawMessage `json:"_meta"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/mcp" {
		http.NotFound(w, r)
		return
	}
	if s.o.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.o.Token {
		w.Header().Set("WWW-Authenticate", `Bearer realm="upstreamtest"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if r.Method == http.MethodDelete && s.o.Legacy {
		s.mu.Lock()
		ok := s.sessions[r.Header.Get(sessionHeader)]
		delete(s.sessions, r.Header.Get(sessionHeader))
		s.mu.Unlock()
		if !ok {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		http.Error(w, "Content-Type must be 'application/json'", http.StatusUnsupportedMediaType)
		return
	}
	if !accepts(r.Header.Values("Accept")) {
		http.Error(w, "Accept must contain both 'application/json' and 'text/event-stream'", http.StatusBadRequest)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return
	}
	var m message
	if err := json.Unmarshal(body, &m); err != nil || m.JSONRPC != "2.0" {
		http.Error(w, fmt.Sprintf("malformed payload: %v", err), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Method: m.Method, Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()
	if s.o.Legacy {
		s.legacy(w, r, &m)
	} else {
		s.modern(w, r, &m)
	}
}

// accepts reports whether the Accept values take both JSON and SSE.
func accepts(values []string) bool {
	var json, sse bool
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := mime.ParseMediaType(strings.TrimSpace(part))
			json = json || mt == "application/json" || mt == "application/*" || mt == "*/*"
			sse = sse || mt == "text/event-stream" || mt == "text/*" || mt == "*/*"
		}
	}
	return json && sse
}

// modern serves 2026-07-28: no session; every call carries the protocol
// version in a header and in _meta, and its method and name in headers.
func (s *Server) modern(w http.ResponseWriter, r *http.Request, m *message) {
	v := r.Header.Get("Mcp-Protocol-Version")
	if v != Version {
		data, _ := json.Marshal(map[string]any{"supported": []string{Version}, "requested": v})
		s.writeError(w, http.StatusBadRequest, m.ID, codeUnsupportedVersion, fmt.Sprintf("protocol version %q is not supported by this server", v), data)
		return
	}
	if !m.isCall() {
		w.WriteHeader(http.StatusAccepted) // a notification or a response
		return
	}
	switch m.Method {
	case "server/discover", "tools/list", "tools/call", "initialize", "ping":
	default:
		s.writeError(w, http.StatusNotFound, m.ID, codeMethodNotFound, "method not found: "+m.Method, nil)
		return
	}
	var p callParams
	json.Unmarshal(m.Params, &p)
	var mv string
	json.Unmarshal(p.Meta[metaVersion], &mv)
	switch {
	case mv == "":
		s.writeError(w, http.StatusBadRequest, m.ID, codeInvalidParams, fmt.Sprintf("missing or invalid _meta field %q", metaVersion), nil)
		return
	case mv != v:
		s.writeError(w, http.StatusBadRequest, m.ID, codeHeaderMismatch, fmt.Sprintf("Mcp-Protocol-Version header %q does not match request %s %q", v, metaVersion, mv), nil)
		return
	}
	if h := r.Header.Get("Mcp-Method"); h != m.Method {
		s.writeError(w, http.StatusBadRequest, m.ID, codeHeaderMismatch, fmt.Sprintf("header mismatch: Mcp-Method header value '%s' does not match body value '%s'", h, m.Method), nil)
		return
	}
	if h := r.Header.Get("Mcp-Name"); m.Method == "tools/call" && h != p.Name {
		s.writeError(w, http.StatusBadRequest, m.ID, codeHeaderMismatch, fmt.Sprintf("header mismatch: Mcp-Name header value '%s' does not match body value '%s'", h, p.Name), nil)
		return
	}
	var caps map[string]any
	if json.Unmarshal(p.Meta[metaCapabilities], &caps) != nil || caps == nil {
		s.writeError(w, http.StatusOK, m.ID, codeInvalidParams, fmt.Sprintf("missing or invalid _meta field %q", metaCapabilities), nil)
		return
	}
	switch m.Method {
	case "server/discover":
		s.writeResult(w, m.ID, map[string]any{"supportedVersions": []string{Version},
			"capabilities": map[string]any{"tools": map[string]any{}}, "ttlMs": 60000})
	case "tools/list":
		s.writeResult(w, m.ID, map[string]any{"tools": s.o.Tools, "ttlMs": 0})
	case "tools/call":
		s.call(w, m, &p)
	default:
		s.writeError(w, http.StatusOK, m.ID, codeMethodNotFound, fmt.Sprintf("%q is not supported in the new protocol", m.Method), nil)
	}
}

// legacy serves 2025-11-25 in sessions.
func (s *Server) legacy(w http.ResponseWriter, r *http.Request, m *message) {
	v := r.Header.Get("Mcp-Protocol-Version")
	if v != "" && v != LegacyVersion && v < Version {
		http.Error(w, "Bad Request: Unsupported protocol version (supported versions: "+LegacyVersion+")", http.StatusBadRequest)
		return
	}
	var p callParams
	json.Unmarshal(m.Params, &p)
	if m.Method == "server/discover" {
		// As a stateful MCP Go SDK server: the versions it speaks, none of
		// them 2026-07-28.
		s.writeResult(w, m.ID, map[string]any{"supportedVersions": []string{LegacyVersion},
			"capabilities": map[string]any{"tools": map[string]any{}}, "ttlMs": 0})
		return
	}
	if v >= Version && m.isCall() {
		data, _ := json.Marshal(map[string]any{"supported": []string{LegacyVersion}, "requested": v})
		s.writeError(w, http.StatusBadRequest, m.ID, codeUnsupportedVersion, fmt.Sprintf("protocol version %q is not supported by this server", v), data)
		return
	}
	sid := r.Header.Get(sessionHeader)
	if m.Method == "initialize" && sid == "" {
		s.mu.Lock()
		s.nsession++
		sid = "sess-" + strconv.Itoa(s.nsession)
		s.sessions[sid] = true
		s.mu.Unlock()
		w.Header().Set(sessionHeader, sid)
		s.writeResult(w, m.ID, map[string]any{"protocolVersion": LegacyVersion,
			"capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo":   map[string]any{"name": "upstreamtest", "version": "1.0.0"}})
		return
	}
	if sid == "" {
		http.Error(w, "Bad Request: missing "+sessionHeader+" header", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	live := s.sessions[sid]
	s.mu.Unlock()
	if !live {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	if !m.isCall() {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	switch m.Method {
	case "ping":
		s.writeResult(w, m.ID, map[string]any{})
	case "tools/list":
		s.writeResult(w, m.ID, map[string]any{"tools": s.o.Tools})
	case "tools/call":
		s.call(w, m, &p)
	default:
		s.writeError(w, http.StatusOK, m.ID, codeMethodNotFound, "method not found: "+m.Method, nil)
	}
}

// keysOf are the _meta key and the argument key of a tools/call body.
func keysOf(body []byte) [2]string {
	var m struct {
		Params callParams `json:"params"`
	}
	json.Unmarshal(body, &m)
	return m.Params.keys()
}

// keys are the _meta key and the argument key of a call.
func (p *callParams) keys() [2]string {
	var k [2]string
	json.Unmarshal(p.Meta[MetaKey], &k[0])
	var args map[string]json.RawMessage
	json.Unmarshal(p.Arguments, &args)
	json.Unmarshal(args[ArgKey], &k[1])
	return k
}

// call serves one tools/call.
func (s *Server) call(w http.ResponseWriter, m *message, p *callParams) {
	if _, ok := s.tools[p.Name]; !ok {
		s.writeError(w, http.StatusOK, m.ID, codeInvalidParams, fmt.Sprintf("unknown tool %q", p.Name), nil)
		return
	}
	keys := p.keys()
	s.mu.Lock()
	f := OK
	if len(s.plan) > 0 {
		f, s.plan = s.plan[0], s.plan[1:]
	}
	s.total.Received++
	for _, k := range keys {
		if k != "" {
			s.count(k).Received++
		}
	}
	var result json.RawMessage
	switch f {
	case OK, HangUp, CutStream, Elicit:
		result = s.execute(p.Name, keys)
	}
	s.mu.Unlock()

	switch f {
	case Busy:
		w.Header().Set("Retry-After", "1")
		s.writeError(w, http.StatusServiceUnavailable, m.ID, codeServer, "upstream busy, retry later", nil)
	case InvalidParams:
		s.writeError(w, http.StatusOK, m.ID, codeInvalidParams, "invalid params: title is too long", nil)
	case ToolError:
		res := map[string]any{"isError": true, "content": []map[string]any{{"type": "text", "text": p.Name + " failed: the title is taken"}}}
		s.writeResult(w, m.ID, s.withMeta(res))
	case QuotaExceeded:
		w.Header().Set("Retry-After", "1")
		data := json.RawMessage(`{"reason":"quota_exceeded","status":429,"retry_after_ms":1000,"safe_new_key":false}`)
		s.writeError(w, http.StatusTooManyRequests, m.ID, codeServer, "quota exceeded: the call was not run", data)
	case HangUp:
		hangUp(w)
	case CutStream:
		resp, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: message\ndata: "+string(resp[:len(resp)/2]))
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler) // closes the connection mid-event
	case Elicit:
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		writeEvent(w, map[string]any{"jsonrpc": "2.0", "id": "elicit-1", "method": "elicitation/create",
			"params": map[string]any{"message": "Confirm the ticket?", "requestedSchema": map[string]any{"type": "object"}}})
		writeEvent(w, map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
	default:
		s.writeResult(w, m.ID, result)
	}
}

// count is the counts of key; s.mu is held.
func (s *Server) count(key string) *Counts {
	c := s.byKey[key]
	if c == nil {
		c = &Counts{}
		s.byKey[key] = c
	}
	return c
}

// execute runs the tool once, or, with Dedup, returns the result of the
// key's first execution; s.mu is held.
func (s *Server) execute(tool string, keys [2]string) json.RawMessage {
	dedup := keys[0]
	if dedup == "" {
		dedup = keys[1]
	}
	if s.o.Dedup && dedup != "" {
		if res, ok := s.done[dedup]; ok {
			return res
		}
	}
	s.total.Executed++
	for _, k := range keys {
		if k != "" {
			s.count(k).Executed++
		}
	}
	id := fmt.Sprintf("tkt_%d", s.total.Executed)
	res := map[string]any{
		"content":           []map[string]any{{"type": "text", "text": tool + ": " + id}},
		"structuredContent": map[string]any{"id": id, "tool": tool},
		"isError":           false,
	}
	b, _ := json.Marshal(s.withMeta(res))
	if dedup != "" {
		s.done[dedup] = b
	}
	return b
}

// withMeta adds [Options.ResultMeta] to a result.
func (s *Server) withMeta(res map[string]any) map[string]any {
	if len(s.o.ResultMeta) > 0 {
		res["_meta"] = s.o.ResultMeta
	}
	return res
}

// hangUp closes the connection without an answer.
func hangUp(w http.ResponseWriter) {
	if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
		c.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

// writeResult answers a result, in JSON or as SSE. A 2026-07-28 result
// carries resultType and the server's identity as the MCP Go SDK's does.
func (s *Server) writeResult(w http.ResponseWriter, id json.RawMessage, result any) {
	if !s.o.Legacy {
		var m map[string]any
		b, _ := json.Marshal(result)
		json.Unmarshal(b, &m)
		m["resultType"] = "complete"
		meta, _ := m["_meta"].(map[string]any)
		meta = cloneMap(meta)
		meta[metaServerInfo] = map[string]any{"name": "upstreamtest", "version": "1.0.0"}
		m["_meta"] = meta
		result = m
	}
	s.write(w, http.StatusOK, map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// writeError answers a JSON-RPC error with an HTTP status; errors other
// than 200 are always JSON.
func (s *Server) writeError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string, data json.RawMessage) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	e := map[string]any{"code": code, "message": msg}
	if data != nil {
		e["data"] = data
	}
	s.write(w, status, map[string]any{"jsonrpc": "2.0", "id": id, "error": e})
}

func (s *Server) write(w http.ResponseWriter, status int, resp any) {
	if s.o.SSE && status == http.StatusOK {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(status)
		if s.o.Legacy {
			io.WriteString(w, "event: prime\nid: 0_0\ndata: \n\n")
		}
		writeEvent(w, map[string]any{"jsonrpc": "2.0", "method": "notifications/message",
			"params": map[string]any{"level": "info", "data": "working"}})
		writeEvent(w, resp)
		return
	}
	b, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// writeEvent writes one SSE message event and flushes it.
func writeEvent(w http.ResponseWriter, msg any) {
	b, _ := json.Marshal(msg)
	var buf bytes.Buffer
	buf.WriteString("event: message\ndata: ")
	buf.Write(b)
	buf.WriteString("\n\n")
	w.Write(buf.Bytes())
	http.NewResponseController(w).Flush()
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
