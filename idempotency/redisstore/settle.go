package redisstore

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/internal/storelimits"
	"github.com/obol-gateway/obol/internal/storereply"
)

var _ idempotency.Settler = (*Store)(nil)

// indexKey is the previous release's per-workspace index (see ListUnknown).
func (s *Store) indexKey(workspace string) string { return s.prefix + "unk:" + workspace }

// bucketKey is the index bucket of the workspace in slot.
func (s *Store) bucketKey(workspace string, slot int) string {
	return bucketBase(s.prefix, workspace) + slotTags()[slot] + "}"
}

// bucketBase is a workspace's index buckets' key up to the slot's tag.
func bucketBase(prefix, workspace string) string { return prefix + "unk:" + workspace + ":{" }

// bucketOf is the index bucket of the record at record key rk.
func (s *Store) bucketOf(workspace, rk string) string {
	return s.bucketKey(workspace, keySlot(rk))
}

// listKey is the key of listing position pos: 0 is the previous release's
// per-workspace key, 1 + slot the bucket of slot.
func (s *Store) listKey(workspace string, pos int) string {
	if pos == 0 {
		return s.indexKey(workspace)
	}
	return s.bucketKey(workspace, pos-1)
}

// listPositions is the number of listing positions: the old key and a
// bucket per slot.
const listPositions = 1 + clusterSlots

// indexMember names a record in its workspace's index: enough to derive its
// storage key again and to settle it (the tool by name, not by hash).
type indexMember struct {
	Connection string `json:"c,omitempty"`
	Tool       string `json:"t"`
	Key        string `json:"k"`
}

// indexEntry is the bucket and member of the record at rk, which the
// scripts that reserve an attempt or make it final get as KEYS[2] and an
// argument: from the scope's cached strings, as a claim's.
func (s *Store) indexEntry(scope idempotency.Scope, key idempotency.Key, rk string) (bucket, member string, err error) {
	_, ss, err := s.storageKey(scope, key)
	if err != nil {
		return "", "", fmt.Errorf("redisstore: unknown index: %w", err)
	}
	return ss.bucket(keySlot(rk)), ss.member(key), nil
}

// opEntry is the operation id opID (a new one when empty) and the index
// entry of the record at rk, as the scripts that reserve an attempt or make
// it final take them.
func (s *Store) opEntry(opID string, scope idempotency.Scope, key idempotency.Key, rk string) (op, bucket, member string, err error) {
	if op, err = validOpID(opID); err != nil {
		return "", "", "", err
	}
	bucket, member, err = s.indexEntry(scope, key, rk)
	return op, bucket, member, err
}

// Settle settles an unknown record ([idempotency.Settler]): one script on
// the record and its index bucket. A record whose attempt may still be
// running at its gateway (it still has an attempt deadline: in flight
// under a lapsed lease, or turned unknown by the lease-expiry path) is
// refused until that deadline plus the lease, by the Redis clock, with an
// *[idempotency.AttemptRunningError]; a record of another scope version with
// [idempotency.ErrScopeVersionConflict].
func (s *Store) Settle(ctx context.Context, req idempotency.SettleRequest) (idempotency.Record, error) {
	rk, err := req.Scope.StorageKey(s.prefix, req.Key)
	if err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: settle: %w", err)
	}
	if err := req.Validate(); err != nil {
		return idempotency.Record{}, fmt.Errorf("redisstore: %w", err)
	}
	op, bucket, member, err := s.opEntry(req.OpID, req.Scope, req.Key, rk)
	if err != nil {
		return idempotency.Record{}, err
	}
	// The settle margin is one lease: an owner finalizes within it of its
	// attempt's end (retry.Orchestrator).
	result := encodeResult(req.Result, s.maxResult)
	args := scriptargs.SettleSpec.Argv(&scriptargs.Settle{Attempts: req.Attempts, State: stateCodes[req.Outcome], Op: opTag('s', op),
		Retention: s.retention, By: req.By, Note: req.Note, Member: member, Margin: s.lease, ScopeVersion: scopeVersion,
		Result: result})
	arr, _, st, err := s.runStatus(ctx, "settle", s.sc.settle, []string{rk, bucket}, args, false)
	if err != nil {
		return idempotency.Record{}, err
	}
	switch st {
	case storereply.NotFound:
		return idempotency.Record{}, fmt.Errorf("redisstore: settle: %w", idempotency.ErrNotFound)
	case storereply.NotUnknown:
		return idempotency.Record{}, fmt.Errorf("redisstore: settle: %w", idempotency.ErrNotUnknown)
	case storereply.Stale:
		return idempotency.Record{}, fmt.Errorf("redisstore: settle: the record had another attempt since: %w", idempotency.ErrStale)
	case idempotency.StatusScopeVersionConflict:
		return idempotency.Record{}, fmt.Errorf("redisstore: settle: %w", idempotency.ErrScopeVersionConflict)
	case idempotency.StatusInProgress:
		if len(arr) < 3 {
			return idempotency.Record{}, opError("settle", errors.New("short settle reply"))
		}
		at, err1 := arr[1].AsInt64()
		now, err2 := arr[2].AsInt64()
		if err := errors.Join(err1, err2); err != nil {
			return idempotency.Record{}, opError("settle", err)
		}
		return idempotency.Record{}, fmt.Errorf("redisstore: %w", &idempotency.AttemptRunningError{
			SettleAfter: msTime(at), RetryAfter: time.Duration(at-now) * time.Millisecond})
	case storereply.Settled:
		rec, err := storedRecord("settle", req.Scope, req.Key, arr)
		if err == nil && !applied(arr, 2) {
			// A settle never shortens the TTL: counted as long as the
			// longest a record lives after a change.
			s.accountResult(req.Scope.Workspace, s.uretention, result)
		}
		return rec, err
	}
	return idempotency.Record{}, opError("settle", fmt.Errorf("unexpected reply %q", st))
}

