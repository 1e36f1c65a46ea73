package redisstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/obol-gateway/obol/idempotency"
)

var _ idempotency.Settler = (*Store)(nil)

// The unknown index (DESIGN.md section 6, "Listing"): one sorted set per
// workspace at {prefix}unk:{workspace}, member indexMember, score the
// record's expiry in ms. The record key and the index key live in different
// Cluster slots, so the index cannot be written by the claim script: every
// Claim that may dispatch (all but Refuse) sends the index script in the
// same pipeline, unconditionally, and a Reserve sends it right after; the
// caller may send only once both answered. A final Finalize removes the
// entry in its own pipeline (and puts it back, best effort, when the
// finalize did not apply: the record may be another attempt's), Settle
// right after. So a claim that does not dispatch (a replay, in_progress)
// leaves an entry for the listing to drop, or for its score to pass. If
// the write fails, a claimed call fails (do not send) and the reservation
// stands: the caller's re-send with the same op
// id answers "already applied" and writes the entry again, so an attempt is
// only ever sent indexed. A reservation whose caller gave up is unindexed
// but was never sent; it reads unknown once its lease lapses, and the next
// claim of the key that answers outcome_unknown indexes it (best effort).
// The record stays the truth: the index may hold entries of records that
// are gone, final or live, which listing skips and drops.

func (s *Store) indexKey(workspace string) string { return s.prefix + "unk:" + workspace }

// indexMember names a record in its workspace's index: enough to derive its
// storage key again and to settle it (the tool by name, not by hash).
type indexMember struct {
	Connection string `json:"c,omitempty"`
	Tool       string `json:"t"`
	Key        string `json:"k"`
}

func (s *Store) indexMember(scope idempotency.Scope, key idempotency.Key) (string, error) {
	m, err := json.Marshal(indexMember{scope.Connection, scope.Tool, key.String()})
	if err != nil {
		return "", fmt.Errorf("redisstore: unknown index: %w", err)
	}
	return string(m), nil
}

func (s *Store) index(ctx context.Context, scope idempotency.Scope, key idempotency.Key) error {
	m, err := s.indexMember(scope, key)
	if err != nil {
		return err
	}
	_, _, err = s.exec(ctx, s.sc.index, s.indexKey(scope.Workspace), []string{"add", m, s.uretention}, false)
	return err
}

// unindex removes the entry of a record that just became final, so that
// the index holds about the records that may still be unknown, not a week
// of traffic. Best effort: an entry left behind is dropped by the next
// listing that reads it, or once its score passes.
func (s *Store) unindex(ctx context.Context, scope idempotency.Scope, key idempotency.Key) {
	if m, err := s.indexMember(scope, key); err == nil {
		s.exec(ctx, s.sc.index, s.indexKey(scope.Workspace), []string{"rem", m}, false)
	}
}

// indexReserved writes the index entry of a reservation just made. An
// error means "do not send"; the reservation stands for the re-send.
func (s *Store) indexReserved(ctx context.Context, op string, scope idempotency.Scope, key idempotency.Key) error {
	if err := s.index(ctx, scope, key); err != nil {
		return opError(op, fmt.Errorf("unknown index: %w", err))
	}
	return nil
}

// Settle settles an unknown record (idempotency.Settler).
func (s *Store) Settle(ctx context.Context, req idempotency.SettleRequest) (idempotency.Record, error) {
	rk, err := req.Scope.StorageKey(s.prefix, req.Key)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: settle: %w", err)
	}
	if err := req.Validate(); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: %w", err)
	}
	op, err := validOpID(req.OpID)
	if err != nil {
		return idempotency.Record{}, err
	}
	args := append([]string{strconv.Itoa(req.Attempts), stateCodes[req.Outcome], opTag('s', op), s.retention, req.By, req.Note},
		encodeResult(req.Result, s.maxResult)...)
	arr, _, err := s.exec(ctx, s.sc.settle, rk, args, false)
	if err != nil {
		return idempotency.Record{}, opError("settle", err)
	}
	st, err := status(arr)
	if err != nil {
		return idempotency.Record{}, opError("settle", err)
	}
	switch st {
	case "not_found":
		return idempotency.Record{}, fmt.Errorf("redisstore: settle: %w", idempotency.ErrNotFound)
	case "not_unknown":
		return idempotency.Record{}, fmt.Errorf("redisstore: settle: %w", idempotency.ErrNotUnknown)
	case "stale":
		return idempotency.Record{}, fmt.Errorf("redisstore: settle: the record had another attempt since: %w", idempotency.ErrStale)
	case "settled":
		if len(arr) < 2 {
			return idempotency.Record{}, opError("settle", errors.New("short settle reply"))
		}
		raw, err := arr[1].ToString()
		if err != nil {
			return idempotency.Record{}, opError("settle", err)
		}
		rec, err := decodeStored(req.Scope, req.Key, raw, 0, schemaVersion)
		if err != nil {
			return idempotency.Record{}, fmt.Errorf("redisstore: settle: %w", err)
		}
		s.unindex(ctx, req.Scope, req.Key)
		return rec, nil
	}
	return idempotency.Record{}, opError("settle", fmt.Errorf("unexpected reply %q", st))
}

