package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/callkey"
	"github.com/obol-gateway/obol/internal/mcpdirect"
	"github.com/obol-gateway/obol/internal/strictjson"
)

type jsonrpcError = jsonrpc.Error

// callInfo is what the front of POST /mcp resolved for one HTTP request:
// the caller's workspace and the effective idempotency key.
type callInfo struct {
	workspace string
	key       idempotency.Key
	source    idempotency.KeySource
	// splice, set by the handler, holds the parts of its result that the
	// front writes in place of their placeholders.
	splice *mcpdirect.Splice
}

type callInfoKey struct{}

// tokenExtraCall is the auth.TokenInfo.Extra entry that carries *callInfo to
// the tool handler.
const tokenExtraCall = "dev.obol/call"

// JSON-RPC 2.0 error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
)

// MCP error codes of protocol 2026-07-28, which the SDK answers with.
const (
	codeHeaderMismatch     = -32020 // Mcp-Protocol-Version, Mcp-Method or Mcp-Name missing or not the message's
	codeMissingClientCaps  = -32021
	codeUnsupportedVersion = -32022
)

// Limits of the envelope: every MCP method name and every id a client
// makes is far shorter.
const (
	maxMethodBytes = 128
	maxIDBytes     = 256
)

// BearerToken returns the token of the one Authorization header field, if
// it is "Bearer <token>": what [Config.Authenticate] is given.
func BearerToken(h http.Header) (string, bool) {
	vals := h.Values("Authorization")
	if len(vals) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" || strings.ContainsAny(tok, " \t") {
		return "", false
	}
	return tok, true
}

// envelope is the front's one reading of a JSON-RPC message: the only
// reading the gateway acts on. The SDK reads the same bytes again, and
// parseEnvelope makes sure it cannot read anything else.
type envelope struct {
	id     json.RawMessage // nil for a notification, or when refused before the id was read
	method string
	call   bool   // method is tools/call
	name   string // params.name of a tools/call
	ticket string // params._meta["dev.obol/approval-ticket"], "" when absent
	// metaKey is params._meta["dev.obol/idempotency-key"] as sent, nil
	// when absent: callkey.Key reads it.
	metaKey json.RawMessage
	// meta and args are params._meta and params.arguments of a tools/call
	// as sent, nil when absent: the direct path reads them.
	meta, args json.RawMessage
	// nearMiss is the refusal of the first member of params or
	// params._meta whose name is a near miss of _meta or of a name the
	// gateway reads (nearMissName), nil when there is none. The front
	// answers it as malformed_key before it reads the key.
	nearMiss error
}

// frontError is a message the front refuses. Its text is fixed: never any
// part of the body.
type frontError struct {
	code   int64
	reason string
	msg    string
	// call: refused after the message was read as a tools/call, so the
	// answer carries the effective key.
	call bool
}

// depthRefusal is the text of a message nested deeper than
// [strictjson.MaxDepth]: it names the limit, never where it was passed.
var depthRefusal = "invalid request: the message nests objects and arrays deeper than the nesting depth limit of " +
	strconv.Itoa(strictjson.MaxDepth) + " levels"

func invalidMessage(code int64, msg string) *frontError {
	return &frontError{code: code, reason: "invalid_request", msg: msg}
}

