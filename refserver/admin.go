package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// restError is the body of every refused /v1 request.
type restError struct {
	Reason  string `json:"reason"`
	Status  int    `json:"status"`
	Message string `json:"message"`
}

func (s *server) restRefuse(w http.ResponseWriter, r refusal) {
	s.metrics.refusals.WithLabelValues(r.reason).Inc()
	if r.detail != "" && r.status >= http.StatusInternalServerError {
		// The caller reads r.msg, fixed text; the cause is for the log.
		s.log.Warn("admin request failed", "reason", r.reason, "error", r.detail)
	}
	if r.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="obol"`)
	}
	writeJSON(w, r.status, restError{r.reason, r.status, r.msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshalText(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"reason":"internal","status":500,"message":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}

// marshalText is json.Marshal without HTML escaping, and with the newline
// that ends an answer: a message such as "Bearer <key>" reads as written
// in every client, not as "Bearer \u003ckey\u003e". An answer is never
// embedded in HTML.
func marshalText(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

var errNotApprover = refusal{reason: "unauthorized", status: http.StatusUnauthorized, msg: "missing or unknown approver key (Authorization: Bearer <approver key>)"}

// approverName returns the configured name of the request's approver key.
func (s *server) approverName(r *http.Request) (string, bool) {
	tok, ok := bearerToken(r.Header)
	if !ok {
		return "", false
	}
	return s.cfg.approver(tok)
}

// ticketView is the answer of the approval endpoints.
type ticketView struct {
	Ticket         string `json:"ticket"`
	Status         string `json:"status"`
	Workspace      string `json:"workspace"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotency_key"`
}

// handleDecide approves or denies a held call. The first decision is final;
// repeating it answers the ticket again.
func (s *server) handleDecide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		by, ok := s.approverName(r)
		if !ok {
			s.restRefuse(w, errNotApprover)
			return
		}
		id := r.PathValue("ticket")
		if !idempotency.ValidTicketID(id) {
			s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: "not an apt_ ticket id"})
			return
		}
		t, err := s.store.Decide(r.Context(), idempotency.DecideRequest{Ticket: id, Approve: approve, OpID: idempotency.NewOpID()})
		if err != nil {
			rf := s.classify(err)
			if errors.Is(err, idempotency.ErrStale) {
				rf = refusal{reason: "already_decided", status: http.StatusConflict, msg: "the ticket was already decided the other way"}
			}
			if rf.reason == "store_unavailable" {
				s.metrics.storeErrors.WithLabelValues("decide").Inc()
			}
			s.log.Info("approval refused", "ticket", id, "approve", approve, "by", by, "reason", rf.reason)
			s.restRefuse(w, rf)
			return
		}
		// The ticket records the decision, not who made it: the approver's
		// name is in this line only.
		s.log.Info("approval decided", "ticket", id, "status", string(t.Status), "workspace", t.Scope.Workspace, "tool", t.Scope.Tool, "by", by)
		writeJSON(w, http.StatusOK, ticketView{Ticket: t.ID, Status: string(t.Status), Workspace: t.Scope.Workspace,
			Tool: t.Scope.Tool, IdempotencyKey: t.Key.String()})
	}
}

// handleReceipt answers the receipt of a key in the caller's workspace.
// Another workspace's key is simply not found: scopes never cross.
func (s *server) handleReceipt(w http.ResponseWriter, r *http.Request) {
	tok, ok := bearerToken(r.Header)
	ws := ""
	if ok {
		ws, ok = s.cfg.workspace(tok)
	}
	if !ok {
		s.restRefuse(w, refusal{reason: "unauthorized", status: http.StatusUnauthorized, msg: "missing or unknown API key (Authorization: Bearer <key>)"})
		return
	}
	key, name, ok := s.keyAndTool(w, r)
	if !ok {
		return
	}
	scope := idempotency.Scope{Workspace: ws, Tool: name}
	if t := s.cfg.Tools[name]; t != nil {
		scope.Connection = t.Connection
	}
	rec, err := s.store.Lookup(r.Context(), scope, key)
	if err != nil {
		rf := s.classify(err)
		switch rf.reason {
		case "not_found":
			rf.msg = "no call with this key for this tool in your workspace"
		case "store_unavailable":
			s.metrics.storeErrors.WithLabelValues("lookup").Inc()
		}
		s.restRefuse(w, rf)
		return
	}
	writeJSON(w, http.StatusOK, rec.Receipt(scope, false))
}

