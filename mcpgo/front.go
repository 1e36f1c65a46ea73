package mcpgo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/callkey"
	"github.com/obol-gateway/obol/internal/strictjson"
	"github.com/obol-gateway/obol/mcpgateway"
)

// front reads each POST body once, strictly, before mcp-go does: what it
// refuses never reaches mcp-go, and a tools/call of a wrapped tool carries
// its key and raw arguments to the handler in the request's context.
type front struct {
	cfg   Config
	tools map[string]bool
	next  http.Handler
}

// envelope is what the front reads of a JSON-RPC message.
type envelope struct {
	id     json.RawMessage
	call   bool   // a tools/call
	name   string // its params.name
	args   json.RawMessage
	meta   []strictjson.Member // params._meta's members
	params []strictjson.Member
}

// errRefused is the front's refusal of a message.
type errRefused struct {
	reason string
	status int
	msg    string
}

func (e *errRefused) Error() string { return e.reason + ": " + e.msg }

func refused(reason string, status int, msg string) *errRefused {
	return &errRefused{reason: reason, status: status, msg: msg}
}

func (f *front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		f.next.ServeHTTP(w, r)
		return
	}
	ws, ok := f.cfg.Workspace(r)
	if !ok {
		writeError(w, nil, refused("unauthorized", http.StatusUnauthorized, "unknown caller"), "")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(f.cfg.MaxBodyBytes)))
	if err != nil {
		writeError(w, nil, refused("request_too_large", http.StatusRequestEntityTooLarge, "could not read the body whole"), "")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	env, rf := parse(body)
	if rf != nil {
		writeError(w, env.id, rf, "")
		return
	}
	key, src, err := resolveKey(r, env)
	if err != nil {
		writeError(w, env.id, refused("malformed_key", http.StatusBadRequest, err.Error()), "")
		return
	}
	if !env.call || !f.tools[env.name] {
		f.next.ServeHTTP(w, r)
		return
	}
	c := &call{workspace: ws, key: key, source: src, args: env.args}
	if t, ok := member(env.meta, callkey.MetaTicket); ok {
		if c.ticket, ok = callkey.Ticket(t); !ok {
			writeError(w, env.id, refused("invalid_request", http.StatusBadRequest, "_meta "+callkey.MetaTicket+" must be an apt_ ticket id"), key.String())
			return
		}
	}
	// A resume that sent only its ticket runs under the ticket's key,
	// which the answer names: a minted key never overrides a ticket.
	c.key, c.source, err = callkey.Resume(r.Context(), f.cfg.Orchestrator.Store, c.ticket, ws, key, src)
	if err != nil {
		writeError(w, env.id, refused("store_unavailable", http.StatusServiceUnavailable, "the approval ticket could not be read"), "")
		return
	}
	w.Header().Set(callkey.HeaderKey, c.key.String())
	f.next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callKey{}, c)))
}

// parse reads one JSON-RPC message with the core's strict rules: valid
// JSON, no member name twice anywhere (arguments included), one message
// per request, and the members a tools/call needs, of their types.
func parse(body []byte) (envelope, *errRefused) {
	var env envelope
	if err := strictjson.Check(body); err != nil {
		if errors.Is(err, strictjson.ErrRepeated) {
			return env, refused("invalid_request", http.StatusBadRequest, "a member name occurs twice")
		}
		return env, refused("invalid_request", http.StatusBadRequest, "the body is not one valid JSON value within the nesting limit")
	}
	msg, err := strictjson.Members(nil, body)
	if err != nil {
		return env, refused("invalid_request", http.StatusBadRequest, "one JSON-RPC message object per request")
	}
	env.id, _ = member(msg, "id")
	method, _ := member(msg, "method")
	env.call = string(method) == `"tools/call"`
	p, ok := member(msg, "params")
	if !ok || string(p) == "null" {
		if env.call {
			return env, refused("invalid_request", http.StatusBadRequest, "tools/call needs params")
		}
		return env, nil
	}
	if env.params, err = strictjson.Members(nil, p); err != nil {
		return env, refused("invalid_request", http.StatusBadRequest, "params must be a JSON object")
	}
	if m, ok := member(env.params, "_meta"); ok {
		if env.meta, err = strictjson.Members(nil, m); err != nil {
			return env, refused("invalid_request", http.StatusBadRequest, "_meta must be a JSON object")
		}
	}
	if !env.call {
		return env, nil
	}
	if n, ok := member(env.params, "name"); !ok || json.Unmarshal(n, &env.name) != nil || env.name == "" {
		return env, refused("invalid_request", http.StatusBadRequest, "name must be a tool name")
	}
	if a, ok := member(env.params, "arguments"); ok && string(a) != "null" {
		if a[0] != '{' {
			return env, refused("invalid_arguments", http.StatusBadRequest, "arguments must be a JSON object")
		}
		env.args = a
	}
	return env, nil
}

// resolveKey refuses a near miss of a name the key or the ticket is read
// under, then reads the key from the Idempotency-Key header or _meta
// (both may be sent when they are one key), minting one when neither is:
// the reading mcpgateway's front makes ([callkey.Key]).
func resolveKey(r *http.Request, env envelope) (idempotency.Key, idempotency.KeySource, error) {
	if err := callkey.NearMiss(env.params, env.meta); err != nil {
		return idempotency.Key{}, "", err
	}
	if err := callkey.NearMissHeader(r.Header, r.Trailer); err != nil {
		return idempotency.Key{}, "", err
	}
	raw, _ := member(env.meta, callkey.MetaKey)
	return callkey.Key(r.Header.Values(callkey.HeaderKey), raw)
}

// member returns the value of the member of ms named name.
func member(ms []strictjson.Member, name string) (json.RawMessage, bool) {
	for _, m := range ms {
		if string(m.Name) == name {
			return m.Value, true
		}
	}
	return nil, false
}

// writeError answers a refusal as mcpgateway does: a JSON-RPC error with
// the HTTP status, error.data an [mcpgateway.ErrorData].
func writeError(w http.ResponseWriter, id json.RawMessage, rf *errRefused, key string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	code := -32000 // mcpgateway's codes: of the message, of params, of the call
	switch rf.reason {
	case "invalid_request":
		code = -32600
	case "invalid_arguments":
		code = -32602
	}
	data, _ := json.Marshal(mcpgateway.ErrorData{Reason: rf.reason, Status: rf.status, IdempotencyKey: key})
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": rf.Error(), "data": json.RawMessage(data)}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rf.status)
	w.Write(b)
}
