package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// The operator's endpoints that the refserver subcommands call besides the
// approval and unknown ones (docs/DESIGN.md, "refserver wire contract"):
// GET /v1/approvals lists pending approvals, POST /v1/scope-version/advance
// is the two-phase scope version command.

// advanceTimeout bounds an advance: it counts every record under the prefix
// (a SCAN of every master), which takes longer than the 2s of the other
// admin endpoints on a large store.
const advanceTimeout = 20 * time.Second

// withOperator adds the operator's endpoints to h, every one under a store
// bound as the other admin endpoints are.
func (s *server) withOperator(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /v1/approvals", s.bounded(http.HandlerFunc(s.handleListApprovals)))
	mux.Handle("POST /v1/scope-version/advance", s.boundedFor(advanceTimeout, http.HandlerFunc(s.handleAdvance)))
	mux.Handle("/", h)
	return mux
}

// boundedFor is bounded with its own bound.
func (s *server) boundedFor(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// scopeAdvancer is the store's two-phase scope version command
// (*redisstore.Store).
type scopeAdvancer interface {
	AdvanceScope(ctx context.Context, req redisstore.AdvanceRequest) (redisstore.Advance, error)
}

type advanceRequest struct {
	To     *int `json:"to"`
	Strand *int `json:"strand"`
}

type advanceCount struct {
	Version int    `json:"version"`
	State   string `json:"state"`
	Records int    `json:"records"`
}

// advanceView is the answer of an advance; a refusal carries the /v1 error
// fields as well.
type advanceView struct {
	Reason       string         `json:"reason,omitempty"`
	Status       int            `json:"status,omitempty"`
	Message      string         `json:"message,omitempty"`
	Phase        string         `json:"phase"`
	From         int            `json:"from"`
	To           int            `json:"to"`
	Live         int            `json:"live"`
	Counts       []advanceCount `json:"counts"`
	RetryAfterMS int64          `json:"retry_after_ms,omitempty"`
}

// handleAdvance runs one step of the scope version advance
// (redisstore.Store.AdvanceScope): 200 while closing (run it again after
// retry_after_ms) and once advanced; 409 records_live with the count to
// strand, conflict when the key holds something else, migrating while a
// Cluster slot moves.
func (s *server) handleAdvance(w http.ResponseWriter, r *http.Request) {
	by, ok := s.approverOnly(w, r)
	if !ok {
		return
	}
	adv, ok := s.store.(scopeAdvancer)
	if !ok {
		s.restRefuse(w, refusal{reason: "not_implemented", status: http.StatusNotImplemented, msg: "the store cannot advance the scope version"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBytes))
	if err != nil {
		s.restRefuse(w, refusal{reason: "request_too_large", status: http.StatusRequestEntityTooLarge, msg: "request body too large"})
		return
	}
	var req advanceRequest
	if len(body) > 0 {
		if err := decodeStrict(body, &req); err != nil {
			s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: `body must be {"to": N, "strand": N} (both optional): ` + err.Error()})
			return
		}
	}
	ar := redisstore.AdvanceRequest{To: idempotency.ScopeVersion + 1, Strand: -1}
	if req.To != nil {
		ar.To = *req.To
	}
	if req.Strand != nil {
		if *req.Strand < 0 {
			s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: "strand must not be negative"})
			return
		}
		ar.Strand = *req.Strand
	}
	if ar.To <= idempotency.ScopeVersion {
		s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest, msg: "to must be above this gateway's scope version"})
		return
	}
	a, err := adv.AdvanceScope(r.Context(), ar)
	if err != nil {
		rf := s.classify(err)
		if errors.Is(err, idempotency.ErrStoreUnavailable) || rf.reason == "store_unavailable" {
			rf = refusal{reason: "store_unavailable", status: http.StatusServiceUnavailable,
				msg: "store_unavailable: the advance could not finish; run it again", detail: s.redact.String(err.Error())}
			s.metrics.storeErrors.WithLabelValues("advance").Inc()
		}
		s.restRefuse(w, rf)
		return
	}
	v := advanceView{Phase: string(a.Phase), From: a.From, To: a.To, Live: a.Live, Counts: []advanceCount{}, RetryAfterMS: a.RetryAfterMS}
	for _, c := range a.Counts {
		v.Counts = append(v.Counts, advanceCount{c.Version, string(c.State), c.Records})
	}
	status := http.StatusOK
	switch a.Phase {
	case redisstore.AdvanceRecordsLive:
		status, v.Reason, v.Message = http.StatusConflict, "records_live",
			"live records of the old version remain; finish when none do, or strand exactly this count"
	case redisstore.AdvanceConflict:
		status, v.Reason, v.Message = http.StatusConflict, "conflict",
			"the fleet's scope version key holds "+a.Fleet+", not this gateway's version or its closing mark"
	case redisstore.AdvanceMigrating:
		status, v.Reason, v.Message = http.StatusConflict, "migrating",
			"a Cluster slot is migrating ("+a.Fleet+"): a count now could miss records; run it again once resharding is done"
	case redisstore.AdvanceClosing:
		v.Message = "the old version is closing: its gateways stop claiming within a lease; run the advance again after retry_after_ms"
	}
	if status != http.StatusOK {
		v.Status = status
		s.metrics.refusals.WithLabelValues(v.Reason).Inc()
	}
	s.log.Info("scope version advance", "phase", v.Phase, "from", a.From, "to", a.To, "live", a.Live, "by", by)
	writeJSON(w, status, v)
}

