package storetest

import (
	"context"
	"slices"
	"strings"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/lifecycle"
	"github.com/obol-gateway/obol/internal/storereply"
)

var _ idempotency.Settler = (*memStore)(nil)

func (m *memStore) Settle(ctx context.Context, req idempotency.SettleRequest) (idempotency.Record, error) {
	k, err := req.Scope.StorageKey(m.cfg.Prefix, req.Key)
	if err != nil {
		return idempotency.Record{}, err
	}
	if err := m.hooks.validate(req); err != nil {
		return idempotency.Record{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.get(k)
	res, w := m.rules.settle(cur(r), lifecycle.SettleRequest{Attempts: int64(req.Attempts), State: req.Outcome,
		Op: opTag("s", req.OpID), Retention: m.cfg.Retention.Milliseconds(), Who: req.By, Note: req.Note,
		Margin: m.cfg.Lease.Milliseconds(), ScopeVersion: idempotency.ScopeVersion, Result: m.result(req.Result)}, m.ms())
	switch res.Status {
	case storereply.NotFound:
		return idempotency.Record{}, idempotency.ErrNotFound
	case idempotency.StatusScopeVersionConflict:
		return idempotency.Record{}, idempotency.ErrScopeVersionConflict
	case storereply.NotUnknown:
		return idempotency.Record{}, idempotency.ErrNotUnknown
	case idempotency.StatusInProgress:
		at := ms(res.SettleAt)
		return idempotency.Record{}, &idempotency.AttemptRunningError{SettleAfter: at, RetryAfter: at.Sub(m.now)}
	case storereply.Settled:
		m.put(k, r, w)
		return m.record(r, res.Record, false), nil
	}
	return idempotency.Record{}, idempotency.ErrStale
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
	limit := m.hooks.pageLimit(req)
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
		if r == nil || m.hooks.listState(m, r.rec) != effectspec.Unknown {
			continue
		}
		if len(page.Records) == limit {
			return page, nil
		}
		page.Records = append(page.Records, idempotency.UnknownRecord{Scope: r.scope, Record: m.record(r, r.rec, false),
			SettleAfter: m.hooks.settleAfter(m, r.rec)})
		page.Cursor = k
	}
	page.Cursor = ""
	return page, nil
}
