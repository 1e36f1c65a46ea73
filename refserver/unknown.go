package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
)

// The operator's endpoints for unknown calls (docs/DESIGN.md, "refserver wire
// contract"): GET /v1/unknown?workspace=ID lists them, POST
// /v1/receipts/{key}/resolve?tool=NAME&workspace=ID settles one. Both need an
// approver key: a workspace's own key may not settle its calls.

var (
	errWorkspaceKey = refusal{reason: "forbidden", status: http.StatusForbidden, msg: "a workspace key cannot list or settle unknown calls; use an approver key"}
	errNoSettler    = refusal{reason: "not_implemented", status: http.StatusNotImplemented, msg: "the store cannot settle unknown calls"}
)

// approverOnly refuses a request without an approver key: 403 for a
// workspace key, 401 for anything else. It returns the approver's configured
// name, which is what a resolution records as "by": nothing derived from the
// key (a digest of a short key could be searched, and every replay of the
// call shows it to the workspace).
func (s *server) approverOnly(w http.ResponseWriter, r *http.Request) (string, bool) {
	if name, ok := s.approverName(r); ok {
		return name, true
	}
	if tok, ok := bearerToken(r.Header); ok {
		if _, ws := s.cfg.workspace(tok); ws {
			s.restRefuse(w, errWorkspaceKey)
			return "", false
		}
	}
	s.restRefuse(w, errNotApprover)
	return "", false
}

func (s *server) settler(w http.ResponseWriter) (idempotency.Settler, bool) {
	st, ok := s.store.(idempotency.Settler)
	if !ok {
		s.restRefuse(w, errNoSettler)
	}
	return st, ok
}

// knownWorkspace reports whether id is a configured workspace.
func (s *server) knownWorkspace(id string) bool {
	for _, ws := range s.cfg.workspaces {
		if ws == id {
			return true
		}
	}
	return false
}

func (s *server) workspaceParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	ws := r.URL.Query().Get("workspace")
	if !s.knownWorkspace(ws) {
		s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: "query parameter workspace must name a configured workspace"})
		return "", false
	}
	return ws, true
}

// unknownList is the answer of GET /v1/unknown: the receipts of the calls
// that are unknown now, and the cursor of the next page ("" at the end).
type unknownList struct {
	Unknown []listedReceipt `json:"unknown"`
	Cursor  string          `json:"cursor"`
}

// listedReceipt is a listed call's receipt and, while its attempt may still
// be running at its gateway (a lapsed lease before the attempt deadline),
// settle_after: when a resolve stops answering in_progress.
type listedReceipt struct {
	receipt.Receipt
	SettleAfter time.Time
}

func (l listedReceipt) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(l.Receipt)
	if err != nil || l.SettleAfter.IsZero() || len(b) < 2 {
		return b, err
	}
	at, _ := json.Marshal(l.SettleAfter.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	return append(append(append(b[:len(b)-1:len(b)-1], `,"settle_after":`...), at...), '}'), nil
}

// handleListUnknown lists a workspace's unknown calls, or without
// ?workspace= every configured workspace's (listFleet), a page at a time
// (?cursor=, ?limit= up to idempotency.MaxPageSize).
func (s *server) handleListUnknown(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.approverOnly(w, r); !ok {
		return
	}
	st, ok := s.settler(w)
	if !ok {
		return
	}
	q := r.URL.Query()
	ws := ""
	if q.Has("workspace") {
		if ws, ok = s.workspaceParam(w, r); !ok {
			return
		}
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > idempotency.MaxPageSize {
			s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest,
				msg: "query parameter limit must be 1 to " + strconv.Itoa(idempotency.MaxPageSize)})
			return
		}
		limit = n
	}
	var page idempotency.UnknownPage
	var err error
	if ws == "" {
		page, err = s.listFleet(r.Context(), st, q.Get("cursor"), limit)
	} else {
		page, err = st.ListUnknown(r.Context(), idempotency.ListRequest{Workspace: ws, Cursor: q.Get("cursor"), Limit: limit})
	}
	if err != nil {
		rf := s.classify(err)
		if rf.reason == "store_unavailable" {
			s.metrics.storeErrors.WithLabelValues("list").Inc()
		}
		if rf.reason == "invalid_request" {
			rf.msg = "malformed cursor"
		}
		s.restRefuse(w, rf)
		return
	}
	out := unknownList{Unknown: make([]listedReceipt, 0, len(page.Records)), Cursor: page.Cursor}
	for _, u := range page.Records {
		t := s.specFor(u.Scope.Tool, u.Record.Route.Fingerprint)
		if t == nil {
			continue // a tool no longer configured: its receipts endpoint cannot name it either
		}
		out.Unknown = append(out.Unknown, listedReceipt{u.Record.Receipt(u.Scope, false), u.SettleAfter})
	}
	writeJSON(w, http.StatusOK, out)
}

// resolveRequest is the body of a settle. AttemptCount is required: it is the
// attempt_count the operator saw in the listing, and the settle is a
// compare-and-set on it (docs/DESIGN.md, "The record and its lifecycle"), so a
// redispatch since the listing refuses the settle rather than settling an
// attempt the operator never checked.
type resolveRequest struct {
	Outcome      string `json:"outcome"`
	Note         string `json:"note"`
	AttemptCount *int   `json:"attempt_count"`
}

const resolveForm = `{"outcome": "accepted"|"definitely_rejected", "attempt_count": N, "note": "..."}`