// parseEnvelope reads one JSON-RPC message strictly. It refuses what two
// JSON parsers could read differently: invalid JSON or UTF-8, lone
// surrogates, a member name that occurs twice anywhere in the message
// (after unescaping, so "method" and "meth\u006fd" are one name), and in
// the envelope objects (the message, params, params._meta) two names equal
// up to case, which a case-insensitive decoder would merge. It refuses
// batches: one message per POST. The jsonrpc, id (a string or an integer),
// method (a short printable string), params, params.name, arguments and
// the approval ticket must have their types. Each refusal is HTTP 400 with
// a JSON-RPC error (code -32700 for a body that is not JSON, -32600 for the
// message, -32602 for params), reason invalid_request (invalid_arguments
// for arguments that are not an object) and a fixed message. A message that
// nests deeper than [strictjson.MaxDepth] is -32600 with a message naming
// the limit (depthRefusal).
//
// A member of params or params._meta whose name is a near miss of _meta or
// of a name the gateway reads is not refused here but noted (nearMiss): the
// front refuses it as malformed_key, after a refusal of the message itself.
//
// The arguments of a tools/call are held to the same no-repeat rule (names
// compared exactly there: arguments are the caller's data). The request
// hash would refuse a repeated name later, but refusing it here means no
// part of a message reaches a second parser with a repeat in it.
func parseEnvelope(body []byte) (envelope, *frontError) {
	var env envelope
	// A repeated member is refused as a message: its answer never carries
	// a key, whatever was read before.
	repeated := func() *frontError {
		return invalidMessage(codeInvalidRequest, "invalid request: a member name occurs twice")
	}
	if err := strictjson.Check(body); err != nil {
		if errors.Is(err, strictjson.ErrRepeated) {
			return env, repeated()
		}
		if errors.Is(err, strictjson.ErrDepth) {
			// Valid JSON, perhaps, but past a limit: saying "not valid
			// JSON" would send the caller looking for a syntax error.
			return env, invalidMessage(codeInvalidRequest, depthRefusal)
		}
		return env, invalidMessage(codeParseError, "parse error: the body is not one valid JSON value")
	}
	if bytes.TrimSpace(body)[0] == '[' {
		return env, invalidMessage(codeInvalidRequest, "invalid request: one JSON-RPC message per request; batches are not accepted")
	}
	// The three envelope objects are read into buffers on the stack: an
	// envelope has a handful of members, so this allocates only for the
	// strings it keeps.
	var msgBuf, paramsBuf, metaBuf [8]strictjson.Member
	var ok bool
	msg, err := strictjson.Members(msgBuf[:0], body)
	if errors.Is(err, strictjson.ErrRepeated) {
		return env, repeated()
	}
	if err != nil {
		return env, invalidMessage(codeInvalidRequest, "invalid request: the message must be a JSON object")
	}
	for _, m := range msg {
		switch string(m.Name) {
		case "jsonrpc", "id", "method", "params", "result", "error":
		default:
			return env, invalidMessage(codeInvalidRequest, "invalid request: unknown member in the message")
		}
	}
	if rawID, ok := member(msg, "id"); ok {
		if !validID(rawID) {
			return env, invalidMessage(codeInvalidRequest, "invalid request: id must be a short string or an integer")
		}
		env.id = rawID
	}
	if v, _ := member(msg, "jsonrpc"); string(v) != `"2.0"` {
		return env, invalidMessage(codeInvalidRequest, `invalid request: jsonrpc must be "2.0"`)
	}
	_, hasParams := member(msg, "params")
	_, hasResult := member(msg, "result")
	_, hasError := member(msg, "error")
	rawMethod, isRequest := member(msg, "method")
	if !isRequest {
		// A response to a server request: an id and exactly one of result
		// and error.
		if env.id == nil || hasResult == hasError || hasParams {
			return env, invalidMessage(codeInvalidRequest, "invalid request: neither a request nor a response")
		}
		return env, nil
	}
	if hasResult || hasError {
		return env, invalidMessage(codeInvalidRequest, "invalid request: a request has no result or error")
	}
	if env.method, ok = callkey.String(rawMethod); !ok || !validRPCMethod(env.method) {
		return env, invalidMessage(codeInvalidRequest, "invalid request: method must be a short printable string")
	}
	env.call = env.method == "tools/call"
	bad := func(reason, msg string) (envelope, *frontError) {
		return env, &frontError{code: codeInvalidParams, reason: reason, msg: msg, call: env.call}
	}
	raw, _ := member(msg, "params")
	if !hasParams || string(raw) == "null" {
		if env.call {
			return bad("invalid_request", "invalid params: tools/call needs params")
		}
		return env, nil
	}
	params, err := strictjson.Members(paramsBuf[:0], raw)
	if errors.Is(err, strictjson.ErrRepeated) {
		return env, repeated()
	}
	if err != nil {
		return bad("invalid_request", "invalid params: params must be a JSON object")
	}
	var meta []strictjson.Member
	if rawMeta, ok := member(params, "_meta"); ok {
		env.meta = rawMeta
		meta, err = strictjson.Members(metaBuf[:0], rawMeta)
		if errors.Is(err, strictjson.ErrRepeated) {
			return env, repeated()
		}
		if err != nil {
			return bad("invalid_request", "invalid params: _meta must be a JSON object")
		}
		env.metaKey, _ = member(meta, metaKey)
	}
	env.nearMiss = callkey.NearMiss(params, meta)
	if !env.call {
		return env, nil
	}
	n, _ := member(params, "name")
	if env.name, ok = callkey.String(n); !ok || env.name == "" {
		return bad("invalid_request", "invalid params: name must be a tool name")
	}
	if a, ok := member(params, "arguments"); ok {
		if a[0] != '{' && string(a) != "null" {
			return bad("invalid_arguments", "invalid arguments: arguments must be a JSON object")
		}
		env.args = a
	}
	if t, ok := member(meta, metaTicket); ok {
		if env.ticket, ok = callkey.Ticket(t); !ok {
			return bad("invalid_request", "invalid params: _meta "+metaTicket+" must be an apt_ ticket id")
		}
	}
	return env, nil
}