// ListUnknown lists a workspace's unknown records (idempotency.Settler). It
// reads the index a batch at a time and each entry's record; an entry whose
// record is gone, final or denied is dropped. One call reads at most
// maxScan entries: past that it returns a short page and a cursor. The
// cursor is the last entry read: an entry whose score rises past it (a new
// reservation) may be listed again.
func (s *Store) ListUnknown(ctx context.Context, req idempotency.ListRequest) (idempotency.UnknownPage, error) {
	// The workspace is checked as a scope's: it names the index key.
	if err := (idempotency.Scope{Workspace: req.Workspace, Tool: "-", Connection: "-"}).Validate(); err != nil {
		return idempotency.UnknownPage{}, fmt.Errorf("redisstore: list: %w", err)
	}
	from, after, err := parseCursor(req.Cursor)
	if err != nil {
		return idempotency.UnknownPage{}, err
	}
	limit := req.PageLimit()
	ik := s.indexKey(req.Workspace)
	var page idempotency.UnknownPage
	for scanned := 0; ; {
		if scanned >= maxScan {
			page.Cursor = formatCursor(from, after)
			return page, nil
		}
		rctx, cancel := s.readCtx(ctx)
		arr, _, err := s.exec(rctx, s.sc.index, ik, []string{"page", from, after, strconv.Itoa(limit + 1)}, false)
		cancel()
		if err != nil {
			return idempotency.UnknownPage{}, opError("list", err)
		}
		if len(arr)%2 != 0 {
			return idempotency.UnknownPage{}, opError("list", errors.New("odd page reply"))
		}
		for i := 0; i < len(arr); i += 2 {
			member, err1 := arr[i].ToString()
			score, err2 := arr[i+1].ToString()
			if err := errors.Join(err1, err2); err != nil {
				return idempotency.UnknownPage{}, opError("list", err)
			}
			if len(page.Records) == limit {
				page.Cursor = formatCursor(from, after)
				return page, nil
			}
			from, after = score, member
			scanned++
			u, ok, err := s.listed(ctx, ik, member, score)
			if err != nil {
				return idempotency.UnknownPage{}, err
			}
			if ok {
				page.Records = append(page.Records, u)
			}
		}
		if len(arr)/2 <= limit {
			return page, nil
		}
	}
}

// maxScan bounds the index entries one ListUnknown reads.
const maxScan = 10 * idempotency.MaxPageSize

// listed reads the record of one index entry and drops the entry when the
// record can never be listed again.
func (s *Store) listed(ctx context.Context, ik, member, score string) (idempotency.UnknownRecord, bool, error) {
	var m indexMember
	k, err := idempotency.Key{}, json.Unmarshal([]byte(member), &m)
	if err == nil {
		k, err = idempotency.ParseKey(m.Key)
	}
	scope := idempotency.Scope{Workspace: strings.TrimPrefix(ik, s.indexKey("")), Connection: m.Connection, Tool: m.Tool}
	if err == nil {
		err = scope.Validate()
	}
	if err != nil {
		return idempotency.UnknownRecord{}, false, s.drop(ctx, ik, member, score)
	}
	rec, err := s.Lookup(ctx, scope, k)
	switch {
	case errors.Is(err, idempotency.ErrNotFound):
		return idempotency.UnknownRecord{}, false, s.drop(ctx, ik, member, score)
	case err != nil:
		return idempotency.UnknownRecord{}, false, err
	case rec.State.Final() || rec.State == idempotency.StateDenied:
		return idempotency.UnknownRecord{}, false, s.drop(ctx, ik, member, score)
	case rec.State != idempotency.StateUnknown:
		return idempotency.UnknownRecord{}, false, nil
	}
	if rec.Result != nil {
		rec.Result.Body = nil
	}
	return idempotency.UnknownRecord{Scope: scope, Record: rec}, true, nil
}

func (s *Store) drop(ctx context.Context, ik, member, score string) error {
	if _, _, err := s.exec(ctx, s.sc.index, ik, []string{"drop", member, score}, false); err != nil {
		return opError("list", err)
	}
	return nil
}

// A cursor is the last entry read: its score, a colon, and its member in
// hex (the member is JSON, which a query string would mangle).
func formatCursor(score, member string) string {
	return score + ":" + hex.EncodeToString([]byte(member))
}

func parseCursor(c string) (string, string, error) {
	if c == "" {
		return "-inf", "", nil
	}
	bad := fmt.Errorf("redisstore: list: %w: malformed cursor", idempotency.ErrInvalidRequest)
	sc, hx, ok := strings.Cut(c, ":")
	if !ok || len(c) > 1024 {
		return "", "", bad
	}
	if score, err := strconv.ParseFloat(sc, 64); err != nil || !(score >= 0 && score < 1<<53) {
		return "", "", bad
	}
	member, err := hex.DecodeString(hx)
	if err != nil {
		return "", "", bad
	}
	return sc, string(member), nil
}
