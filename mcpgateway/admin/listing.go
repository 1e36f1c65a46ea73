package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// listUnknown lists a workspace's unknown calls, or without ?workspace=
// every configured workspace's (fleetPage), a page at a time (?cursor=,
// ?limit= up to [idempotency.MaxPageSize]). An approver key only: a
// workspace's own key may not list or settle its calls.
func (h *handler) listUnknown(w http.ResponseWriter, r *http.Request) {
	st, _, ok := part[idempotency.Settler](h, w, r, true, errNoSettler)
	if !ok {
		return
	}
	wss, ok := h.workspaces(w, r)
	if !ok {
		return
	}
	limit, ok := h.limitParam(w, r, 0)
	if !ok {
		return
	}
	list := func(ctx context.Context, ws, cursor string, limit int) ([]idempotency.UnknownRecord, string, error) {
		page, err := st.ListUnknown(ctx, idempotency.ListRequest{Workspace: ws, Cursor: cursor, Limit: limit})
		return page.Records, page.Cursor, err
	}
	var recs []idempotency.UnknownRecord
	var cursor string
	var err error
	if len(wss) == 1 && r.URL.Query().Has("workspace") {
		// One workspace's listing has that workspace's own cursor.
		recs, cursor, err = list(r.Context(), wss[0], r.URL.Query().Get("cursor"), limit)
	} else {
		recs, cursor, err = fleetPage(r.Context(), h.cfg.StoreTimeout/2, wss, r.URL.Query().Get("cursor"), limit, list)
	}
	if err != nil {
		h.refuse(w, h.listRefusal(err))
		return
	}
	out := UnknownPage{Unknown: make([]ListedReceipt, 0, len(recs)), Cursor: cursor}
	for _, u := range recs {
		if _, ok := h.cfg.Scope(u.Scope.Workspace, u.Scope.Tool); !ok {
			continue // a tool no longer configured: its receipts endpoint cannot name it either
		}
		out.Unknown = append(out.Unknown, ListedReceipt{Receipt: u.Record.Receipt(u.Scope, false),
			FirstAttemptAt: u.Record.FirstAttemptAt, SettleAfter: u.SettleAfter})
	}
	writeJSON(w, http.StatusOK, out)
}

// listApprovals lists the calls awaiting an approver's decision, of one
// workspace (?workspace=) or of every configured one, a page at a time,
// from the store's pending approvals index.
func (h *handler) listApprovals(w http.ResponseWriter, r *http.Request) {
	pl, _, ok := part[idempotency.PendingLister](h, w, r, true,
		refuse("not_implemented", http.StatusNotImplemented, "the store cannot list pending approvals"))
	if !ok {
		return
	}
	wss, ok := h.workspaces(w, r)
	if !ok {
		return
	}
	limit, ok := h.limitParam(w, r, idempotency.MaxPageSize)
	if !ok {
		return
	}
	pending, cursor, err := fleetPage(r.Context(), h.cfg.StoreTimeout/2, wss, r.URL.Query().Get("cursor"), limit,
		func(ctx context.Context, ws, cursor string, limit int) ([]Pending, string, error) {
			page, err := pl.ListPending(ctx, idempotency.ListRequest{Workspace: ws, Cursor: cursor, Limit: limit})
			out := make([]Pending, 0, len(page.Approvals))
			for _, a := range page.Approvals {
				out = append(out, Pending{Ticket: a.Ticket, Workspace: a.Scope.Workspace, Tool: a.Scope.Tool,
					IdempotencyKey: a.Key.String(), State: string(a.State), HeldAt: a.HeldAt.UTC().Format(timeLayout)})
			}
			return out, page.Cursor, err
		})
	if err != nil {
		h.refuse(w, h.listRefusal(err))
		return
	}
	writeJSON(w, http.StatusOK, PendingPage{Pending: append([]Pending{}, pending...), Cursor: cursor})
}

func (h *handler) listRefusal(err error) refusal {
	rf := h.storeRefusal("list", err)
	if rf.Reason == "invalid_request" {
		rf.Message = "malformed cursor"
	}
	return rf
}

