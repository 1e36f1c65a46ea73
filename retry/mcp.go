package retry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/mcpwire"
)

// MCPUpstream is one upstream MCP server reached over Streamable HTTP, as
// a vendor: each attempt of a tool call to it is exactly one tools/call
// POST through Executor (docs/DESIGN.md, "Attempts and retries"). Keep one
// per upstream server: it caches what the upstream told it once
// (server/discover, or a 2025-11-25 session) for every tool of the server.
// It is safe for concurrent use; its fields must not change, and it must
// not be copied, after first use.
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

	ids  atomic.Int64 // the last JSON-RPC id sent
	once sync.Once
	gate chan struct{} // held while a session is established
	mu   sync.Mutex
	sess *mcpSession // nil until established, and after a not-run answer
	// legacy: the upstream answered server/discover as an earlier
	// protocol, so a lost session is made again with initialize alone.
	legacy atomic.Bool
}

// The protocol versions the target speaks: 2026-07-28 stateless, else a
// session of an earlier version the upstream's initialize chooses.
const (
	mcpModern = "2026-07-28"
	mcpLegacy = "2025-11-25"
)

var mcpLegacyVersions = []string{mcpLegacy, "2025-06-18", "2025-03-26", "2024-11-05"}

// mcpClientInfo is the clientInfo the target sends; it declares no client
// capability: a server-to-client request is refused (docs/DESIGN.md,
// "Attempts and retries").
var mcpClientInfo = json.RawMessage(`{"name":"obol-gateway","version":"0.1.0"}`)

// mcpSession is what the upstream told the target once: the protocol
// version, the session id of a 2025-11-25 upstream, and (2026-07-28) the
// x-mcp-header annotations of each tool's arguments.
type mcpSession struct {
	version string
	modern  bool
	id      string
	params  map[string][]mcpParamHeader
}

// Target returns the [Target] of the upstream's tool named tool. It is a
// [SecretHolder]: the credentials in Header are scrubbed from its answers.
func (u *MCPUpstream) Target(tool string) Target {
	return &mcpTarget{u: u, tool: tool}
}

type mcpTarget struct {
	u    *MCPUpstream
	tool string
}

// Secrets returns the credentials of the upstream's Header and URL.
func (t *mcpTarget) Secrets() []string {
	return (&HTTPTarget{URL: t.u.URL, Header: t.u.Header}).Secrets()
}

// Send makes the before-send steps the upstream needs (server/discover and
// tools/list once, or a 2025-11-25 session) and then exactly one tools/call
// POST, and classifies its answer (docs/DESIGN.md, "EffectSpec").
func (t *mcpTarget) Send(ctx context.Context, a Attempt) Result {
	u := t.u
	args := idempotency.ArgumentsOrEmpty(a.Arguments)
	meta := map[string]any{}
	switch b := a.Spec.Idempotency; {
	case a.Spec.Route == effectspec.RouteFederated, b.Kind == "", b.Kind == effectspec.BindingUnsupported:
	case b.Kind == effectspec.BindingMeta:
		name := b.Meta
		if name == "" {
			name = effectspec.DefaultMetaName
		}
		meta[name] = a.Key.String()
	case b.Kind == effectspec.BindingBodyPointer:
		out, err := effectspec.SetAtPointer(args, b.Pointer, a.Key.String())
		if err != nil {
			return Result{Phase: BeforeSend, Err: newError(BeforeSend, "request", fmt.Errorf("%w: %w", idempotency.ErrInvalidRequest, err))}
		}
		args = out
	default:
		// A header never reaches an upstream's tool, which sees only the
		// JSON-RPC message.
		return Result{Phase: BeforeSend, Err: &Error{Phase: BeforeSend, Op: "request", Reason: "binding not sent to an MCP upstream",
			Err: fmt.Errorf("%w: binding %s on an MCP route", idempotency.ErrInvalidRequest, b.Kind)}}
	}
	s, serr := u.session(ctx)
	if serr != nil {
		return Result{Phase: BeforeSend, Err: serr}
	}
	p, err := callParams(t.tool, meta, s, args)
	if err != nil {
		return Result{Phase: BeforeSend, Err: newError(BeforeSend, "request", fmt.Errorf("%w: arguments: %w", idempotency.ErrInvalidRequest, err))}
	}
	var extra http.Header
	if s.modern {
		extra = paramHeaders(s.params[t.tool], args)
	}
	ans := u.call(ctx, s, "tools/call", t.tool, p, extra)
	res, notRun := classifyMCP(a.Spec, ans, s.id != "")
	if notRun {
		// The next attempt re-establishes what the upstream refused.
		u.forget(s)
	}
	if ans.inputRequired {
		u.logger().Warn("mcp upstream: refused an input request of a tool result", "tool", t.tool)
	}
	return res
}