// handleResolve settles one unknown call as accepted or
// definitely_rejected, and answers its receipt with the resolution. A
// note is scrubbed of every configured secret and key, and one holding a
// Unicode format character (bidi controls, zero-width characters, U+2028
// and U+2029) is refused: nothing is changed.
func (s *server) handleResolve(w http.ResponseWriter, r *http.Request) {
	by, ok := s.approverOnly(w, r)
	if !ok {
		return
	}
	st, ok := s.settler(w)
	if !ok {
		return
	}
	ws, ok := s.workspaceParam(w, r)
	if !ok {
		return
	}
	key, name, ok := s.keyAndTool(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBytes))
	if err != nil {
		s.restRefuse(w, refusal{reason: "request_too_large", status: http.StatusRequestEntityTooLarge, msg: "request body too large"})
		return
	}
	var req resolveRequest
	if err := decodeStrict(body, &req); err != nil {
		s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest,
			msg: "body must be " + resolveForm + ": " + err.Error()})
		return
	}
	outcome := effectspec.Outcome(req.Outcome)
	if outcome != effectspec.Accepted && outcome != effectspec.DefinitelyRejected {
		s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: `outcome must be "accepted" or "definitely_rejected"`})
		return
	}
	if req.AttemptCount == nil {
		s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest,
			msg: "attempt_count is required: the attempt_count of the call's receipt as listed, which the settle compares"})
		return
	}
	scope := idempotency.Scope{Workspace: ws, Tool: name}
	if t := s.cfg.Tools[name]; t != nil {
		scope.Connection = t.Connection
	}
	// A note never carries a known secret (a connection's, a broker's, an
	// API key, an approver key) into a record or a receipt.
	note := s.redact.String(req.Note)
	rec, err := st.Settle(r.Context(), idempotency.SettleRequest{Scope: scope, Key: key, Attempts: *req.AttemptCount,
		Outcome: outcome, By: by, Note: note, OpID: idempotency.NewOpID()})
	if err != nil {
		s.resolveRefuse(w, err)
		return
	}
	s.metrics.settlements.WithLabelValues(string(outcome)).Inc()
	s.log.Info("unknown call settled", "workspace", ws, "tool", name, "key", key.String(), "outcome", string(outcome), "by", by)
	writeJSON(w, http.StatusOK, rec.Receipt(scope, false))
}

// resolveBusy is the refusal of a settle whose call's attempt may still be
// running: retry_after_ms until it stops.
type resolveBusy struct {
	restError
	RetryAfterMS int64 `json:"retry_after_ms"`
}

func (s *server) resolveRefuse(w http.ResponseWriter, err error) {
	var rf refusal
	var running *idempotency.AttemptRunningError
	switch {
	case errors.As(err, &running):
		// Its gateway may still finalize it: an operator who asks the vendor
		// now may hear of a request the vendor has not processed yet.
		rf = refusal{reason: "in_progress", status: http.StatusConflict,
			msg: "the call's attempt may still be running until its deadline; retry after retry_after_ms"}
		s.metrics.refusals.WithLabelValues(rf.reason).Inc()
		writeJSON(w, rf.status, resolveBusy{restError{rf.reason, rf.status, rf.msg}, max(running.RetryAfter.Milliseconds(), 1)})
		return
	case errors.Is(err, idempotency.ErrStale):
		// Here a redispatch since the listing, not a lost lease.
		rf = refusal{reason: "stale", status: http.StatusConflict, msg: "the call had another attempt since its attempt_count was read"}
	default:
		rf = s.classify(err)
		switch rf.reason {
		case "not_found":
			rf.msg = "no call with this key for this tool in this workspace"
		case "not_unknown":
			rf.msg = "the call is not unknown: only an unknown call can be settled"
		case "store_unavailable":
			s.metrics.storeErrors.WithLabelValues("settle").Inc()
		}
	}
	s.restRefuse(w, rf)
}

// listFleet lists the unknown calls of every configured workspace, in
// configuration order, from each workspace's unknown index (never a SCAN
// of records). Its cursor is "f<workspace position>:<that workspace's
// cursor>". A page stops at a workspace boundary once half the store bound
// is spent, so that a fleet of many workspaces answers in time, a page at a
// time.
func (s *server) listFleet(ctx context.Context, st idempotency.Settler, cursor string, limit int) (idempotency.UnknownPage, error) {
	start := time.Now()
	if limit <= 0 || limit > idempotency.MaxPageSize {
		limit = idempotency.MaxPageSize
	}
	i, inner, err := fleetCursor(cursor, len(s.cfg.Workspaces))
	if err != nil {
		return idempotency.UnknownPage{}, err
	}
	var out idempotency.UnknownPage
	for ; i < len(s.cfg.Workspaces); i, inner = i+1, "" {
		page, err := st.ListUnknown(ctx, idempotency.ListRequest{Workspace: s.cfg.Workspaces[i], Cursor: inner, Limit: limit - len(out.Records)})
		if err != nil {
			return idempotency.UnknownPage{}, err
		}
		out.Records = append(out.Records, page.Records...)
		if page.Cursor != "" {
			out.Cursor = "f" + strconv.Itoa(i) + ":" + page.Cursor
			return out, nil
		}
		if i+1 < len(s.cfg.Workspaces) && (len(out.Records) >= limit || time.Since(start) > s.storeTimeout/2) {
			out.Cursor = "f" + strconv.Itoa(i+1) + ":"
			return out, nil
		}
	}
	return out, nil
}