// specFor finds the tool a record was dispatched to: the tool itself, or for
// a capability the provider whose route has the record's fingerprint (the
// pinned one when none matches, e.g. a held call).
func (s *server) specFor(name, fingerprint string) *tool {
	if t := s.cfg.Tools[name]; t != nil {
		return t
	}
	c := s.cfg.Capabilities[name]
	for _, p := range c.Providers {
		if t := s.cfg.Tools[p]; t.Route.Fingerprint() == fingerprint {
			return t
		}
	}
	return s.cfg.Tools[s.pin(name)]
}

type pinRequest struct {
	Provider string `json:"provider"`
}

type pinView struct {
	Capability string `json:"capability"`
	Pin        string `json:"pin"`
	Previous   string `json:"previous"`
}

// handlePin moves a capability to another provider, in the store, so every
// gateway routes new keys there. Keys claimed before the change keep their
// route: a completed call (accepted, definitely_rejected) replays with its
// original route; only an unknown one (or one whose attempt never left)
// whose route now differs is a destination_conflict, never a redispatch
// to the new provider (docs/DESIGN.md, "Scope and the Redis key").
func (s *server) handlePin(w http.ResponseWriter, r *http.Request) {
	by, ok := s.approverName(r)
	if !ok {
		s.restRefuse(w, errNotApprover)
		return
	}
	name := r.PathValue("name")
	c := s.cfg.Capabilities[name]
	if c == nil {
		s.restRefuse(w, refusal{reason: "unknown_tool", status: http.StatusNotFound, msg: "no capability named " + quoteName(name)})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBytes))
	if err != nil {
		s.restRefuse(w, refusal{reason: "request_too_large", status: http.StatusRequestEntityTooLarge, msg: "request body too large"})
		return
	}
	var req pinRequest
	if err := decodeStrict(body, &req); err != nil {
		s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: `body must be {"provider": "tool.name"}: ` + err.Error()})
		return
	}
	found := false
	for _, p := range c.Providers {
		found = found || p == req.Provider
	}
	if !found {
		s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: "provider must be one of the capability's providers"})
		return
	}
	// The store first: a pin that only this process knew would route new
	// calls here differently from the other gateways.
	prev := s.pin(name)
	if s.pinned != nil {
		stored, err := s.pinned.SetPin(r.Context(), name, req.Provider)
		if err != nil {
			rf := s.classify(err)
			if rf.reason == "store_unavailable" {
				s.metrics.storeErrors.WithLabelValues("setpin").Inc()
			}
			s.log.Warn("capability pin not stored", "capability", name, "error", rf.logText())
			s.restRefuse(w, rf)
			return
		}
		prev = stored
		if prev == "" {
			prev = c.Pin // nothing stored: the configured pin was in effect
		}
	}
	s.setLocalPin(name, req.Provider)
	s.log.Info("capability pinned", "capability", name, "pin", req.Provider, "previous", prev, "by", by)
	writeJSON(w, http.StatusOK, pinView{Capability: name, Pin: req.Provider, Previous: prev})
}

// bounded runs h with its request's context ended after storeTimeout, so
// each store call it makes (a Decide, a SetPin, a Lookup) fails with
// store_unavailable when Redis does not answer in time. A write that timed
// out may still have been applied: each admin write is safe to repeat.
func (s *server) bounded(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.storeTimeout)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// handleHealth reads one ticket that cannot exist: not found means the
// store answers.
func (s *server) handleHealth(w http.ResponseWriter, r *http.Request) {
	body := map[string]string{"status": "ok"}
	if s.durability != "" {
		body["durability"] = s.durability
	}
	var err error
	if s.health != nil {
		err = s.health(r.Context())
	} else if _, err = s.store.Ticket(r.Context(), "apt_00000000000000000000000000000000"); errors.Is(err, idempotency.ErrNotFound) {
		err = nil
	}
	if err != nil {
		s.metrics.storeErrors.WithLabelValues("health").Inc()
		reason := "unreachable"
		var ue *redisstore.UnhealthyError
		if errors.As(err, &ue) {
			reason = ue.Reason
		}
		body["status"], body["reason"] = "unavailable", reason
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// keyAndTool reads the {key} path segment and the tool query parameter of a
// receipt endpoint, answering the refusal itself when either is bad.
func (s *server) keyAndTool(w http.ResponseWriter, r *http.Request) (idempotency.Key, string, bool) {
	key, err := idempotency.ParseKey(r.PathValue("key"))
	if err != nil {
		s.restRefuse(w, s.classify(err))
		return idempotency.Key{}, "", false
	}
	name := r.URL.Query().Get("tool")
	if !s.known(name) {
		s.restRefuse(w, refusal{reason: "unknown_tool", status: http.StatusNotFound, msg: "query parameter tool must name a configured tool"})
		return idempotency.Key{}, "", false
	}
	return key, name, true
}