// mcpAnswer is what one POST to the upstream showed: the Executor's result
// (its Body unset) and the JSON-RPC response to the request, if one came.
type mcpAnswer struct {
	res           Result
	msg           mcpwire.Message
	got           bool // msg is the response to the request
	inputRequired bool // a result that asks for input rather than ends the call
}

// notRunReasons are the refusals of an Obol upstream (error.data.reason)
// that it answers before dispatching anything for the request. Not
// store_unavailable: Obol answers it also when the dispatch ran and only
// its finalize failed.
var notRunReasons = []string{"unauthorized", "quota_exceeded", "store_full", "store_data_lost", "vendor_unreachable"}

// classifyMCP turns the answer of a tools/call into the attempt's Result
// (docs/DESIGN.md, "EffectSpec", the MCP classification). notRun reports an
// answer that proves the tool never ran: the attempt is BeforeSend and the
// session (or discovery) it was sent under is to be dropped.
func classifyMCP(spec effectspec.Spec, ans mcpAnswer, session bool) (res Result, notRun bool) {
	res = ans.res
	if res.Phase != Responded {
		return res, false
	}
	status := res.Status
	res.Outcome = effectspec.Unknown
	var e mcpwire.ErrorObject
	isErr := false
	if ans.got {
		if len(ans.msg.Result) > 0 {
			res.Body = ans.msg.Result
		} else {
			res.Body = ans.msg.Error
			e, isErr = ans.msg.ErrorOf()
		}
	}
	refused := func(why string) (Result, bool) {
		return Result{Phase: BeforeSend, Err: &Error{Phase: BeforeSend, Op: "tools/call", Reason: why,
			Err: fmt.Errorf("%w: the upstream did not run the tool (%s)", idempotency.ErrVendorUnreachable, why)}}, true
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden ||
		status == http.StatusNotAcceptable || status == http.StatusUnsupportedMediaType:
		return refused("HTTP " + strconv.Itoa(status))
	case status == http.StatusNotFound && session && !ans.got:
		return refused("HTTP 404 to a session")
	case res.Truncated:
		return res, false
	case isErr && (e.Code == -32601 || e.Code == -32602):
		res.Outcome = effectspec.DefinitelyRejected
		return res, false
	case isErr && status == http.StatusBadRequest && slices.Contains([]int64{-32600, -32700, -32020, -32021, -32022}, e.Code):
		return refused("HTTP 400, JSON-RPC error " + strconv.FormatInt(e.Code, 10))
	case isErr && obolNotRun(e):
		return refused("JSON-RPC error " + strconv.FormatInt(e.Code, 10) + " of a refusal before dispatch")
	case ans.got && isObject(ans.msg.Result) && status >= 200 && status < 300 && !ans.inputRequired:
		var r struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(ans.msg.Result, &r) != nil {
			return res, false
		}
		res.Outcome = effectspec.Accepted
		if r.IsError {
			res.Outcome = spec.Status.ToolError
			if res.Outcome != effectspec.DefinitelyRejected {
				res.Outcome = effectspec.Unknown
			}
		}
		return res, false
	case (status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable) && len(ans.msg.Result) == 0:
		k := spec.Idempotency.Kind
		res.Retryable = spec.Route != effectspec.RouteFederated && (k == effectspec.BindingMeta || k == effectspec.BindingBodyPointer)
	}
	return res, false
}

func isObject(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && b[0] == '{'
}

// obolNotRun reports an Obol gateway's refusal whose reason says it
// dispatched nothing for the request.
func obolNotRun(e mcpwire.ErrorObject) bool {
	var d struct {
		Reason string `json:"reason"`
	}
	return len(e.Data) > 0 && json.Unmarshal(e.Data, &d) == nil && slices.Contains(notRunReasons, d.Reason)
}

