package redisstore

import (
	"strings"
	"testing"
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
	{"redispatch-deny-list", "claim", "(b == 'h' or b == 'p' or b == 'k')", "b ~= 'u'"},
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
}

// TestDiffCatchesBrokenScripts shows that the differential test fails on
// each mutant: the same sequences that pass on the real scripts find a
// disagreement.
func TestDiffCatchesBrokenScripts(t *testing.T) {
	b := newMiniBackend(t)
	for _, m := range diffMutants {
		t.Run(m.name, func(t *testing.T) {
			applied := false
			scripts := buildDiffScripts(b, func(name, src string) string {
				if name != m.script {
					return src
				}
				if strings.Count(src, m.old) != 1 {
					t.Fatalf("%s.lua: %q occurs %d times, want once", m.script, m.old, strings.Count(src, m.old))
				}
				applied = true
				return strings.Replace(src, m.old, m.new, 1)
			})
			if !applied {
				t.Fatalf("no script %s", m.script)
			}
			err := diffSequences(t.Context(), b, scripts, 400, 50, false, nil)
			if err == nil {
				t.Fatalf("the differential test passed on mutant %s", m.name)
			}
			first, _, _ := strings.Cut(err.Error(), "\n")
			t.Logf("caught: %s", first)
		})
	}
}
