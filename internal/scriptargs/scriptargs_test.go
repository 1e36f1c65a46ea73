package scriptargs

import (
	"slices"
	"strings"
	"testing"
)

func TestArgvFollowsTheStruct(t *testing.T) {
	got := FinalizeSpec.Argv(&Finalize{Token: 3, State: "a", Op: "op", TTL: "60000", Never: true, Member: "m", Incarnation: "i", Result: []string{"200", "0", "b", ""}})
	want := []string{"3", "a", "op", "60000", "1", "m", "i", "200", "0", "b", ""}
	if !slices.Equal(got, want) {
		t.Fatalf("Argv = %q, want %q", got, want)
	}
	if got := RenewSpec.Argv(&Renew{Token: 1, Op: "o", Lease: "5"}); !slices.Equal(got, []string{"1", "o", "5", ""}) {
		t.Fatalf("Argv = %q", got)
	}
	if got := LookupSpec.Argv(&Lookup{}); len(got) != 0 {
		t.Fatalf("lookup Argv = %q", got)
	}
}

func TestPrologue(t *testing.T) {
	want := `-- The arguments of renew (generated from internal/scriptargs; never read ARGV by position).
if #KEYS ~= 1 then
  return redis.error_reply('ERR redisstore: renew takes 1 keys (record), got ' .. #KEYS)
end
if #ARGV ~= 4 then
  return redis.error_reply('ERR redisstore: renew takes 4 arguments, got ' .. #ARGV)
end
local token, op, lease, inc =
  tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3]), ARGV[4]
`
	if got := RenewSpec.Prologue(); got != want {
		t.Fatalf("Prologue:\n%s\nwant:\n%s", got, want)
	}
	p := FinalizeSpec.Prologue()
	if p := ClaimSpec.Prologue(); !strings.Contains(p, "if #KEYS ~= 4 then") || !slices.Equal(ClaimSpec.Keys(), []string{"record", "bucket", "pending", "gen"}) {
		t.Errorf("claim declares keys %q:\n%s", ClaimSpec.Keys(), p)
	}
	for _, s := range []string{"if #KEYS ~= 2 then", "if #ARGV < 7 then", "ARGV[5] == '1'", "ARGV[7], 8\n"} {
		if !strings.Contains(p, s) {
			t.Errorf("finalize Prologue lacks %q:\n%s", s, p)
		}
	}
}

func TestBadSpecsPanic(t *testing.T) {
	for name, f := range map[string]func(){
		"no tag":  func() { newSpec[struct{ A string }]("x", "k") },
		"no keys": func() { newSpec[struct{}]("x") },
		"keyword": func() {
			newSpec[struct {
				A string `lua:"end"`
			}]("x", "k")
		},
		"duplicate": func() {
			newSpec[struct {
				A, B string `lua:"a"`
			}]("x", "k")
		},
		"rest not last": func() {
			newSpec[struct {
				A []string `lua:"a"`
				B string   `lua:"b"`
			}]("x", "k")
		},
		"num bool": func() {
			newSpec[struct {
				A bool `lua:"a,num"`
			}]("x", "k")
		},
		"type": func() {
			newSpec[struct {
				A int64 `lua:"a"`
			}]("x", "k")
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func BenchmarkClaimArgv(b *testing.B) {
	v := &Claim{ScopeVersion: "2", RequestHash: "0123456789abcdef0123456789abcdef", Binding: "h", Route: "route", KeySource: "s",
		Op: "12345678", Lease: "30000", Retention: "86400000", URetention: "604800000", Timeout: 30000, Member: "member", Window: 86400000, Incarnation: "incarnat"}
	b.ReportAllocs()
	for b.Loop() {
		ClaimSpec.Argv(v)
	}
}