// ListTools returns the upstream's tools (tools/list, every page), each
// the JSON object the upstream sent.
func (u *MCPUpstream) ListTools(ctx context.Context) ([]json.RawMessage, error) {
	s, err := u.session(ctx)
	if err != nil {
		return nil, err
	}
	tools, err := u.listTools(ctx, s)
	if err != nil {
		var e *Error
		if errors.As(err, &e) && e.Phase == BeforeSend {
			u.forget(s)
		}
		return nil, err
	}
	return tools, nil
}

// maxToolPages bounds a tools/list that pages on and on.
const maxToolPages = 1000

// listTools reads every page of tools/list under s.
func (u *MCPUpstream) listTools(ctx context.Context, s *mcpSession) ([]json.RawMessage, error) {
	var out []json.RawMessage
	cursor := ""
	for range maxToolPages {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		if s.modern {
			params["_meta"] = s.protocolMeta()
		}
		p, _ := json.Marshal(params)
		ans := u.call(ctx, s, "tools/list", "", p, nil)
		var page struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := stepAnswer("tools/list", ans, s.id != ""); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(ans.msg.Result, &page); err != nil {
			return nil, stepError("tools/list", "result is not a tool list", err)
		}
		out = append(out, page.Tools...)
		if page.NextCursor == "" {
			return out, nil
		}
		cursor = page.NextCursor
	}
	return nil, stepError("tools/list", "too many pages", errors.New("tools/list: too many pages"))
}

// stepAnswer is nil for an answer with a JSON-RPC result, else the error
// of a before-send step that failed.
func stepAnswer(op string, ans mcpAnswer, session bool) error {
	res := ans.res
	switch {
	case res.Phase != Responded:
		e, _ := res.Err.(*Error)
		why := "transport error"
		if e != nil {
			why = e.Reason
		}
		return stepError(op, why, res.Err)
	case res.Truncated:
		return stepError(op, "answer too large", errors.New("answer too large"))
	case res.Status == http.StatusNotFound && session:
		return stepError(op, "HTTP 404 to a session", errors.New("session not found"))
	case !ans.got:
		return stepError(op, "HTTP "+strconv.Itoa(res.Status)+" without a JSON-RPC response", errors.New("no response"))
	case len(ans.msg.Result) == 0:
		e, _ := ans.msg.ErrorOf()
		return stepError(op, "JSON-RPC error "+strconv.FormatInt(e.Code, 10), errors.New("JSON-RPC error"))
	}
	return nil
}

// stepError is the error of a before-send step: the attempt is BeforeSend
// and the upstream counts as not reached.
func stepError(op, why string, err error) *Error {
	return &Error{Phase: BeforeSend, Op: op, Reason: why, Err: fmt.Errorf("%w: %w", idempotency.ErrVendorUnreachable, err)}
}

func (u *MCPUpstream) logger() *slog.Logger {
	if u.Logger != nil {
		return u.Logger
	}
	return slog.Default()
}

func (u *MCPUpstream) executor() *Executor {
	if u.Executor != nil {
		return u.Executor
	}
	return &sharedExecutor
}

// session returns the upstream's session, establishing it first if there
// is none: server/discover and tools/list, or, for an upstream that does
// not speak 2026-07-28, initialize and notifications/initialized. Those
// are before-send steps: their failure is the attempt's, BeforeSend.
func (u *MCPUpstream) session(ctx context.Context) (*mcpSession, error) {
	u.once.Do(func() { u.gate = make(chan struct{}, 1) })
	if s := u.current(); s != nil {
		return s, nil
	}
	select {
	case u.gate <- struct{}{}:
	case <-ctx.Done():
		return nil, stepError("session", "context done", ctx.Err())
	}
	defer func() { <-u.gate }()
	if s := u.current(); s != nil {
		return s, nil
	}
	s, err := u.establish(ctx)
	if err != nil {
		return nil, err
	}
	u.mu.Lock()
	u.sess = s
	u.mu.Unlock()
	return s, nil
}

func (u *MCPUpstream) current() *mcpSession {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sess
}

// forget drops s, unless another session replaced it already.
func (u *MCPUpstream) forget(s *mcpSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.sess == s {
		u.sess = nil
	}
}