// ListUnknown lists a workspace's unknown records ([idempotency.Settler]).
//
// The unknown index (docs/DESIGN.md, "The record and its lifecycle",
// "Listing"): per workspace, one sorted set per Cluster slot, the bucket
// {prefix}unk:{workspace}:{T}, where the hash tag T (slotTags) puts the bucket
// in the slot of the records it indexes; member indexMember, score the record's
// expiry in ms. So the record scripts maintain it themselves, atomically with
// the record (common.lua): a reservation (claim answering claimed, reserve)
// adds the entry and prunes expired ones before the caller may send, so an
// attempt is only ever sent indexed; a record that becomes final (finalize
// accepted or definitely_rejected, settle, deny) loses its entry in the same
// script, so a final record has no entry. Nothing else writes the index: a
// replay, in_progress, held, a refusal or a stale finalize leave it as it is; a
// record that stays or turns unknown keeps its entry, whose score follows the
// record's expiry. The record stays the truth: the index may hold entries of
// records that are gone (expired with their entry's score not yet passed) or
// live, which listing skips and drops.
//
// The listing order is the previous release's per-workspace key first,
// then the buckets by slot, each by (score, member), that is by expiry
// within a bucket. It reads listBatch (512) buckets per pipelined round
// trip (on a Cluster, rueidis sends each read to its slot's node), then
// each entry's record; an entry whose record is gone, final or denied is
// dropped. One call reads at most maxScan entries: past that it returns a
// short page and a cursor. The cursor is a position (the last entry read,
// or the start of a bucket): an entry whose score rises past it (a new
// reservation) may be listed again. An empty workspace costs
// listPositions/listBatch round trips.
//
// A previous release kept one sorted set per workspace at
// {prefix}unk:{workspace} (another slot than the records). The listing
// reads it as the first bucket until it is empty, so an upgrade loses no
// unknown record; nothing writes it any more. An entry there whose record
// is indexed in its bucket too is dropped from it, so that no record is
// listed twice.
func (s *Store) ListUnknown(ctx context.Context, req idempotency.ListRequest) (idempotency.UnknownPage, error) {
	// The workspace is checked as a scope's: it names the index keys.
	if err := (idempotency.Scope{Workspace: req.Workspace, Tool: "-", Connection: "-"}).Validate(); err != nil {
		return idempotency.UnknownPage{}, fmt.Errorf("redisstore: list: %w", err)
	}
	cur, err := parseCursor(req.Cursor)
	if err != nil {
		return idempotency.UnknownPage{}, err
	}
	records, next, err := listPage(ctx, s, s.listKey, req.Workspace, cur, storelimits.PageLimit(req.Limit), s.listed)
	if err != nil {
		return idempotency.UnknownPage{}, err
	}
	return idempotency.UnknownPage{Records: records, Cursor: next}, nil
}

// listPage reads one page of a listing from cur on: up to limit items of
// the buckets key names, each chunk of entries read by read; next is the
// cursor of the page that follows, "" at the end.
func listPage[T any](ctx context.Context, s *Store, key func(workspace string, pos int) string, workspace string, cur listCursor, limit int,
	read func(ctx context.Context, workspace string, entries []listCursor) ([]T, error)) (items []T, next string, err error) {
	for scanned := 0; cur.pos < listPositions; {
		if scanned >= maxScan {
			return items, cur.String(), nil
		}
		// One entry more than the page needs tells whether a cursor is due.
		entries, after, err := s.readBuckets(ctx, key, workspace, cur, limit+1-len(items))
		if err != nil {
			return nil, "", err
		}
		for len(entries) > 0 {
			if len(items) == limit {
				return items, cur.String(), nil
			}
			// No more entries than the page has room for: their records
			// are read in one pipeline.
			chunk := entries[:min(len(entries), limit-len(items))]
			entries = entries[len(chunk):]
			listed, err := read(ctx, workspace, chunk)
			if err != nil {
				return nil, "", err
			}
			items = append(items, listed...)
			cur = chunk[len(chunk)-1]
			scanned += len(chunk)
		}
		cur = after
	}
	return items, "", nil
}