// member returns the value of the member of ms named name (names are
// unique in what strictjson.Members returns).
func member(ms []strictjson.Member, name string) (json.RawMessage, bool) {
	for _, m := range ms {
		if string(m.Name) == name {
			return m.Value, true
		}
	}
	return nil, false
}

// validID accepts what every JSON-RPC library reads the same way: a short
// string, or an integer that a double holds exactly.
func validID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	if raw[0] == '"' {
		return len(raw) <= maxIDBytes
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	return err == nil && n > -(1<<53) && n < 1<<53
}

func validRPCMethod(m string) bool {
	if m == "" || len(m) > maxMethodBytes {
		return false
	}
	for i := 0; i < len(m); i++ {
		if m[i] <= ' ' || m[i] >= 0x7f {
			return false
		}
	}
	return true
}

// mcpFront is the thin wrapper in front of the SDK: it answers 405 with
// Allow: POST to anything but POST (with or without a key), authenticates
// the Bearer key (401 otherwise), reads the body (at most maxBodyBytes, else
// 413 request_too_large) and the message once (parseEnvelope), resolves the
// effective Idempotency-Key, refuses what the SDK must never see, and
// rewrites the SDK's answer so that no error quotes the request
// (sanitizer). The SDK reads the same bytes afterwards, and can only read
// what the front read. A refusal here touches no store state (the one read
// it may make is the ticket lookup of a resume).
//
// The key is checked on every POST, not only on tools/call: a malformed
// one is HTTP 400 with a JSON-RPC error, reason malformed_key, no key in
// the answer; so is a near miss of a name the key or the ticket is read
// under (nearMiss), because the gateway would ignore what it holds. Every
// answer to a tools/call carries the effective key as the Idempotency-Key
// header and, when it is a refusal, as error.data.idempotency_key; a resume
// that carries a ticket and no key answers with the ticket's key, which the
// front looks up. No key is in the answer where none could be read:
// malformed_key, a message refused for repeated members or before it was
// read as a tools/call, and a resume whose ticket could not be read
// (store_unavailable: its key is the ticket's).
func (g *Gateway) mcpFront(next http.Handler) http.Handler {
	return g.front(next, false)
}