// pendingLister is the store's pending approvals index
// (*redisstore.Store).
type pendingLister interface {
	ListPending(ctx context.Context, req idempotency.ListRequest) (redisstore.PendingPage, error)
}

// pendingView is one call awaiting a decision.
type pendingView struct {
	Ticket         string `json:"ticket"`
	Workspace      string `json:"workspace"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotency_key"`
	// State is held, or the state of a re-held record (unknown most often).
	State  string `json:"state"`
	HeldAt string `json:"held_at"`
}

type pendingList struct {
	Pending []pendingView `json:"pending"`
	Cursor  string        `json:"cursor"`
}

// handleListApprovals lists the calls awaiting an approver's decision, of
// one workspace (?workspace=) or of every configured one, a page at a time
// (?cursor=, ?limit= up to idempotency.MaxPageSize), from the store's
// pending approvals index.
func (s *server) handleListApprovals(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.approverOnly(w, r); !ok {
		return
	}
	pl, ok := s.store.(pendingLister)
	if !ok {
		s.restRefuse(w, refusal{reason: "not_implemented", status: http.StatusNotImplemented, msg: "the store cannot list pending approvals"})
		return
	}
	q := r.URL.Query()
	var wss []string
	if q.Has("workspace") {
		ws, ok := s.workspaceParam(w, r)
		if !ok {
			return
		}
		wss = []string{ws}
	} else {
		wss = s.cfg.Workspaces
	}
	limit := idempotency.MaxPageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > idempotency.MaxPageSize {
			s.restRefuse(w, refusal{reason: "invalid_request", status: http.StatusBadRequest,
				msg: "query parameter limit must be 1 to " + strconv.Itoa(idempotency.MaxPageSize)})
			return
		}
		limit = n
	}
	out, err := s.listPending(r.Context(), pl, wss, q.Get("cursor"), limit)
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
	writeJSON(w, http.StatusOK, out)
}

// listPending lists the pending approvals of wss in order. Its cursor is
// "f<position in wss>:<that workspace's cursor>", as the fleet-wide unknown
// listing's (listFleet), and a page stops at a workspace boundary once half
// the store bound is spent.
func (s *server) listPending(ctx context.Context, pl pendingLister, wss []string, cursor string, limit int) (pendingList, error) {
	start := time.Now()
	i, inner, err := fleetCursor(cursor, len(wss))
	if err != nil {
		return pendingList{}, err
	}
	out := pendingList{Pending: []pendingView{}}
	for ; i < len(wss); i, inner = i+1, "" {
		page, err := pl.ListPending(ctx, idempotency.ListRequest{Workspace: wss[i], Cursor: inner, Limit: limit - len(out.Pending)})
		if err != nil {
			return pendingList{}, err
		}
		for _, a := range page.Approvals {
			out.Pending = append(out.Pending, pendingView{Ticket: a.Ticket, Workspace: a.Scope.Workspace, Tool: a.Scope.Tool,
				IdempotencyKey: a.Key.String(), State: string(a.State), HeldAt: a.HeldAt.UTC().Format("2006-01-02T15:04:05.000Z07:00")})
		}
		if page.Cursor != "" {
			out.Cursor = "f" + strconv.Itoa(i) + ":" + page.Cursor
			return out, nil
		}
		if i+1 < len(wss) && (len(out.Pending) >= limit || time.Since(start) > s.storeTimeout/2) {
			out.Cursor = "f" + strconv.Itoa(i+1) + ":"
			return out, nil
		}
	}
	return out, nil
}

// fleetCursor reads a cursor of a listing over n workspaces,
// "f<position>:<that workspace's cursor>" ("" is the start).
func fleetCursor(cursor string, n int) (int, string, error) {
	if cursor == "" {
		return 0, "", nil
	}
	pos, rest, ok := strings.Cut(cursor, ":")
	i, err := strconv.Atoi(strings.TrimPrefix(pos, "f"))
	if !ok || !strings.HasPrefix(pos, "f") || err != nil || i < 0 || i > n || strconv.Itoa(i) != pos[1:] {
		return 0, "", fmt.Errorf("refserver: list: %w: malformed cursor", idempotency.ErrInvalidRequest)
	}
	return i, rest, nil
}
