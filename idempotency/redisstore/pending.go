package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/internal/storelimits"
)

// The pending approvals index: per workspace, one sorted set per Cluster
// slot, {prefix}apv:{workspace}:{T}, named after the unknown index bucket
// of the slot (the same hash tag, so the slot of the records it indexes).
// The scripts that touch it (claim, decide) get it as their KEYS[3]
// (pendingOf), as every key a script touches is declared. Members are the
// unknown index's (indexMember), scores the record's expiry. The claim script adds an entry when it holds a call (a
// held record, or a re-held one when it mints its ticket) and prunes the
// bucket's expired entries; the decide script removes it. The listing
// drops entries whose record is gone or no longer awaits a decision.

// pendingKey is the pending approvals bucket of listing position pos (1 +
// slot, as the unknown listing's).
func (s *Store) pendingKey(workspace string, pos int) string {
	return s.pendingBucket(workspace, pos-1)
}

// pendingBucket is the pending approvals bucket of the workspace in slot.
func (s *Store) pendingBucket(workspace string, slot int) string {
	return pendingBase(s.prefix, workspace) + slotTags()[slot] + "}"
}

// pendingBase is a workspace's pending buckets' key up to the slot's tag.
func pendingBase(prefix, workspace string) string { return prefix + "apv:" + workspace + ":{" }

// pendingOf is the pending approvals bucket of the record at record key
// rk: the claim and decide scripts' KEYS[3].
func (s *Store) pendingOf(workspace, rk string) string {
	return s.pendingBucket(workspace, keySlot(rk))
}

// ListPending lists a workspace's calls awaiting approval, in slot order, a
// page (req.Limit, at most [idempotency.MaxPageSize]) at a time, from the
// pending approvals index: never a SCAN. It reads at most 10 pages' worth of entries per call (a page may
// come back short, with a cursor).
func (s *Store) ListPending(ctx context.Context, req idempotency.ListRequest) (idempotency.PendingPage, error) {
	if err := (idempotency.Scope{Workspace: req.Workspace, Tool: "-", Connection: "-"}).Validate(); err != nil {
		return idempotency.PendingPage{}, fmt.Errorf("redisstore: pending: %w", err)
	}
	cur, err := parseCursor(req.Cursor)
	if err != nil {
		return idempotency.PendingPage{}, err
	}
	if cur.pos == 0 {
		cur = listCursor{pos: 1} // position 0 is the unknown index's old key
	}
	approvals, next, err := listPage(ctx, s, s.pendingKey, req.Workspace, cur, storelimits.PageLimit(req.Limit), s.pending)
	if err != nil {
		return idempotency.PendingPage{}, err
	}
	return idempotency.PendingPage{Approvals: approvals, Cursor: next}, nil
}

// pending reads the records of pending entries and returns those awaiting
// a decision now, in order; it drops the entries whose record can never be
// pending again (gone, decided, final).
func (s *Store) pending(ctx context.Context, workspace string, entries []listCursor) ([]idempotency.PendingApproval, error) {
	var out []idempotency.PendingApproval
	for _, e := range entries {
		scope, k, _, err := s.entryRecord(workspace, e)
		var rec idempotency.Record
		gone := false
		if err == nil {
			// One read per entry: a page is at most [idempotency.MaxPageSize].
			rec, err = s.Lookup(ctx, scope, k)
			if errors.Is(err, idempotency.ErrNotFound) {
				gone, err = true, nil
			}
		}
		switch {
		case errors.Is(err, idempotency.ErrStoreUnavailable):
			return nil, err
		case err != nil, gone, rec.Ticket == "", rec.Approved, rec.ApprovalDenied, rec.State.Final(), rec.State == effectspec.Denied:
			if _, _, err := s.exec(ctx, s.sc.index, s.pendingKey(workspace, e.pos), scriptargs.IndexSpec.Argv(&scriptargs.Index{Op: "drop", Score: e.score, Member: e.member}), false); err != nil {
				return nil, opError("list", err)
			}
			continue
		}
		at := rec.UpdatedAt
		if rec.State == effectspec.Held {
			at = rec.CreatedAt
		}
		out = append(out, idempotency.PendingApproval{Scope: scope, Key: k, Ticket: rec.Ticket, State: rec.State, HeldAt: at})
	}
	return out, nil
}
