package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/ident"
	"github.com/obol-gateway/obol/internal/strictjson"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/receipt"
)

// Config configures the handler of [New]. Store and Approver are required; every
// other zero field has the default its comment names.
type Config struct {
	// Store decides tickets and answers receipts. The endpoints of a store's
	// optional part are served when it has the part (an
	// [idempotency.Settler], [idempotency.PendingLister],
	// [idempotency.ScopeAdvancer], [idempotency.DataLossWatcher] or
	// [idempotency.HealthChecker]; redisstore's Store has every one), and
	// refused otherwise (501 not_implemented; 400 for the data-loss one).
	Store idempotency.Store
	// Approver names the approver whose key token is.
	Approver func(token string) (name string, ok bool)
	// Workspace names the workspace whose API key token is. If nil, no
	// workspace key is known (receipts answer 401).
	Workspace func(token string) (workspace string, ok bool)
	// Workspaces are the configured workspaces, in order: the ones a
	// ?workspace= may name, and the fleet listings' order.
	Workspaces []string
	// Scope is the scope of a call to name (a tool or a capability) in
	// workspace; ok false when no such name is configured. If nil, no name
	// is (receipt and settle answer 404 unknown_tool).
	Scope func(workspace, name string) (scope idempotency.Scope, ok bool)
	// Providers are a capability's providers; ok false when no capability
	// has the name (404 unknown_tool). If nil, none has.
	Providers func(capability string) (providers []string, ok bool)
	// SetPin moves a capability to provider where every gateway sees it,
	// and returns the pin in effect before. If nil, pins answer 501.
	SetPin func(ctx context.Context, capability, provider string) (previous string, err error)
	// Classify maps a store error to its refusal, as the MCP endpoint does
	// ([mcpgateway.Gateway.Classify]). If nil, an error maps by
	// [idempotency.Reason] with fixed text, else to 503 store_unavailable.
	Classify func(error) mcpgateway.Refusal
	// Redact scrubs secrets from log lines and settle notes. A note is
	// typed by a person, who may retype a key in another case: give it a
	// redactor that matches up to case ([receipt.Redactor.StringFold]).
	// If nil, nothing is scrubbed.
	Redact func(string) string
	// Logger receives a line per decision, pin, settle, advance and
	// acknowledgement, naming the approver. If nil, nothing is logged.
	Logger *slog.Logger
	// OnRefusal, OnStoreError and OnSettle count refusals by reason,
	// store errors by operation and settles by outcome. If nil, nothing.
	OnRefusal    func(reason string)
	OnStoreError func(op string)
	OnSettle     func(outcome effectspec.Outcome)
	// Import reads the tools of the gateway's upstream MCP servers again
	// ([mcpgateway.Gateway.Import]): POST /v1/tools/import. If nil, it
	// answers 501.
	Import func(ctx context.Context) error
	// StoreTimeout bounds the store calls of each request but an advance
	// and an import. If 0, 2s.
	StoreTimeout time.Duration
	// AdvanceTimeout bounds an advance, which counts every record. If 0,
	// 20s.
	AdvanceTimeout time.Duration
	// Durability is what /healthz reports of the store's persistence
	// (redisstore.Description.Durability, say); "" reports none.
	Durability string
}

// Default bounds of a [Config].
const (
	defaultStoreTimeout   = 2 * time.Second
	defaultAdvanceTimeout = 20 * time.Second
)

// importTimeout bounds an import: every upstream's tools/list.
const importTimeout = 30 * time.Second

// maxBodyBytes bounds a request body.
const maxBodyBytes = 64 << 10

// handler serves the admin API of [New].
type handler struct {
	cfg Config
	mux *http.ServeMux
}

