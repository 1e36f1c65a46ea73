package redisstore

import (
	"slices"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/internal/redistest"
)

// diffMutants are broken variants of the scripts, each one rule of DESIGN,
// section "The record and its lifecycle", written wrong: script, the text
// replaced, its replacement.
var diffMutants = []struct {
	name, script, old, new string
}{
	// The vendor's window ignores the new attempt's lease.
	{"window-without-lease", "claim", "now + lease < first + window", "now < first + window"},
	// The allow-list of redispatched bindings turned back into a deny-list:
	// a binding the rule does not name is sent twice.
	{"redispatch-deny-list", "claim", "(b == 'h' or b == 'p' or b == 'k' or b == 'm')", "b ~= 'u'"},
	// The meta binding left off the allow-list: its unknown call is never
	// sent again, though the upstream deduplicates on the key.
	{"meta-not-redispatched", "claim", "or b == 'k' or b == 'm')", "or b == 'k')"},
	// A copy of the cycle's claim reserves again after its give-back.
	{"late-copy-reserves", "claim", "if kt == 'g' then\n    return {'outcome_unknown', 1}", "if false then\n    return {'outcome_unknown', 1}"},
	// A re-sent claim answers outcome_unknown over its own open token that
	// another claim's lease-expiry path turned unknown (it must answer the
	// token, so that its re-sender gives it back).
	{"resend-hides-token", "claim", "elseif s == 'u' and not (r.F == nil and r.K == op .. int(n)) then", "elseif s == 'u' then"},
	// Three attempts in one cycle.
	{"three-attempts", "reserve", "if cy >= 2 then", "if cy >= 3 then"},
	// Never sent takes the attempt back from an unknown record too.
	{"never-sent-from-unknown", "finalize", "if never and s == 'f' and sent > 0 then", "if never and sent > 0 then"},
	// A renewal revives a lapsed lease.
	{"renew-revives", "renew", "if l <= now then\n  return {'lease_expired'}", "if false then\n  return {'lease_expired'}"},
	// A give-back leaves K open, so the claim's copy learns the token again.
	{"giveback-keeps-claim", "giveback", "op, cop .. 'g'", "op, cop .. int(token)"},
	// A settle without the attempt-count compare-and-set.
	{"settle-no-cas", "settle", "if n ~= attempts then", "if false then"},
	// A decision on a re-held record approves whatever was asked.
	{"rehold-deny-approves", "decide", "r.a = approve and '1' or '0'", "r.a = '1'"},
	// A finalize keeps the attempt deadline.
	{"finalize-keeps-deadline", "finalize", "r.l, r.y, r.e, r.O, r.U = nil, nil, nil, nil, nil\nr.m, r.F, r.o = with_state(m, state)",
		"r.l, r.y, r.O, r.U = nil, nil, nil, nil\nr.m, r.F, r.o = with_state(m, state)"},
	// A claim that may not create a record creates one anyway.
	{"nocreate-ignored", "claim", "if nocreate then\n    return {'no_record'}", "if false then\n    return {'no_record'}"},
	// A held call is not listed in the pending approvals index; a decided
	// one stays listed.
	{"hold-unlisted", "claim", "redis.call('ZADD', held,", "redis.call('ZADD', held .. 'x',"},
	// A re-held record's entry does not cover what reserve and finalize
	// may add to its TTL: it ends before the record does.
	{"rehold-no-margin", "claim", "life = ttl + 2 * uretention", "life = ttl"},
	// The pending approvals bucket expires before its entries.
	{"pending-bucket-short", "claim", "if redis.call('PEXPIRE', held, life, 'GT') == 0 then", "if redis.call('PEXPIRE', held, 1, 'GT') == 0 then"},
	{"decision-stays-listed", "decide", "redis.call('ZREM', KEYS[3], member)", "redis.call('ZREM', KEYS[3] .. 'x', member)"},
	// A give-back without its n ~= token check: it takes back the cycle's
	// first attempt after its second was reserved.
	{"giveback-no-token-check", "giveback", "r.K ~= cop .. int(token) or n ~= token or", "r.K ~= cop .. int(token) or"},
	// A copy of the claim still answers claimed after the owner's finalize.
	{"copy-after-finalize", "claim", "elseif tonumber(kt) == n and (s == 'f' or (s == 'u' and r.F == nil)) then",
		"elseif tonumber(kt) == n and (s == 'f' or s == 'u') then"},
	// A give-back keeps the record's TTL.
	{"giveback-keeps-ttl", "giveback", "save(r, uretention)", "save(r, nil)"},
	// A re-hold resets the record's TTL.
	{"rehold-resets-ttl", "claim", "held_add(uretention, true) -- at least the record's life (its TTL stays)\n      save(r, nil)",
		"held_add(uretention, true) -- at least the record's life (its TTL stays)\n      save(r, uretention)"},
	// A settle shortens a longer TTL to the retention.
	{"settle-shortens-ttl", "settle", "if ttl >= 0 and ttl < retention then", "if ttl >= 0 then"},
	// The vendor's window off by one: a lease that ends at its end is in.
	{"window-off-by-one", "claim", "now + lease < first + window", "now + lease <= first + window"},
	// No cap on the attempts that may leave.
	{"no-max-attempts", "claim", "if sent >= maxatt then", "if false then"},
	{"no-max-attempts-reserve", "reserve", "if not prev_never and sent >= maxatt then", "if false then"},
	// No backoff between redispatches.
	{"no-backoff", "claim", "if wait > 0 then", "if false then"},
	// A redispatch forgets the replaced attempt's deadline; a settle reads
	// only the current one's.
	{"redispatch-drops-deadline", "claim", "if e > (tonumber(r.E) or 0) then", "if false then"},
	{"settle-ignores-earlier", "settle", "math.max(tonumber(r.e) or 0, tonumber(r.E) or 0)", "(tonumber(r.e) or 0)"},
	// A decide on a final record writes its flag.
	{"decide-writes-final", "decide", "if s == 'a' or s == 'r' then\n  return {'not_found'}", "if false then\n  return {'not_found'}"},
}

