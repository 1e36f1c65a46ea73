package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/tidwall/gjson"

	"github.com/obol-gateway/obol/idempotency"
)

type jsonrpcError = jsonrpc.Error

// callInfo is what the front of POST /mcp resolved for one HTTP request:
// the caller's workspace and the effective idempotency key.
type callInfo struct {
	workspace string
	key       idempotency.Key
	source    idempotency.KeySource
}

type callInfoKey struct{}

// tokenExtraCall is the auth.TokenInfo.Extra entry that carries *callInfo to
// the tool handler.
const tokenExtraCall = "dev.obol/call"

// bearerToken returns the token of the one Authorization header field, if it
// is "Bearer <token>".
func bearerToken(h http.Header) (string, bool) {
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

// peek is what the front reads from a JSON-RPC body without decoding it.
type peek struct {
	calls  int             // tools/call requests in the body (a batch may hold several)
	id     json.RawMessage // the id of the (first) tools/call, or of the request
	ticket gjson.Result    // params._meta["dev.obol/approval-ticket"] of the tools/call
}

var ticketPath = "params._meta." + gjson.Escape(metaTicket)

func peekBody(body []byte) peek {
	var p peek
	root := gjson.ParseBytes(body)
	visit := func(msg gjson.Result) {
		if msg.Get("method").String() != "tools/call" {
			return
		}
		p.calls++
		if p.calls == 1 {
			p.id = json.RawMessage(msg.Get("id").Raw)
			p.ticket = msg.Get(ticketPath)
		}
	}
	if root.IsArray() {
		root.ForEach(func(_, v gjson.Result) bool { visit(v); return true })
	} else {
		visit(root)
		if p.calls == 0 {
			p.id = json.RawMessage(root.Get("id").Raw)
		}
	}
	return p
}

// mcpFront is the thin wrapper in front of the SDK: it authenticates the
// caller, resolves the effective Idempotency-Key, sets it on the response,
// and refuses what the SDK must never see. A refusal here touches no store
// state (the one read it may make is the ticket lookup of a resume).
func (s *server) mcpFront(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := bearerToken(r.Header)
		ws := ""
		if ok {
			ws, ok = s.cfg.workspace(tok)
		}
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="obol"`)
			s.frontRefuse(w, nil, refusal{"unauthorized", http.StatusUnauthorized, "missing or unknown API key (Authorization: Bearer <key>)"}, "")
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r) // the stateless SDK handler answers 405
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				s.frontRefuse(w, nil, refusal{"request_too_large", http.StatusRequestEntityTooLarge, "request body larger than 1 MiB"}, "")
				return
			}
			s.frontRefuse(w, nil, refusal{"invalid_request", http.StatusBadRequest, "could not read the request body"}, "")
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		p := peekBody(body)

		key, src, err := idempotency.FromHeader(r.Header.Values(headerKey))
		if err != nil {
			s.frontRefuse(w, p.id, s.classify(err), "")
			return
		}
		if p.calls > 1 {
			// One header cannot key several calls.
			s.frontRefuse(w, p.id, refusal{"invalid_request", http.StatusBadRequest, "a batch may hold at most one tools/call"}, "")
			return
		}
		if p.calls == 1 {
			if src == idempotency.KeyMinted && p.ticket.Type == gjson.String && idempotency.ValidTicketID(p.ticket.Str) {
				// A resume without a key uses the ticket's key: a freshly
				// minted key never overrides a ticket.
				t, err := s.store.Ticket(r.Context(), p.ticket.Str)
				switch {
				case err == nil && t.Scope.Workspace == ws:
					key = t.Key
				case errors.Is(err, idempotency.ErrStoreUnavailable):
					s.metrics.storeErrors.WithLabelValues("ticket").Inc()
					s.frontRefuse(w, p.id, s.classify(err), "")
					return
				}
				// Not found, or another workspace's: the handler refuses it.
			}
			w.Header().Set(headerKey, key.String())
		}
		ctx := context.WithValue(r.Context(), callInfoKey{}, &callInfo{workspace: ws, key: key, source: src})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// frontRefuse writes a JSON-RPC error response with an HTTP status.
func (s *server) frontRefuse(w http.ResponseWriter, id json.RawMessage, r refusal, key string) {
	s.metrics.refusals.WithLabelValues(r.reason).Inc()
	if len(id) == 0 || !json.Valid(id) {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *jsonrpcError   `json:"error"`
	}{"2.0", id, rpcError(r, key)}
	b, _ := json.Marshal(resp)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(r.status)
	w.Write(append(b, '\n'))
}