// establish learns what the upstream speaks, as the go-sdk client does:
// server/discover first; an upstream that answers it with an error, or
// lists no 2026-07-28, gets the initialize handshake.
func (u *MCPUpstream) establish(ctx context.Context) (*mcpSession, error) {
	if u.legacy.Load() {
		s, err := u.initialize(ctx)
		if err != nil {
			// It may speak 2026-07-28 now: the next attempt discovers.
			u.legacy.Store(false)
		}
		return s, err
	}
	s := &mcpSession{version: mcpModern, modern: true}
	p, _ := json.Marshal(map[string]any{"_meta": s.protocolMeta()})
	ans := u.call(ctx, s, "server/discover", "", p, nil)
	var disc struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	switch {
	case ans.res.Phase != Responded || ans.res.Truncated:
		return nil, stepAnswer("server/discover", ans, false)
	case ans.got && len(ans.msg.Result) > 0:
		if json.Unmarshal(ans.msg.Result, &disc) == nil && slices.Contains(disc.SupportedVersions, mcpModern) {
			tools, err := u.listTools(ctx, s)
			if err != nil {
				return nil, err
			}
			s.params = paramAnnotations(tools)
			return s, nil
		}
	case ans.got, ans.res.Status == http.StatusBadRequest, ans.res.Status == http.StatusNotFound,
		ans.res.Status == http.StatusMethodNotAllowed:
		// An error of an earlier protocol: fall back to initialize.
	default:
		return nil, stepAnswer("server/discover", ans, false)
	}
	legacy, err := u.initialize(ctx)
	if err == nil {
		u.legacy.Store(true)
	}
	return legacy, err
}

// initialize makes a 2025-11-25 session: initialize, then
// notifications/initialized, both under the session id the upstream gave.
func (u *MCPUpstream) initialize(ctx context.Context) (*mcpSession, error) {
	s := &mcpSession{}
	p, _ := json.Marshal(map[string]any{"protocolVersion": mcpLegacy, "capabilities": struct{}{}, "clientInfo": mcpClientInfo})
	ans := u.call(ctx, s, "initialize", "", p, nil)
	if err := stepAnswer("initialize", ans, false); err != nil {
		return nil, err
	}
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if json.Unmarshal(ans.msg.Result, &init) != nil || !slices.Contains(mcpLegacyVersions, init.ProtocolVersion) {
		return nil, stepError("initialize", "no protocol version in common", errors.New("unsupported protocol version"))
	}
	s.version, s.id = init.ProtocolVersion, ans.res.Header.Get("Mcp-Session-Id")
	done := u.notify(ctx, s, "notifications/initialized")
	switch {
	case done.Phase != Responded:
		return nil, stepAnswer("notifications/initialized", mcpAnswer{res: done}, s.id != "")
	case done.Status/100 != 2:
		return nil, stepError("notifications/initialized", "HTTP "+strconv.Itoa(done.Status), errors.New("refused"))
	}
	return s, nil
}

// protocolMeta is the _meta every 2026-07-28 request carries.
func (s *mcpSession) protocolMeta() map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    s.version,
		"io.modelcontextprotocol/clientInfo":         mcpClientInfo,
		"io.modelcontextprotocol/clientCapabilities": struct{}{},
	}
}

// callParams is the params of a tools/call of tool with args (valid JSON:
// the Orchestrator hashed them) and the binding's _meta members meta, as
// encoding/json writes the struct {_meta (omitted when empty), name,
// arguments}, without reflection or a second scan of args on a call's path.
func callParams(tool string, meta map[string]any, s *mcpSession, args []byte) ([]byte, error) {
	if s.modern {
		for k, v := range s.protocolMeta() {
			meta[k] = v
		}
	}
	name, err := json.Marshal(tool)
	if err != nil {
		return nil, err
	}
	p := make([]byte, 0, len(args)+len(name)+256)
	p = append(p, '{')
	if len(meta) > 0 {
		m, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		p = append(p, `"_meta":`...)
		p = append(p, m...)
		p = append(p, ',')
	}
	p = append(p, `"name":`...)
	p = append(p, name...)
	p = append(p, `,"arguments":`...)
	p = append(p, bytes.TrimSpace(args)...)
	return append(p, '}'), nil
}