// maxScan bounds the index entries one page of a listing reads.
const maxScan = 10 * idempotency.MaxPageSize

// listBatch is the number of buckets one pipeline of the listing reads.
const listBatch = 512

// listCursor is a listing position: the entry (score, member) of position
// pos when mid, else the start of position pos.
type listCursor struct {
	pos           int
	mid           bool
	score, member string
}

// readBuckets reads, from cur on, in the buckets key names (the unknown
// index or the pending approvals), up to want entries of each position of one
// batch, in listing order, and the position that follows them. A position
// that may hold more than it gave ends the read: the next one resumes after
// its last entry.
func (s *Store) readBuckets(ctx context.Context, key func(workspace string, pos int) string, workspace string, cur listCursor, want int) ([]listCursor, listCursor, error) {
	rctx, cancel := s.readCtx(ctx)
	defer cancel()
	var out []listCursor
	if cur.mid {
		arr, _, err := s.exec(rctx, s.sc.index, key(workspace, cur.pos), scriptargs.IndexSpec.Argv(&scriptargs.Index{Op: "page", Score: cur.score, Member: cur.member, Count: want}), false)
		if err != nil {
			return nil, cur, opError("list", err)
		}
		if len(arr)%2 != 0 {
			return nil, cur, opError("list", errors.New("odd page reply"))
		}
		for i := 0; i < len(arr); i += 2 {
			member, err1 := arr[i].ToString()
			score, err2 := arr[i+1].ToString()
			if err := errors.Join(err1, err2); err != nil {
				return nil, cur, opError("list", err)
			}
			out = append(out, listCursor{pos: cur.pos, mid: true, score: score, member: member})
		}
		if len(out) == want {
			return out, out[len(out)-1], nil
		}
		return out, listCursor{pos: cur.pos + 1}, nil
	}
	end := min(cur.pos+listBatch, listPositions)
	cmds := make(rueidis.Commands, 0, end-cur.pos)
	for p := cur.pos; p < end; p++ {
		cmds = append(cmds, s.client.B().Zrange().Key(key(workspace, p)).Min("-inf").Max("+inf").Byscore().
			Limit(0, int64(want)).Withscores().Build())
	}
	for i, r := range s.client.DoMulti(rctx, cmds...) {
		zs, err := r.AsZScores()
		if err != nil {
			return nil, cur, opError("list", err)
		}
		for _, z := range zs {
			out = append(out, listCursor{pos: cur.pos + i, mid: true, score: strconv.FormatFloat(z.Score, 'f', -1, 64), member: z.Member})
		}
		if len(zs) == want {
			return out, out[len(out)-1], nil
		}
	}
	return out, listCursor{pos: end}, nil
}

// entryRecord is the scope, key and record key an index entry of
// workspace names; an error when its member does not name a valid record.
func (s *Store) entryRecord(workspace string, e listCursor) (scope idempotency.Scope, key idempotency.Key, rk string, err error) {
	var m indexMember
	if err := json.Unmarshal([]byte(e.member), &m); err != nil {
		return scope, key, "", err
	}
	if key, err = idempotency.ParseKey(m.Key); err != nil {
		return scope, key, "", err
	}
	scope = idempotency.Scope{Workspace: workspace, Connection: m.Connection, Tool: m.Tool}
	rk, err = scope.StorageKey(s.prefix, key)
	return scope, key, rk, err
}