// New returns the handler of cfg, which serves the admin API (the /v1
// endpoints and GET /healthz; any other path is 404), or an error wrapping
// [ErrInvalidConfig].
func New(cfg Config) (http.Handler, error) {
	if cfg.Store == nil || cfg.Approver == nil {
		return nil, fmt.Errorf("%w: Store and Approver are required", ErrInvalidConfig)
	}
	if cfg.Workspace == nil {
		cfg.Workspace = func(string) (string, bool) { return "", false }
	}
	if cfg.Scope == nil {
		cfg.Scope = func(string, string) (idempotency.Scope, bool) { return idempotency.Scope{}, false }
	}
	if cfg.Providers == nil {
		cfg.Providers = func(string) ([]string, bool) { return nil, false }
	}
	if cfg.Redact == nil {
		cfg.Redact = func(s string) string { return s }
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	for _, f := range []*func(string){&cfg.OnRefusal, &cfg.OnStoreError} {
		if *f == nil {
			*f = func(string) {}
		}
	}
	if cfg.OnSettle == nil {
		cfg.OnSettle = func(effectspec.Outcome) {}
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = defaultStoreTimeout
	}
	if cfg.AdvanceTimeout <= 0 {
		cfg.AdvanceTimeout = defaultAdvanceTimeout
	}
	h := &handler{cfg: cfg, mux: http.NewServeMux()}
	if h.cfg.Classify == nil {
		h.cfg.Classify = h.classify
	}
	// Every endpoint runs under the store bound: a Redis that is down
	// answers 503 store_unavailable in time, never a request that hangs.
	// A write that timed out may still have been applied: each is safe to
	// repeat.
	for pattern, f := range map[string]http.HandlerFunc{
		"POST /v1/approvals/{ticket}/approve":  h.decide(true),
		"POST /v1/approvals/{ticket}/deny":     h.decide(false),
		"GET /v1/approvals":                    h.listApprovals,
		"GET /v1/receipts/{key}":               h.receipt,
		"POST /v1/capabilities/{name}/pin":     h.pin,
		"GET /v1/unknown":                      h.listUnknown,
		"POST /v1/receipts/{key}/resolve":      h.resolve,
		"POST /v1/store/acknowledge-data-loss": h.acknowledge,
		"GET /healthz":                         h.health,
	} {
		h.mux.Handle(pattern, bounded(cfg.StoreTimeout, f))
	}
	h.mux.Handle("POST /v1/scope-version/advance", bounded(cfg.AdvanceTimeout, h.advance))
	h.mux.Handle("POST /v1/tools/import", bounded(importTimeout, h.importTools))
	return h, nil
}

// ServeHTTP serves the API's paths; any other path is 404.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

func bounded(d time.Duration, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h(w, r.WithContext(ctx))
	})
}

// refusal is a refused request; detail is the error's redacted text, for
// the log only.
type refusal struct {
	Error
	detail string
}

func refuse(reason string, status int, msg string) refusal {
	return refusal{Error: Error{Reason: reason, Status: status, Message: msg}}
}

var (
	errNotApprover  = refuse("unauthorized", http.StatusUnauthorized, "missing or unknown approver key (Authorization: Bearer <approver key>)")
	errWorkspaceKey = refuse("forbidden", http.StatusForbidden, "a workspace key cannot list or settle unknown calls; use an approver key")
	errTooLarge     = refuse("request_too_large", http.StatusRequestEntityTooLarge, "request body too large")
	errBadLimit     = refuse("invalid_request", http.StatusBadRequest, "query parameter limit must be 1 to "+strconv.Itoa(idempotency.MaxPageSize))
)

