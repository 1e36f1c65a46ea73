package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
)

// advanceCAS sets KEYS[1] to ARGV[2] only if it holds ARGV[1].
const advanceCAS = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('SET', KEYS[1], ARGV[2]) return 1 end return 0`

// closingMark is the value that closes version v since Redis time ms: any
// value but a gateway's own version stops its claims (scopeCheck).
func closingMark(v int, ms int64) string {
	return strconv.Itoa(v) + " closing " + strconv.FormatInt(ms, 10)
}

// AdvanceScope is one step of the two-phase advance of the fleet's scope
// version (docs/DESIGN.md, "The record and its lifecycle", "Scope
// version"). Its first run marks this build's version closing (so every
// gateway of it stops claiming within a lease) and counts; a later run,
// once a lease has passed since the mark, counts again and sets the new
// version when no live record of another version is left, or when the
// caller strands exactly the count it saw. It never deletes a record, and
// it refuses while a Cluster slot migrates. Repeating it after it finished
// answers AdvanceDone.
func (s *Store) AdvanceScope(ctx context.Context, req idempotency.AdvanceRequest) (idempotency.Advance, error) {
	from := idempotency.ScopeVersion
	a := idempotency.Advance{From: from, To: req.To}
	if req.To <= from {
		return a, fmt.Errorf("%w: advance to %d: the new version must be above %d", ErrInvalidConfig, req.To, from)
	}
	key := scopeVersionKey(s.prefix)
	v, err := s.client.Do(ctx, s.client.B().Get().Key(key).Build()).ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return a, opError("advance", err)
	}
	want, closing := strconv.Itoa(from), strconv.Itoa(from)+" closing"
	switch {
	case v == strconv.Itoa(req.To):
		a.Phase = idempotency.AdvanceDone
		return a, nil
	case v != want && v != closing && !strings.HasPrefix(v, closing+" "):
		a.Phase, a.Fleet = idempotency.AdvanceConflict, versionText(v)
		if rueidis.IsRedisNil(err) {
			a.Fleet = "nothing"
		}
		return a, nil
	}
	now, err := redisTime(ctx, s.client)
	if err != nil {
		return a, opError("advance", err)
	}
	since, ok := closedSince(v, closing)
	if !ok {
		// Not closed yet, or closed by hand without a time: (re)mark it now.
		if err := s.cas(ctx, key, v, closingMark(from, now)); err != nil {
			return a, err
		}
		since = now
	}
	if m, err := migrating(ctx, s.client); err != nil {
		return a, opError("advance", err)
	} else if m != "" {
		a.Phase, a.Fleet = idempotency.AdvanceMigrating, m
		return a, nil
	}
	counts, err := CountRecords(ctx, s.client, CountOptions{Prefix: s.prefix})
	if err != nil {
		return a, opError("advance", err)
	}
	a.Counts = counts
	for _, c := range counts {
		if c.Version != req.To || c.State == "" {
			a.Live += c.Records
		}
	}
	if wait := since + s.leaseD.Milliseconds() - now; wait > 0 {
		a.Phase, a.RetryAfterMS = idempotency.AdvanceClosing, wait
		return a, nil
	}
	if a.Live > 0 && req.Strand != a.Live {
		a.Phase = idempotency.AdvanceRecordsLive
		return a, nil
	}
	mark, _ := s.client.Do(ctx, s.client.B().Get().Key(key).Build()).ToString()
	if _, ok := closedSince(mark, closing); !ok {
		a.Phase, a.Fleet = idempotency.AdvanceConflict, versionText(mark)
		return a, nil
	}
	if err := s.cas(ctx, key, mark, strconv.Itoa(req.To)); err != nil {
		return a, err
	}
	a.Phase = idempotency.AdvanceDone
	return a, nil
}

// closedSince reads the Redis time of a closing mark.
func closedSince(v, closing string) (int64, bool) {
	rest, ok := strings.CutPrefix(v, closing+" ")
	if !ok {
		return 0, false
	}
	ms, err := strconv.ParseInt(rest, 10, 64)
	return ms, err == nil && ms > 0
}

// cas sets key from old to next; a key that changed meanwhile is a conflict.
func (s *Store) cas(ctx context.Context, key, old, next string) error {
	n, err := s.client.Do(ctx, s.client.B().Eval().Script(advanceCAS).Numkeys(1).Key(key).Arg(old, next).Build()).AsInt64()
	if err != nil {
		return opError("advance", err)
	}
	if n != 1 {
		return opError("advance", fmt.Errorf("%s changed while the advance ran; run it again", key))
	}
	return nil
}

// migrating names a Cluster slot that a master is migrating or importing
// ("" when none, and on a Redis that is not a Cluster). Only a node's own
// line of CLUSTER NODES shows its migrations.
func migrating(ctx context.Context, client rueidis.Client) (string, error) {
	for _, n := range masters(ctx, client) {
		txt, err := n.Do(ctx, n.B().ClusterNodes().Build()).ToString()
		if err != nil {
			if strings.Contains(err.Error(), "cluster support disabled") || strings.Contains(strings.ToLower(err.Error()), "unknown") {
				return "", nil // not a Cluster
			}
			return "", fmt.Errorf("CLUSTER NODES on %s: %w", n.addr, err)
		}
		for _, line := range strings.Split(txt, "\n") {
			f := strings.Fields(line)
			if len(f) < 3 || !strings.Contains(f[2], "myself") {
				continue
			}
			for _, slot := range f[min(8, len(f)):] {
				if strings.HasPrefix(slot, "[") {
					return "slot " + strings.Trim(slot, "[]") + " on " + n.addr, nil
				}
			}
		}
	}
	return "", nil
}
