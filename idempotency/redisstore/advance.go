package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
)

// AdvancePhase is where an advance of the fleet's scope version stands.
type AdvancePhase string

const (
	// AdvanceClosing: the old version is marked closing (its gateways stop
	// claiming within a lease); the advance cannot finish before that lease
	// has passed. Run it again after Advance.RetryAfterMS.
	AdvanceClosing AdvancePhase = "closing"
	// AdvanceRecordsLive: live records of the old version remain
	// (Advance.Live); the advance finishes only when none do, or when the
	// caller strands exactly that many (AdvanceRequest.Strand).
	AdvanceRecordsLive AdvancePhase = "records_live"
	// AdvanceMigrating: a Cluster slot is migrating; a SCAN may miss the
	// keys in flight between nodes, so nothing is counted or finished.
	AdvanceMigrating AdvancePhase = "migrating"
	// AdvanceConflict: the key holds neither this build's version, its
	// closing mark, nor the target: another operator or fleet is at work.
	// Nothing was written.
	AdvanceConflict AdvancePhase = "conflict"
	// AdvanceDone: the key holds the new version.
	AdvanceDone AdvancePhase = "advanced"
)

// AdvanceRequest asks AdvanceScope to move the fleet from
// idempotency.ScopeVersion to To.
type AdvanceRequest struct {
	// To is the new version; it must be above idempotency.ScopeVersion.
	To int
	// Strand, when not negative, is the count of live old records that the
	// caller accepts to leave: the Live of an earlier answer. The advance
	// finishes only if the count is still exactly that.
	Strand int
}

// Advance is the answer of AdvanceScope.
type Advance struct {
	Phase AdvancePhase
	From  int
	To    int
	// Live counts the live records of every version but To (unreadable keys
	// under the prefix included); Counts has them by version and state.
	Live   int
	Counts []RecordCount
	// RetryAfterMS is how long until a closing advance can finish.
	RetryAfterMS int64
	// Fleet describes what the key held when the answer is a conflict.
	Fleet string
}

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
func (s *Store) AdvanceScope(ctx context.Context, req AdvanceRequest) (Advance, error) {
	from := idempotency.ScopeVersion
	a := Advance{From: from, To: req.To}
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
		a.Phase = AdvanceDone
		return a, nil
	case v != want && v != closing && !strings.HasPrefix(v, closing+" "):
		a.Phase, a.Fleet = AdvanceConflict, versionText(v)
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
		a.Phase, a.Fleet = AdvanceMigrating, m
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
		a.Phase, a.RetryAfterMS = AdvanceClosing, wait
		return a, nil
	}
	if a.Live > 0 && req.Strand != a.Live {
		a.Phase = AdvanceRecordsLive
		return a, nil
	}
	mark, _ := s.client.Do(ctx, s.client.B().Get().Key(key).Build()).ToString()
	if _, ok := closedSince(mark, closing); !ok {
		a.Phase, a.Fleet = AdvanceConflict, versionText(mark)
		return a, nil
	}
	if err := s.cas(ctx, key, mark, strconv.Itoa(req.To)); err != nil {
		return a, err
	}
	a.Phase = AdvanceDone
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