func (h *handler) refuse(w http.ResponseWriter, r refusal) {
	h.cfg.OnRefusal(r.Reason)
	if r.detail != "" && r.Status >= http.StatusInternalServerError {
		// The caller reads the message, fixed text; the cause is for the log.
		h.cfg.Logger.Warn("admin request failed", "reason", r.Reason, "error", r.detail)
	}
	if r.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="obol"`)
	}
	writeJSON(w, r.Status, r.Error)
}

// storeRefusal is the refusal of a store error of op, counted as a store
// error when the store was unavailable.
func (h *handler) storeRefusal(op string, err error) refusal {
	c := h.cfg.Classify(err)
	rf := refusal{Error: Error{Reason: c.Reason, Status: c.Status, Message: c.Message, SafeNewKey: c.SafeNewKey,
		RetryAfterMS: c.RetryAfter.Milliseconds()}, detail: c.Detail}
	if rf.Reason == "store_unavailable" {
		h.cfg.OnStoreError(op)
	}
	return rf
}

func (rf refusal) logText() string {
	if rf.detail != "" {
		return rf.detail
	}
	return rf.Message
}

// classify is the default [Config.Classify]: fixed text, the error's own
// (redacted) for the log only.
func (h *handler) classify(err error) mcpgateway.Refusal {
	detail := h.cfg.Redact(err.Error())
	if reason, status := idempotency.Reason(err); reason != "" {
		return mcpgateway.Refusal{Reason: reason, Status: status, Message: strings.ReplaceAll(reason, "_", " "), Detail: detail}
	}
	return mcpgateway.Refusal{Reason: "store_unavailable", Status: http.StatusServiceUnavailable,
		Message: "the store is unavailable; retry later", Detail: detail, SafeNewKey: receipt.Safe(false)}
}

// writeJSON writes v without HTML escaping, ending in a newline: a message
// such as "Bearer <key>" reads as written in every client. An answer is
// never embedded in HTML.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		buf.Reset()
		status = http.StatusInternalServerError
		buf.WriteString(`{"reason":"internal","status":500,"message":"encoding failed"}` + "\n")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// body reads a request body into v with the strict decoder (no repeated or
// case-variant member, no unknown field; its error names a field, never a
// value). An empty body is an error unless optional.
func (h *handler) body(w http.ResponseWriter, r *http.Request, v any, form string, optional bool) bool {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		h.refuse(w, errTooLarge)
		return false
	}
	if optional && len(b) == 0 {
		return true
	}
	if err := strictjson.Decode(b, v); err != nil {
		h.refuse(w, refuse("invalid_request", http.StatusBadRequest,
			"body must be "+form+": "+strings.TrimPrefix(err.Error(), "strictjson: ")))
		return false
	}
	return true
}

// approver returns the configured name of the request's approver key,
// which is what a decision logs and a settle records as "by": nothing
// derived from the key. Without one it refuses: 403 for a workspace key
// when workspaceForbidden, else 401.
func (h *handler) approver(w http.ResponseWriter, r *http.Request, workspaceForbidden bool) (string, bool) {
	tok, ok := mcpgateway.BearerToken(r.Header)
	if ok {
		if name, ok := h.cfg.Approver(tok); ok {
			return name, true
		}
		if _, ws := h.cfg.Workspace(tok); ws && workspaceForbidden {
			h.refuse(w, errWorkspaceKey)
			return "", false
		}
	}
	h.refuse(w, errNotApprover)
	return "", false
}

// part returns the request's approver and the store's part P; without
// either it refuses the request (missing when the store lacks P).
func part[P any](h *handler, w http.ResponseWriter, r *http.Request, workspaceForbidden bool, missing refusal) (P, string, bool) {
	var p P
	by, ok := h.approver(w, r, workspaceForbidden)
	if !ok {
		return p, "", false
	}
	if p, ok = h.cfg.Store.(P); !ok {
		h.refuse(w, missing)
	}
	return p, by, ok
}

// workspaces are the workspaces a listing covers: the one ?workspace=
// names, else every configured one.
func (h *handler) workspaces(w http.ResponseWriter, r *http.Request) ([]string, bool) {
	if !r.URL.Query().Has("workspace") {
		return h.cfg.Workspaces, true
	}
	ws, ok := h.workspaceParam(w, r)
	return []string{ws}, ok
}

// workspaceParam reads ?workspace=, which must name a configured workspace.
func (h *handler) workspaceParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	ws := r.URL.Query().Get("workspace")
	for _, id := range h.cfg.Workspaces {
		if id == ws {
			return ws, true
		}
	}
	h.refuse(w, refuse("invalid_request", http.StatusBadRequest, "query parameter workspace must name a configured workspace"))
	return "", false
}

// limitParam reads ?limit=, 1 to [idempotency.MaxPageSize] (def when absent).
func (h *handler) limitParam(w http.ResponseWriter, r *http.Request, def int) (int, bool) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > idempotency.MaxPageSize {
		h.refuse(w, errBadLimit)
		return 0, false
	}
	return n, true
}

// keyAndTool reads the {key} path segment and the ?tool= of a receipt
// endpoint, and the call's scope in ws.
func (h *handler) keyAndTool(w http.ResponseWriter, r *http.Request, ws string) (idempotency.Key, idempotency.Scope, bool) {
	key, err := idempotency.ParseKey(r.PathValue("key"))
	if err != nil {
		h.refuse(w, h.storeRefusal("parse", err))
		return idempotency.Key{}, idempotency.Scope{}, false
	}
	scope, ok := h.cfg.Scope(ws, r.URL.Query().Get("tool"))
	if !ok {
		h.refuse(w, refuse("unknown_tool", http.StatusNotFound, "query parameter tool must name a configured tool"))
		return idempotency.Key{}, idempotency.Scope{}, false
	}
	return key, scope, true
}

// decide approves or denies a held call. The first decision is final;
// repeating it answers the ticket again.
func (h *handler) decide(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		by, ok := h.approver(w, r, false)
		if !ok {
			return
		}
		id := r.PathValue("ticket")
		if !idempotency.ValidTicketID(id) {
			h.refuse(w, refuse("invalid_request", http.StatusBadRequest, "not an apt_ ticket id"))
			return
		}
		t, err := h.cfg.Store.Decide(r.Context(), idempotency.DecideRequest{Ticket: id, Approve: approve, OpID: idempotency.NewOpID()})
		if err != nil {
			rf := h.storeRefusal("decide", err)
			if errors.Is(err, idempotency.ErrStale) {
				rf = refuse("already_decided", http.StatusConflict, "the ticket was already decided the other way")
			}
			h.cfg.Logger.Info("approval refused", "ticket", id, "approve", approve, "by", by, "reason", rf.Reason)
			h.refuse(w, rf)
			return
		}
		// The ticket records the decision, not who made it: the approver's
		// name is in this line only.
		h.cfg.Logger.Info("approval decided", "ticket", id, "status", string(t.Status), "workspace", t.Scope.Workspace, "tool", t.Scope.Tool, "by", by)
		writeJSON(w, http.StatusOK, Ticket{Ticket: t.ID, Status: string(t.Status), Workspace: t.Scope.Workspace,
			Tool: t.Scope.Tool, IdempotencyKey: t.Key.String()})
	}
}

// receipt answers the receipt of a key in the caller's workspace. Another
// workspace's key is simply not found: scopes never cross.
func (h *handler) receipt(w http.ResponseWriter, r *http.Request) {
	tok, ok := mcpgateway.BearerToken(r.Header)
	ws := ""
	if ok {
		ws, ok = h.cfg.Workspace(tok)
	}
	if !ok {
		h.refuse(w, refuse("unauthorized", http.StatusUnauthorized, "missing or unknown API key (Authorization: Bearer <key>)"))
		return
	}
	key, scope, ok := h.keyAndTool(w, r, ws)
	if !ok {
		return
	}
	rec, err := h.cfg.Store.Lookup(r.Context(), scope, key)
	if err != nil {
		rf := h.storeRefusal("lookup", err)
		if rf.Reason == "not_found" {
			rf.Message = "no call with this key for this tool in your workspace"
		}
		h.refuse(w, rf)
		return
	}
	writeJSON(w, http.StatusOK, rec.Receipt(scope, false))
}

// pin moves a capability to another provider, in the store, so every
// gateway routes new keys there. Keys claimed before keep their route
// (docs/DESIGN.md, "Scope and the Redis key").
func (h *handler) pin(w http.ResponseWriter, r *http.Request) {
	by, ok := h.approver(w, r, false)
	if !ok {
		return
	}
	name := r.PathValue("name")
	providers, ok := h.cfg.Providers(name)
	if !ok {
		h.refuse(w, refuse("unknown_tool", http.StatusNotFound, "no capability named "+quoteName(name)))
		return
	}
	var req pinRequest
	if !h.body(w, r, &req, `{"provider": "tool.name"}`, false) {
		return
	}
	found := false
	for _, p := range providers {
		found = found || p == req.Provider
	}
	if !found {
		h.refuse(w, refuse("invalid_request", http.StatusBadRequest, "provider must be one of the capability's providers"))
		return
	}
	if h.cfg.SetPin == nil {
		h.refuse(w, refuse("not_implemented", http.StatusNotImplemented, "the gateway cannot change pins"))
		return
	}
	prev, err := h.cfg.SetPin(r.Context(), name, req.Provider)
	if err != nil {
		rf := h.storeRefusal("setpin", err)
		h.cfg.Logger.Warn("capability pin not stored", "capability", name, "error", rf.logText())
		h.refuse(w, rf)
		return
	}
	h.cfg.Logger.Info("capability pinned", "capability", name, "pin", req.Provider, "previous", prev, "by", by)
	writeJSON(w, http.StatusOK, Pin{Capability: name, Pin: req.Provider, Previous: prev})
}

// quoteName is an identifier as written, anything else quoted and cut.
func quoteName(s string) string {
	if ident.Valid(s) {
		return s
	}
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}

// health proves the store can claim (an [idempotency.HealthChecker]), or reads one ticket
// that cannot exist: not found means the store answers.
func (h *handler) health(w http.ResponseWriter, r *http.Request) {
	body := map[string]string{"status": "ok"}
	if h.cfg.Durability != "" {
		body["durability"] = h.cfg.Durability
	}
	var err error
	if hs, ok := h.cfg.Store.(idempotency.HealthChecker); ok {
		err = hs.Health(r.Context())
	} else if _, err = h.cfg.Store.Ticket(r.Context(), "apt_00000000000000000000000000000000"); errors.Is(err, idempotency.ErrNotFound) {
		err = nil
	}
	if err != nil {
		h.cfg.OnStoreError("health")
		reason := "unreachable"
		var ue *idempotency.UnhealthyError
		if errors.As(err, &ue) {
			reason = ue.Reason
		}
		body["status"], body["reason"] = "unavailable", reason
		writeJSON(w, http.StatusServiceUnavailable, body)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

// dataLossWarning is what an acknowledgement of lost data logs and answers.
const dataLossWarning = "calls whose records were lost can be dispatched again; vendors with a binding " +
	"(header, body_pointer) deduplicate them only if the deployment id is unchanged (deployment_id in the config)"

// acknowledge is an operator's acknowledgement that Redis lost data: every
// gateway of the fleet claims again at its next reading.
func (h *handler) acknowledge(w http.ResponseWriter, r *http.Request) {
	st, by, ok := part[idempotency.DataLossWatcher](h, w, r, false,
		refuse("invalid_request", http.StatusBadRequest, "this store does not watch for lost data"))
	if !ok {
		return
	}
	ack, err := st.AcknowledgeDataLoss(r.Context())
	switch {
	case errors.Is(err, idempotency.ErrInvalidRequest):
		h.refuse(w, refuse("invalid_request", http.StatusBadRequest, "the store's data-loss check is off"))
	case err != nil:
		rf := h.storeRefusal("acknowledge", err)
		h.cfg.Logger.Warn("data loss not acknowledged", "by", by, "error", rf.logText())
		h.refuse(w, rf)
	case !ack.Acknowledged:
		h.cfg.Logger.Info("data loss acknowledgement: no loss is recorded", "by", by)
		writeJSON(w, http.StatusOK, Acknowledgement{Sentinels: ack.Sentinels, Message: "no loss of data is recorded; nothing changed"})
	default:
		h.cfg.Logger.Warn("store data loss acknowledged: the fleet claims again; "+dataLossWarning, "by", by, "lost", ack.Detail)
		writeJSON(w, http.StatusOK, Acknowledgement{Acknowledged: true, Lost: ack.Detail, Sentinels: ack.Sentinels,
			Message: "acknowledged: every gateway claims again at its next reading of the store; " + dataLossWarning})
	}
}

// importTools reads the upstreams' tools again, for an approver: 200
// {"imported": true}, or 502 vendor_unreachable when an upstream could not
// be read (which upstream, in the log).
func (h *handler) importTools(w http.ResponseWriter, r *http.Request) {
	by, ok := h.approver(w, r, false)
	if !ok {
		return
	}
	if h.cfg.Import == nil {
		h.refuse(w, refuse("not_implemented", http.StatusNotImplemented, "the gateway has no upstream MCP server"))
		return
	}
	if err := h.cfg.Import(r.Context()); err != nil {
		// The cause (which upstream, its status) is for the log.
		h.cfg.Logger.Warn("tools not imported", "by", by, "error", h.cfg.Redact(oneLine(err)))
		h.refuse(w, refuse("vendor_unreachable", http.StatusBadGateway, "an upstream MCP server's tools could not be read; see the gateway's log"))
		return
	}
	h.cfg.Logger.Info("tools imported", "by", by)
	writeJSON(w, http.StatusOK, map[string]bool{"imported": true})
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