// listed reads the records of index entries (in one pipeline) and returns
// those unknown now, in order; it drops the entries whose record can never
// be listed again.
func (s *Store) listed(ctx context.Context, workspace string, entries []listCursor) ([]idempotency.UnknownRecord, error) {
	type item struct {
		e     listCursor
		scope idempotency.Scope
		key   idempotency.Key
		rk    string
	}
	items := make([]item, 0, len(entries))
	for _, e := range entries {
		scope, k, rk, err := s.entryRecord(workspace, e)
		if err != nil {
			if err := s.drop(ctx, workspace, e); err != nil {
				return nil, err
			}
			continue
		}
		if e.pos == 0 {
			// The previous release's key: a record that a reservation
			// since indexed in its bucket is listed from there.
			rctx, cancel := s.readCtx(ctx)
			err := s.client.Do(rctx, s.client.B().Zscore().Key(s.bucketOf(workspace, rk)).Member(e.member).Build()).Error()
			cancel()
			switch {
			case err == nil:
				if err := s.drop(ctx, workspace, e); err != nil {
					return nil, err
				}
				continue
			case !rueidis.IsRedisNil(err):
				return nil, opError("list", err)
			}
		}
		items = append(items, item{e, scope, k, rk})
	}
	if len(items) == 0 {
		return nil, nil
	}
	cmds := make(rueidis.Commands, len(items))
	for i, it := range items {
		if s.noTimeInRO.Load() {
			cmds[i] = s.client.B().Evalsha().Sha1(s.sc.lookup.sha).Numkeys(1).Key(it.rk).Build()
		} else {
			cmds[i] = s.client.B().EvalshaRo().Sha1(s.sc.lookup.sha).Numkeys(1).Key(it.rk).Build()
		}
	}
	rctx, cancel := s.readCtx(ctx)
	res := s.client.DoMulti(rctx, cmds...)
	cancel()
	var out []idempotency.UnknownRecord
	for i, it := range items {
		var rec idempotency.Record
		var nowMS int64
		arr, err := res[i].ToArray()
		if err == nil {
			rec, err = parseLookup(it.scope, it.key, arr)
			if len(arr) > 1 {
				nowMS, _ = arr[1].AsInt64()
			}
		} else {
			// NOSCRIPT, a server that refuses TIME in EVALSHA_RO, or a
			// failure: Lookup handles each on its own.
			rec, nowMS, err = s.lookupAt(ctx, it.scope, it.key)
		}
		switch {
		case errors.Is(err, idempotency.ErrNotFound), err == nil && (rec.State.Final() || rec.State == effectspec.Denied):
			if err := s.drop(ctx, workspace, it.e); err != nil {
				return nil, err
			}
			continue
		case err != nil:
			return nil, err
		case rec.State != effectspec.Unknown:
			continue
		}
		if rec.Result != nil {
			rec.Result.Body = nil
		}
		u := idempotency.UnknownRecord{Scope: it.scope, Record: rec}
		if runs := latest(rec.AttemptDeadline, rec.EarlierDeadline); !runs.IsZero() {
			// An attempt may still run (the current one, or an earlier
			// one a redispatch replaced): Settle refuses until then.
			if at := runs.Add(s.leaseD); at.UnixMilli() >= nowMS {
				u.SettleAfter = at
			}
		}
		out = append(out, u)
	}
	return out, nil
}

// drop removes an entry the listing read, if its score is still the one
// read.
func (s *Store) drop(ctx context.Context, workspace string, e listCursor) error {
	if _, _, err := s.exec(ctx, s.sc.index, s.listKey(workspace, e.pos), scriptargs.IndexSpec.Argv(&scriptargs.Index{Op: "drop", Score: e.score, Member: e.member}), false); err != nil {
		return opError("list", err)
	}
	return nil
}

// A cursor is a listing position: "pos" for the start of position pos, or
// "pos:score:member in hex" for an entry read (the member is JSON, which a
// query string would mangle). A cursor of the previous release,
// "score:member in hex", was a position in its per-workspace key: pos 0.
func (c listCursor) String() string {
	if !c.mid {
		return strconv.Itoa(c.pos)
	}
	return strconv.Itoa(c.pos) + ":" + c.score + ":" + hex.EncodeToString([]byte(c.member))
}

func parseCursor(c string) (listCursor, error) {
	if c == "" {
		return listCursor{}, nil
	}
	bad := fmt.Errorf("redisstore: list: %w: malformed cursor", idempotency.ErrInvalidRequest)
	if len(c) > 1024 {
		return listCursor{}, bad
	}
	parts := strings.Split(c, ":")
	var cur listCursor
	switch len(parts) {
	case 1:
		pos, err := strconv.Atoi(parts[0])
		if err != nil || pos < 0 || pos >= listPositions || parts[0] != strconv.Itoa(pos) {
			return listCursor{}, bad
		}
		return listCursor{pos: pos}, nil
	case 2:
		parts = append([]string{"0"}, parts...)
	case 3:
	default:
		return listCursor{}, bad
	}
	pos, err := strconv.Atoi(parts[0])
	if err != nil || pos < 0 || pos >= listPositions || parts[0] != strconv.Itoa(pos) {
		return listCursor{}, bad
	}
	if score, err := strconv.ParseFloat(parts[1], 64); err != nil || !(score >= 0 && score < 1<<53) {
		return listCursor{}, bad
	}
	member, err := hex.DecodeString(parts[2])
	if err != nil {
		return listCursor{}, bad
	}
	cur = listCursor{pos: pos, mid: true, score: parts[1], member: string(member)}
	return cur, nil
}

// latest is the later of two times (a zero one is none).
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