// header is the header of a request of s: Header, then the transport's
// own, which win.
func (u *MCPUpstream) header(ctx context.Context, s *mcpSession, method, name string) http.Header {
	h := http.Header{}
	if u.InjectHeaders != nil {
		u.InjectHeaders(ctx, h)
	}
	for k, v := range u.Header {
		h[k] = append([]string(nil), v...)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	if s.version != "" {
		h.Set("Mcp-Protocol-Version", s.version)
	}
	if s.id != "" {
		h.Set("Mcp-Session-Id", s.id)
	}
	if s.modern && method != "" {
		h.Set("Mcp-Method", method)
		if name != "" {
			h.Set("Mcp-Name", name)
		}
	}
	return h
}

// call sends one JSON-RPC request and reads its answer (see read).
func (u *MCPUpstream) call(ctx context.Context, s *mcpSession, method, name string, params []byte, extra http.Header) mcpAnswer {
	id := strconv.FormatInt(u.ids.Add(1), 10)
	body := make([]byte, 0, len(params)+len(method)+48)
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = append(body, id...)
	body = append(body, `,"method":`...)
	m, _ := json.Marshal(method)
	body = append(body, m...)
	body = append(body, `,"params":`...)
	body = append(body, params...)
	body = append(body, '}')
	h := u.header(ctx, s, method, name)
	for k, v := range extra {
		h[k] = v
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.URL, bytes.NewReader(body))
	if err != nil {
		return mcpAnswer{res: Result{Phase: BeforeSend, Err: newError(BeforeSend, "request", fmt.Errorf("%w: %w", idempotency.ErrInvalidRequest, err))}}
	}
	req.Header = h
	var ans mcpAnswer
	out, err := outgoing(ctx, req)
	if err != nil {
		return mcpAnswer{res: Result{Phase: BeforeSend, Err: newError(BeforeSend, "request", err)}}
	}
	ans.res = u.executor().exchange(out, func(resp *http.Response, limit int64) Result {
		return u.read(ctx, s, []byte(id), resp, limit, &ans)
	})
	return ans
}

// notify sends one JSON-RPC notification; the answer is its status.
func (u *MCPUpstream) notify(ctx context.Context, s *mcpSession, method string) Result {
	m, _ := json.Marshal(method)
	body := []byte(`{"jsonrpc":"2.0","method":` + string(m) + `,"params":{}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.URL, bytes.NewReader(body))
	if err != nil {
		return Result{Phase: BeforeSend, Err: newError(BeforeSend, "request", fmt.Errorf("%w: %w", idempotency.ErrInvalidRequest, err))}
	}
	req.Header = u.header(ctx, s, method, "")
	return u.executor().Do(ctx, req)
}

// read reads the answer to the request whose id is id: one JSON message,
// or a text/event-stream read event by event until the response to id,
// where notifications are skipped and a request of the upstream (sampling,
// elicitation, ...) is answered with an error and logged. A stream that
// ends before the response is PostSend: the request was written. The
// stream is read as it comes rather than whole, since an upstream may hold
// it open until its request is answered.
func (u *MCPUpstream) read(ctx context.Context, s *mcpSession, id []byte, resp *http.Response, limit int64, ans *mcpAnswer) Result {
	res := Result{Phase: Responded, Status: resp.StatusCode, Header: resp.Header}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" {
		all := readAll(resp, limit)
		if all.Phase == Responded && !all.Truncated {
			if m, err := mcpwire.Decode(all.Body); err == nil && m.IsResponse() && bytes.Equal(m.ID, id) {
				ans.msg, ans.got = m, true
			}
		}
		all.Body = nil
		u.noteInput(ans)
		return all
	}
	ev := mcpwire.NewEvents(resp.Body, limit)
	for {
		data, err := ev.Next()
		switch {
		case errors.Is(err, mcpwire.ErrTooLarge):
			res.Truncated = true
			return res
		case err != nil:
			return Result{Phase: PostSend, Status: resp.StatusCode, Err: newError(PostSend, "read body", fmt.Errorf("stream ended before the response: %w", err))}
		}
		m, err := mcpwire.Decode(data)
		switch {
		case err != nil:
		case m.IsResponse() && bytes.Equal(m.ID, id):
			ans.msg, ans.got = m, true
			u.noteInput(ans)
			return res
		case m.IsRequest():
			u.refuse(ctx, s, m)
		}
	}
}

// noteInput marks a result that asks for input (2026-07-28's multi
// round-trip requests): the gateway gives none, so the call did not end.
func (u *MCPUpstream) noteInput(ans *mcpAnswer) {
	if !ans.got || len(ans.msg.Result) == 0 {
		return
	}
	var r struct {
		ResultType string `json:"resultType"`
	}
	if json.Unmarshal(ans.msg.Result, &r) == nil && r.ResultType != "" && r.ResultType != "complete" {
		ans.inputRequired = true
	}
}

// maxLoggedMethod bounds the method name logged of a refused request.
const maxLoggedMethod = 64

// refuse answers a request of the upstream with a JSON-RPC error: the
// gateway declares no client capability and has no one to ask.
func (u *MCPUpstream) refuse(ctx context.Context, s *mcpSession, m mcpwire.Message) {
	method := m.Method
	if len(method) > maxLoggedMethod {
		method = method[:maxLoggedMethod]
	}
	u.logger().Warn("mcp upstream: refused a server-to-client request", "method", method)
	body := []byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"error":{"code":-32601,"message":"the gateway answers no server-to-client request"}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.URL, bytes.NewReader(body))
	if err != nil {
		return
	}
	req.Header = u.header(ctx, s, "", "")
	u.executor().Do(ctx, req)
}

// mcpParamHeader is an x-mcp-header annotation: the argument at path is
// sent as the header Mcp-Param-<header> too.
type mcpParamHeader struct {
	path   []string
	header string
}

// paramAnnotations reads the x-mcp-header annotations of each tool's
// inputSchema, at any depth.
func paramAnnotations(tools []json.RawMessage) map[string][]mcpParamHeader {
	type prop struct {
		XMCPHeader string          `json:"x-mcp-header"`
		Properties json.RawMessage `json:"properties"`
	}
	var walk func(props json.RawMessage, prefix []string, out []mcpParamHeader) []mcpParamHeader
	walk = func(props json.RawMessage, prefix []string, out []mcpParamHeader) []mcpParamHeader {
		var m map[string]prop
		if json.Unmarshal(props, &m) != nil {
			return out
		}
		for name, p := range m {
			path := append(slices.Clone(prefix), name)
			if isToken(p.XMCPHeader) {
				out = append(out, mcpParamHeader{path: path, header: p.XMCPHeader})
			}
			if len(p.Properties) > 0 {
				out = walk(p.Properties, path, out)
			}
		}
		return out
	}
	out := map[string][]mcpParamHeader{}
	for _, raw := range tools {
		var t struct {
			Name        string `json:"name"`
			InputSchema struct {
				Properties json.RawMessage `json:"properties"`
			} `json:"inputSchema"`
		}
		if json.Unmarshal(raw, &t) != nil {
			continue
		}
		if ph := walk(t.InputSchema.Properties, nil, nil); len(ph) > 0 {
			out[t.Name] = ph
		}
	}
	return out
}

// isToken reports whether s is an RFC 9110 token, as a header name must
// be: the go-sdk client drops a tool whose annotation is not one.
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// paramHeaders are the Mcp-Param-* headers of args, as the go-sdk client
// writes them: a string, a boolean or a safe integer, base64-wrapped when
// it is not plain printable ASCII.
func paramHeaders(anns []mcpParamHeader, args []byte) http.Header {
	if len(anns) == 0 {
		return nil
	}
	h := http.Header{}
	for _, a := range anns {
		cur := json.RawMessage(args)
		for _, name := range a.path {
			var obj map[string]json.RawMessage
			if json.Unmarshal(cur, &obj) != nil {
				cur = nil
				break
			}
			cur = obj[name]
		}
		if v, ok := headerValue(cur); ok {
			h.Set("Mcp-Param-"+a.header, v)
		}
	}
	return h
}

// headerValue is the header text of one argument value, if it is a
// primitive the annotation may carry.
func headerValue(raw json.RawMessage) (string, bool) {
	var v any
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	var s string
	switch v := v.(type) {
	case string:
		s = v
	case bool:
		s = strconv.FormatBool(v)
	case float64:
		const safe = 1<<53 - 1
		if v != float64(int64(v)) || v > safe || v < -safe {
			return "", false
		}
		return strconv.FormatInt(int64(v), 10), true
	default:
		return "", false
	}
	if needsBase64(s) {
		return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(s)) + "?=", true
	}
	return s, true
}

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return true
		}
	}
	return len(s) >= len("=?base64??=") && s[:9] == "=?base64?" && s[len(s)-2:] == "?="
}

var _ SecretHolder = (*mcpTarget)(nil)
