package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/internal/storereply"
)

// ticketValue is the ticket key's JSON: what Ticket needs to find the record.
type ticketValue struct {
	Workspace  string `json:"w"`
	Connection string `json:"c,omitempty"`
	Tool       string `json:"t"`
	Key        string `json:"k"`
	Record     string `json:"r"`
}

func (s *Store) writeTicket(ctx context.Context, id string, scope idempotency.Scope, key idempotency.Key, recordKey string) error {
	v, err := json.Marshal(ticketValue{scope.Workspace, scope.Connection, scope.Tool, key.String(), recordKey})
	if err != nil {
		return err
	}
	return s.client.Do(ctx, s.client.B().Set().Key(s.ticketKey(id)).Value(string(v)).PxMilliseconds(s.retentionMS).Build()).Error()
}

// resolve reads a ticket key.
func (s *Store) resolve(ctx context.Context, op, id string) (ticketValue, idempotency.Key, error) {
	if !idempotency.ValidTicketID(id) {
		return ticketValue{}, idempotency.Key{}, fmt.Errorf("redisstore: %s: malformed ticket id", op)
	}
	raw, err := s.client.Do(ctx, s.client.B().Get().Key(s.ticketKey(id)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ticketValue{}, idempotency.Key{}, fmt.Errorf("redisstore: %s: ticket: %w", op, idempotency.ErrNotFound)
	}
	if err != nil {
		return ticketValue{}, idempotency.Key{}, opError(op, err)
	}
	var tv ticketValue
	if err := json.Unmarshal([]byte(raw), &tv); err != nil {
		return ticketValue{}, idempotency.Key{}, fmt.Errorf("redisstore: %s: %w: ticket", op, errCorruptRecord)
	}
	k, err := idempotency.ParseKey(tv.Key)
	if err != nil {
		return ticketValue{}, idempotency.Key{}, fmt.Errorf("redisstore: %s: %w: ticket key", op, errCorruptRecord)
	}
	// The record key is derived again, so that a ticket can only ever point at
	// the record of its own scope and key under this prefix.
	rk, err := idempotency.Scope{Workspace: tv.Workspace, Connection: tv.Connection, Tool: tv.Tool}.StorageKey(s.prefix, k)
	if err != nil || rk != tv.Record {
		return ticketValue{}, idempotency.Key{}, fmt.Errorf("redisstore: %s: %w: ticket scope", op, errCorruptRecord)
	}
	return tv, k, nil
}

func (tv ticketValue) scope() idempotency.Scope {
	return idempotency.Scope{Workspace: tv.Workspace, Connection: tv.Connection, Tool: tv.Tool}
}

func (tv ticketValue) ticket(id string, k idempotency.Key, st idempotency.TicketStatus) idempotency.Ticket {
	return idempotency.Ticket{
		ID:     id,
		Scope:  idempotency.Scope{Workspace: tv.Workspace, Connection: tv.Connection, Tool: tv.Tool},
		Key:    k,
		Status: st,
	}
}

// Ticket resolves an approval ticket and reads its decision from the record.
func (s *Store) Ticket(ctx context.Context, id string) (idempotency.Ticket, error) {
	ctx, cancel := s.readCtx(ctx)
	defer cancel()
	tv, k, err := s.resolve(ctx, "ticket", id)
	if err != nil {
		return idempotency.Ticket{}, err
	}
	rec, err := s.Lookup(ctx, tv.scope(), k)
	if errors.Is(err, idempotency.ErrNotFound) || err == nil && rec.Ticket != id {
		return idempotency.Ticket{}, fmt.Errorf("redisstore: ticket: record: %w", idempotency.ErrNotFound)
	}
	if err != nil {
		return idempotency.Ticket{}, opError("ticket", err)
	}
	status := idempotency.TicketPending
	switch {
	case rec.State == effectspec.Denied || rec.ApprovalDenied:
		status = idempotency.TicketDenied
	case rec.Approved:
		status = idempotency.TicketApproved
	}
	t := tv.ticket(id, k, status)
	t.KeySource = rec.KeySource
	return t, nil
}

// Decide approves or denies a held call. The first decision is final:
// repeating it answers the ticket; approving a denied ticket is ErrDenied,
// denying an approved one ErrStale. Decide also restarts the ticket key's
// retention. An approved ticket of a held record dispatches only through a
// claim that presents it; a record that a claim held again in another
// state (lua/claim.lua) keeps that state and its TTL, and its approval
// lets every claim that would dispatch it do so.
func (s *Store) Decide(ctx context.Context, req idempotency.DecideRequest) (idempotency.Ticket, error) {
	op, err := validOpID(req.OpID)
	if err != nil {
		return idempotency.Ticket{}, err
	}
	tv, k, err := s.resolve(ctx, "decide", req.Ticket)
	if err != nil {
		return idempotency.Ticket{}, err
	}
	bucket, member, err := s.indexEntry(tv.scope(), k, tv.Record)
	if err != nil {
		return idempotency.Ticket{}, err
	}
	arr, _, st, err := s.runStatus(ctx, "decide", s.sc.decide, []string{tv.Record, bucket, s.pendingOf(tv.scope().Workspace, tv.Record)},
		scriptargs.DecideSpec.Argv(&scriptargs.Decide{Ticket: req.Ticket, Approve: req.Approve, Op: opTag('d', op),
			Retention: s.retention, Member: member, ScopeVersion: scopeVersion}), false)
	if err != nil {
		return idempotency.Ticket{}, err
	}
	var ts idempotency.TicketStatus
	switch st {
	case storereply.NotFound:
		return idempotency.Ticket{}, fmt.Errorf("redisstore: decide: record: %w", idempotency.ErrNotFound)
	case idempotency.StatusScopeVersionConflict:
		return idempotency.Ticket{}, fmt.Errorf("redisstore: decide: %w", idempotency.ErrScopeVersionConflict)
	case storereply.Approved:
		ts = idempotency.TicketApproved
	case idempotency.StatusDenied:
		ts = idempotency.TicketDenied
	case storereply.Conflict:
		var standing idempotency.Status
		if len(arr) > 1 {
			standing, _ = statusAt(arr, 1)
		}
		if standing == idempotency.StatusDenied {
			return idempotency.Ticket{}, fmt.Errorf("redisstore: decide: the ticket was already denied: %w", idempotency.ErrDenied)
		}
		return idempotency.Ticket{}, fmt.Errorf("redisstore: decide: the ticket was already approved: %w", idempotency.ErrStale)
	default:
		return idempotency.Ticket{}, opError("decide", fmt.Errorf("unexpected reply %q", st))
	}
	// The record's retention restarted; keep its ticket resolvable as long.
	if err := s.client.Do(ctx, s.client.B().Pexpire().Key(s.ticketKey(req.Ticket)).Milliseconds(s.retentionMS).Build()).Error(); err != nil {
		return idempotency.Ticket{}, opError("decide", err)
	}
	return tv.ticket(req.Ticket, k, ts), nil
}