// front is mcpFront; with direct, a tools/call of a gateway tool is
// answered by the direct path ([mcpdirect.Server.Serve]) rather than next,
// when it can be.
func (g *Gateway) front(next http.Handler, direct bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			rf := refusal{reason: "method_not_allowed", status: http.StatusMethodNotAllowed, msg: "only POST is served on /mcp"}
			if r.Method == http.MethodGet || r.Method == http.MethodDelete {
				// A client's probe (for a stream, for the end of a session),
				// not a refused call: not counted or logged as a refusal.
				if g.cfg.OnProbe != nil {
					g.cfg.OnProbe(r.Method)
				}
				e := rpcError(rf, "")
				e.Code = rf.code()
				writeRPCError(w, rf.status, nil, e)
				return
			}
			g.frontRefuse(w, nil, rf, "")
			return
		}
		ws, ok := g.workspace(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="obol"`)
			g.frontRefuse(w, nil, refusal{reason: "unauthorized", status: http.StatusUnauthorized, msg: "missing or unknown API key (Authorization: Bearer <key>)"}, "")
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(g.cfg.MaxBodyBytes)))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				g.frontRefuse(w, nil, refusal{reason: "request_too_large", status: http.StatusRequestEntityTooLarge, msg: "request body larger than " + sizeText(g.cfg.MaxBodyBytes)}, "")
				return
			}
			g.frontRefuse(w, nil, refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: "could not read the request body"}, "")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		env, ferr := parseEnvelope(body)
		if ferr != nil && !ferr.call {
			// Refused before it was read as a call: no key in the answer.
			g.frontRefuseCode(w, env.id, ferr.code, refusal{reason: ferr.reason, status: http.StatusBadRequest, msg: ferr.msg}, "")
			return
		}
		err = nearMiss(r, env)
		var key idempotency.Key
		var src idempotency.KeySource
		if err == nil {
			key, src, err = callkey.Key(r.Header.Values(headerKey), env.metaKey)
		}
		if err != nil {
			g.frontRefuse(w, env.id, g.classify(err), "")
			return
		}
		if ferr == nil {
			// A resume without a key uses the ticket's key: a freshly
			// minted key never overrides a ticket.
			if key, src, err = callkey.Resume(r.Context(), g.orch.Store, env.ticket, ws, key, src); err != nil {
				// The key of this call is the ticket's, which could not be
				// read: no key in the answer.
				if g.cfg.OnStoreError != nil {
					g.cfg.OnStoreError("ticket")
				}
				g.frontRefuse(w, env.id, g.classify(err), "")
				return
			}
		}
		callKey := ""
		if env.call {
			callKey = key.String()
			w.Header().Set(headerKey, callKey)
		}
		if ferr != nil {
			g.frontRefuseCode(w, env.id, ferr.code, refusal{reason: ferr.reason, status: http.StatusBadRequest, msg: ferr.msg}, callKey)
			return
		}
		if g.cfg.Authenticate == nil && g.cfg.Verifier == nil {
			// Without authentication the SDK's bearer check, which carries
			// the front's result to the handler, still needs a token: one
			// of ours, read by nobody.
			r.Header = r.Header.Clone()
			r.Header.Set("Authorization", "Bearer unauthenticated")
		}
		ci := &callInfo{workspace: ws, key: key, source: src}
		ctx := context.WithValue(r.Context(), callInfoKey{}, ci)
		sw := &sanitizer{ResponseWriter: w, id: env.id, ci: ci}
		r = r.WithContext(ctx)
		served, observe := false, func() {}
		if direct && env.call && env.id != nil && g.known(env.name) {
			served, observe = g.direct.Serve(sw, r, mcpdirect.Request{ID: env.id, Name: env.name, Meta: env.meta, Arguments: env.args, Workspace: ws, Call: ci})
		}
		if !served {
			next.ServeHTTP(sw, r)
		}
		sw.finish(callKey)
		if served {
			// The call's log line and OnCall's end wait for no caller: the
			// answer (its length set) leaves first.
			http.NewResponseController(w).Flush()
			observe()
		}
	})
}

// frontRefuse writes a JSON-RPC error response with an HTTP status.
func (g *Gateway) frontRefuse(w http.ResponseWriter, id json.RawMessage, r refusal, key string) {
	g.frontRefuseCode(w, id, r.code(), r, key)
}

func (g *Gateway) frontRefuseCode(w http.ResponseWriter, id json.RawMessage, code int64, r refusal, key string) {
	g.refused(r.reason)
	if g.cfg.OnFrontRefusal != nil {
		g.cfg.OnFrontRefusal(r.reason, r.status)
	}
	e := rpcError(r, key)
	e.Code = code
	writeRPCError(w, r.status, id, e)
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, e *jsonrpcError) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpcError   `json:"error"`
	}{"2.0", id, e}
	b, err := marshalText(resp)
	if err != nil {
		resp.ID = json.RawMessage("null")
		b, _ = marshalText(resp)
	}
	w.Header().Set("Content-Type", "application/json")
	// Its own length, not one the SDK set for what it wrote; known, so
	// the answer is never chunked, not even when flushed at once.
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// sanitizer holds the SDK's answer to one request and rewrites it before it
// leaves. The SDK's own error messages may quote the request (a method name, a
// params object), so every JSON-RPC error it wrote gets a fixed message and the
// error.data of docs/DESIGN.md, "refserver wire contract", and every other
// refusal it wrote (plain-text transport errors) becomes such a JSON-RPC error.
// Errors this server made (error.data with a reason) keep their message: they
// never quote the request. The one part of a request that comes back is the
// JSON-RPC id, as the protocol requires. The stateless JSON-response handler
// answers each POST with one body, so holding it costs nothing.
type sanitizer struct {
	http.ResponseWriter
	id     json.RawMessage // the request's, for a refusal the SDK wrote in plain text
	ci     *callInfo
	status int
	buf    bytes.Buffer
}

func (sw *sanitizer) WriteHeader(code int) {
	if sw.status == 0 {
		sw.status = code
	}
}

func (sw *sanitizer) Write(p []byte) (int, error) {
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	return sw.buf.Write(p)
}

// Flush is a no-op: the answer leaves whole in finish.
func (sw *sanitizer) Flush() {}

// finish writes the answer; key, when set, goes into error.data.
func (sw *sanitizer) finish(key string) {
	w := sw.ResponseWriter
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	body := sw.buf.Bytes()
	isJSON := strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") && gjson.ValidBytes(body)
	if sp := sw.splice(); sp != nil {
		// The tool's result, whose receipt and body the SDK never saw:
		// the checks read only the rest, and the parts written in are
		// valid JSON values in place of JSON strings, which changes
		// neither the answer's validity nor its top-level members.
		written, broken := sp.Write(w, status, body, status < 400 && isJSON && !hasError(body))
		if written {
			return
		}
		if broken {
			// A placeholder where it does not belong, or in an error: the
			// answer is never sent with one in it.
			sw.internalError(key)
			return
		}
		// No token: an answer the SDK made without the result.
	}
	if status < 400 && (len(body) == 0 || isJSON && !hasError(body)) {
		// Every answer a tool gives leaves here: checked by one scan
		// that decodes nothing (the result may be large). Its length is
		// known, so it is not chunked.
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		w.Write(body)
		return
	}
	var resp struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code int64           `json:"code"`
			Msg  string          `json:"message"`
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	isJSON = isJSON && json.Unmarshal(body, &resp) == nil
	switch {
	case status < 400 && (len(body) == 0 || isJSON && resp.Error == nil):
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		w.Write(body)
	case isJSON && resp.Error != nil:
		var d ErrorData
		e := &jsonrpcError{Code: resp.Error.Code, Message: resp.Error.Msg}
		var supported []string
		if strictjson.Decode(resp.Error.Data, &d) != nil || d.Reason == "" {
			d = ErrorData{Reason: sdkReason(e.Code), Status: sdkStatus(e.Code)}
			e.Message = sdkMessage(e.Code)
			if e.Code == codeUnsupportedVersion {
				supported = servedVersions(resp.Error.Data)
			}
		}
		if key != "" {
			d.IdempotencyKey = key
		}
		if d.RetryAfterMS != nil && (d.Reason == "quota_exceeded" || d.Reason == "store_full" || d.Reason == "vendor_unreachable" || d.Reason == "outcome_unknown") {
			w.Header().Set("Retry-After", retryAfterHeader(*d.RetryAfterMS))
		}
		e.Data, _ = json.Marshal(d)
		if supported != nil {
			// What the client negotiates from: the SDK's list, without
			// the requested version it quotes.
			e.Data, _ = sjson.SetBytes(e.Data, "supported", supported)
		}
		id := resp.ID
		if !validID(id) {
			id = sw.id
		}
		writeRPCError(w, status, id, e)
	default:
		// A transport refusal in plain text, or anything else the SDK
		// wrote with an error status: a fixed JSON-RPC error instead.
		if status < 400 {
			status = http.StatusInternalServerError
		}
		d := ErrorData{Reason: "invalid_request", Status: status, IdempotencyKey: key}
		if status >= 500 {
			d.Reason = "internal"
		}
		data, _ := json.Marshal(d)
		writeRPCError(w, status, sw.id, &jsonrpcError{Code: codeInvalidRequest, Message: transportText(status, body), Data: data})
	}
}

// internalError answers HTTP 500, reason internal, with the request's id
// and key: what an answer that cannot be written whole becomes.
func (sw *sanitizer) internalError(key string) {
	data, _ := json.Marshal(ErrorData{Reason: "internal", Status: http.StatusInternalServerError, IdempotencyKey: key})
	writeRPCError(sw.ResponseWriter, http.StatusInternalServerError, sw.id, &jsonrpcError{Code: codeInternal, Message: sdkMessage(codeInternal), Data: data})
}

// transportText is the message of a refusal the MCP transport wrote in
// plain text: fixed text of ours that names the header to fix when the
// transport refused one (its own text is matched, never passed on), and
// the HTTP status otherwise.
func transportText(status int, body []byte) string {
	switch t := string(body); {
	case strings.HasPrefix(t, "Content-Type must"):
		return "the Content-Type header must be application/json (HTTP " + strconv.Itoa(status) + ")"
	case strings.HasPrefix(t, "Accept must"):
		return "the Accept header must list both application/json and text/event-stream (HTTP " + strconv.Itoa(status) + ")"
	}
	return "request refused by the MCP transport (HTTP " + strconv.Itoa(status) + ")"
}

// servedVersions reads the supported versions of the SDK's
// unsupported-version error data, keeping only versions the SDK speaks.
func servedVersions(data json.RawMessage) []string {
	vs := []string{}
	for _, v := range gjson.GetBytes(data, "supported").Array() {
		if slices.Contains(mcp.SupportedProtocolVersions(), v.Str) {
			vs = append(vs, v.Str)
		}
	}
	return vs
}

// hasError reports whether body is not one JSON object, or has a top-level
// member that encoding/json would decode as a non-null "error" (its names
// match case-insensitively there). It reads the members in place: an answer
// is never copied to be checked.
func hasError(body []byte) bool {
	var buf [8]strictjson.Member
	ms, err := strictjson.Members(buf[:0], body)
	if err != nil {
		// Not one object, or a repeated member: the careful path.
		return true
	}
	for _, m := range ms {
		if bytes.EqualFold(m.Name, []byte("error")) && string(m.Value) != "null" {
			return true
		}
	}
	return false
}

// sdkReason, sdkStatus and sdkMessage are what an SDK error with a JSON-RPC
// code becomes on the wire.
func sdkReason(code int64) string {
	switch code {
	case codeParseError, codeInvalidRequest, codeInvalidParams:
		return "invalid_request"
	case codeMethodNotFound:
		return "method_not_found"
	case codeHeaderMismatch, codeMissingClientCaps, codeUnsupportedVersion:
		return "invalid_request"
	}
	return "internal"
}

func sdkStatus(code int64) int {
	switch code {
	case codeParseError, codeInvalidRequest, codeInvalidParams,
		codeHeaderMismatch, codeMissingClientCaps, codeUnsupportedVersion:
		return http.StatusBadRequest
	case codeMethodNotFound:
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

func sdkMessage(code int64) string {
	switch code {
	case codeParseError:
		return "parse error"
	case codeInvalidRequest:
		return "invalid request"
	case codeMethodNotFound:
		return "method not found"
	case codeInvalidParams:
		return "invalid params"
	case codeInternal:
		return "internal error"
	case codeHeaderMismatch:
		return "header mismatch: send Mcp-Protocol-Version, Mcp-Method (and Mcp-Name for tools/call) matching the message and its _meta " + mcp.MetaKeyProtocolVersion
	case codeMissingClientCaps:
		return "missing required client capabilities"
	case codeUnsupportedVersion:
		return "unsupported protocol version: error.data.supported lists the versions served"
	}
	return "request failed"
}

// splice is the splice of the answer, nil when none.
func (sw *sanitizer) splice() *mcpdirect.Splice {
	if sw.ci == nil {
		return nil
	}
	return sw.ci.splice
}

// marshalText is json.Marshal without HTML escaping, and with the newline
// that ends an answer: a message such as "Bearer <key>" reads as written
// in every client, not as "Bearer \u003ckey\u003e".
func marshalText(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// sizeText writes n bytes as a person would: "1 MiB", "300 bytes".
func sizeText(n int) string {
	if n%(1<<20) == 0 {
		return strconv.Itoa(n>>20) + " MiB"
	}
	return strconv.Itoa(n) + " bytes"
}
