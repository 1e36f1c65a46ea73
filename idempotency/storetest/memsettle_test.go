package storetest

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/obol-gateway/obol/idempotency"
)

var _ idempotency.Settler = (*memStore)(nil)

func (m *memStore) Settle(ctx context.Context, req idempotency.SettleRequest) (idempotency.Record, error) {
	k, err := req.Scope.StorageKey(m.cfg.Prefix, req.Key)
	if err != nil {
		return idempotency.Record{}, err
	}
	if err := req.Validate(); err != nil && m.mutant != "settle-any-input" {
		return idempotency.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(k)
	if r == nil {
		return idempotency.Record{}, idempotency.ErrNotFound
	}
	if _, ok := r.ops[req.OpID]; ok && req.OpID != "" {
		return m.copyRecord(r, false), nil
	}
	open := r.rec.State == idempotency.StateUnknown || m.expired(r) && m.mutant != "settle-ignores-lapsed"
	if !open && m.mutant != "settle-any-state" {
		return idempotency.Record{}, idempotency.ErrNotUnknown
	}
	if req.Attempts != r.rec.AttemptCount && m.mutant != "settle-no-cas" {
		return idempotency.Record{}, idempotency.ErrStale
	}
	// An attempt deadline is kept while the attempt may run at its gateway
	// (in flight, or turned unknown by the lease-expiry path).
	if e := r.rec.AttemptDeadline; !e.IsZero() && !m.now.After(e.Add(m.cfg.Lease)) && m.mutant != "settle-running" {
		at := e.Add(m.cfg.Lease)
		return idempotency.Record{}, &idempotency.AttemptRunningError{SettleAfter: at, RetryAfter: at.Sub(m.now)}
	}
	r.settled = true
	r.rec.LeaseDeadline, r.rec.AttemptDeadline = time.Time{}, time.Time{}
	r.rec.State = req.Outcome
	r.rec.FinalizedAt, r.rec.UpdatedAt = m.now, m.now
	r.rec.Resolution = &idempotency.Resolution{Outcome: req.Outcome, By: req.By, At: m.now, Note: req.Note}
	r.rec.Result = nil
	if req.Result != nil {
		res := idempotency.StoredResult{Status: req.Result.Status, Header: http.Header{}, Body: slices.Clone(req.Result.Body)}
		for name, v := range req.Result.Header {
			if idempotency.SafeHeader(name) {
				res.Header[name] = slices.Clone(v)
			}
		}
		if len(res.Body) > m.cfg.MaxResultBytes {
			res.Body, res.BodyDropped = nil, true
		}
		r.rec.Result = &res
	}
	if e := m.now.Add(m.cfg.Retention); e.After(r.expires) || m.mutant == "settle-shortens-ttl" {
		r.expires = e
	}
	if req.OpID != "" {
		r.ops[req.OpID] = true
	}
	return m.copyRecord(r, false), nil
}

// ListUnknown scans the records in storage key order; the cursor is the
// last key read.
func (m *memStore) ListUnknown(ctx context.Context, req idempotency.ListRequest) (idempotency.UnknownPage, error) {
	if err := (idempotency.Scope{Workspace: req.Workspace, Connection: "c", Tool: "t"}).Validate(); err != nil {
		return idempotency.UnknownPage{}, err
	}
	from := m.cfg.Prefix + "idem:" + req.Workspace + ":"
	if req.Cursor != "" && !strings.HasPrefix(req.Cursor, from) {
		return idempotency.UnknownPage{}, idempotency.ErrInvalidRequest
	}
	limit := req.PageLimit()
	if m.mutant == "list-unbounded" {
		limit = 1 << 30
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]string, 0, len(m.recs))
	for k := range m.recs {
		if strings.HasPrefix(k, from) && k > req.Cursor {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var page idempotency.UnknownPage
	for _, k := range keys {
		r := m.get(k)
		if r == nil {
			continue
		}
		rec := m.copyRecord(r, false)
		if m.mutant == "list-ignores-lapsed" {
			rec.State = r.rec.State
		}
		if rec.State != idempotency.StateUnknown && m.mutant != "list-shows-all" {
			continue
		}
		if len(page.Records) == limit {
			return page, nil
		}
		u := idempotency.UnknownRecord{Scope: r.scope, Record: rec}
		if e := rec.AttemptDeadline; !e.IsZero() && !m.now.After(e.Add(m.cfg.Lease)) && m.mutant != "list-no-settle-after" {
			u.SettleAfter = e.Add(m.cfg.Lease)
		}
		page.Records = append(page.Records, u)
		page.Cursor = k
	}
	page.Cursor = ""
	return page, nil
}