// ttlMutants are the mutants the real-Redis variant must catch too (its
// TTLs run on the server's clock; expire moves them with the test's).
var ttlMutants = []string{"giveback-keeps-ttl", "rehold-resets-ttl", "settle-shortens-ttl", "window-off-by-one"}

// TestDiffCatchesBrokenScripts shows that the differential test fails on
// each mutant: the same sequences that pass on the real scripts find a
// disagreement, on miniredis, and for the TTL mutants on a redis-server.
func TestDiffCatchesBrokenScripts(t *testing.T) {
	mini := newMiniBackend(t)
	srv := redistest.Start(t)
	real := &realBackend{c: realClient(t, srv.Addr())}
	for _, m := range diffMutants {
		backends := []diffBackend{mini}
		if slices.Contains(ttlMutants, m.name) {
			backends = append(backends, real)
		}
		for _, b := range backends {
			_, isReal := b.(*realBackend)
			name := m.name
			if isReal {
				name += "/redis"
			}
			t.Run(name, func(t *testing.T) {
				catches(t, b, m.script, m.old, m.new, isReal)
			})
		}
	}
}

// catches runs the directed sequences, then the random ones, on the
// scripts with old replaced by new in the script named script, and fails
// unless they find a disagreement.
func catches(t *testing.T, b diffBackend, script, old, new string, real bool) {
	t.Helper()
	applied := false
	scripts := buildDiffScripts(b, func(name, src string) string {
		if name != script {
			return src
		}
		if strings.Count(src, old) != 1 {
			t.Fatalf("%s.lua: %q occurs %d times, want once", script, old, strings.Count(src, old))
		}
		applied = true
		return strings.Replace(src, old, new, 1)
	})
	if !applied {
		t.Fatalf("no script %s", script)
	}
	err := runDirected(t.Context(), b, scripts, real, nil)
	if err == nil {
		err = diffSequences(t.Context(), b, scripts, 400, 50, real, nil)
	}
	if err == nil {
		t.Fatal("the differential test passed on the mutant")
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	t.Logf("caught: %s", first)
}