// fleetPage lists the workspaces wss in order, from each one's index
// (never a SCAN of records), up to limit items ([idempotency.MaxPageSize]
// when 0). Its cursor is "f<position in wss>:<that workspace's cursor>",
// and a page stops at a workspace boundary once bound is spent, so that a
// fleet of many workspaces answers in time, a page at a time.
func fleetPage[T any](ctx context.Context, bound time.Duration, wss []string, cursor string, limit int,
	list func(ctx context.Context, ws, cursor string, limit int) ([]T, string, error)) ([]T, string, error) {
	start := time.Now()
	if limit <= 0 || limit > idempotency.MaxPageSize {
		limit = idempotency.MaxPageSize
	}
	i, inner, err := fleetCursor(cursor, len(wss))
	if err != nil {
		return nil, "", err
	}
	var out []T
	for ; i < len(wss); i, inner = i+1, "" {
		items, next, err := list(ctx, wss[i], inner, limit-len(out))
		if err != nil {
			return nil, "", err
		}
		out = append(out, items...)
		if next != "" {
			return out, "f" + strconv.Itoa(i) + ":" + next, nil
		}
		if i+1 < len(wss) && (len(out) >= limit || time.Since(start) > bound) {
			return out, "f" + strconv.Itoa(i+1) + ":", nil
		}
	}
	return out, "", nil
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
		return 0, "", fmt.Errorf("admin: list: %w: malformed cursor", idempotency.ErrInvalidRequest)
	}
	return i, rest, nil
}

var errNoSettler = refuse("not_implemented", http.StatusNotImplemented, "the store cannot settle unknown calls")

const resolveForm = `{"outcome": "accepted"|"definitely_rejected", "attempt_count": N, "note": "..."}`

// resolve settles one unknown call as accepted or definitely_rejected, and
// answers its receipt with the resolution. A note is scrubbed of every
// configured secret ([Config.Redact]); the store refuses one holding a
// Unicode format character, changing nothing.
func (h *handler) resolve(w http.ResponseWriter, r *http.Request) {
	st, by, ok := part[idempotency.Settler](h, w, r, true, errNoSettler)
	if !ok {
		return
	}
	ws, ok := h.workspaceParam(w, r)
	if !ok {
		return
	}
	key, scope, ok := h.keyAndTool(w, r, ws)
	if !ok {
		return
	}
	var req Resolve
	if !h.body(w, r, &req, resolveForm, false) {
		return
	}
	outcome := effectspec.Outcome(req.Outcome)
	if outcome != effectspec.Accepted && outcome != effectspec.DefinitelyRejected {
		h.refuse(w, refuse("invalid_request", http.StatusBadRequest, `outcome must be "accepted" or "definitely_rejected"`))
		return
	}
	if req.AttemptCount == nil {
		h.refuse(w, refuse("invalid_request", http.StatusBadRequest,
			"attempt_count is required: the attempt_count of the call's receipt as listed, which the settle compares"))
		return
	}
	rec, err := st.Settle(r.Context(), idempotency.SettleRequest{Scope: scope, Key: key, Attempts: *req.AttemptCount,
		Outcome: outcome, By: by, Note: h.cfg.Redact(req.Note), OpID: idempotency.NewOpID()})
	if err != nil {
		h.refuse(w, h.resolveRefusal(err))
		return
	}
	h.cfg.OnSettle(outcome)
	h.cfg.Logger.Info("unknown call settled", "workspace", ws, "tool", scope.Tool, "key", key.String(), "outcome", string(outcome), "by", by)
	writeJSON(w, http.StatusOK, rec.Receipt(scope, false))
}

func (h *handler) resolveRefusal(err error) refusal {
	var running *idempotency.AttemptRunningError
	switch {
	case errors.As(err, &running):
		// Its gateway may still finalize it: an operator who asks the vendor
		// now may hear of a request the vendor has not processed yet.
		rf := refuse("in_progress", http.StatusConflict, "the call's attempt may still be running until its deadline; retry after retry_after_ms")
		rf.RetryAfterMS = max(running.RetryAfter.Milliseconds(), 1)
		return rf
	case errors.Is(err, idempotency.ErrStale):
		// Here a redispatch since the listing, not a lost lease.
		return refuse("stale", http.StatusConflict, "the call had another attempt since its attempt_count was read")
	}
	rf := h.storeRefusal("settle", err)
	switch rf.Reason {
	case "not_found":
		rf.Message = "no call with this key for this tool in this workspace"
	case "not_unknown":
		rf.Message = "the call is not unknown: only an unknown call can be settled"
	}
	return rf
}
