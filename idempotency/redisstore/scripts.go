package redisstore

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
)

//go:embed lua/*.lua
var luaFS embed.FS

// script is one embedded Lua script, sent as EVALSHA with an EVAL fallback
// on NOSCRIPT. rueidis re-sends a command by itself only when it is
// read-only or marked retryable, after a network error (and then until ctx
// ends: see [Options.ReadTimeout]), on MOVED/ASK redirects (the redirecting
// node did not run it), and when ClientOption.ConnLifetime expires a
// connection (see [New]). Mutating scripts are therefore plain
// [rueidis.NewLuaScript] scripts, never a Retryable or NoSha variant: a write
// whose reply was lost comes back as an error ([idempotency.ErrStoreUnavailable]), never silently
// a second time. A TRYAGAIN (a migrating slot: Redis ran
// nothing) is re-sent by the store itself, bounded ([Store].execKeys).
type script struct {
	src string
	sha string
	lua *rueidis.Lua
	// rw runs a read-only script with plain EVALSHA, for servers that refuse
	// TIME inside EVALSHA_RO (miniredis does; Redis 7 does not).
	rw *rueidis.Lua
}

// scriptSource is the source of the script name as the [Store] sends it:
// lua/common.lua unless alone (a script that reads no record, the index,
// skips the shared chunk, which every call runs), then the prologue
// generated from the script's arguments (internal/scriptargs), then
// lua/name.lua, whose body reads its arguments by name only. A script whose
// last key is its slot's generation sentinel (claim, reserve) has its body
// wrapped in gen_wrap (lua/common.lua).
func scriptSource(name string, alone bool) string {
	body, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("redisstore: " + err.Error()) // embedded at build time
	}
	args := scriptargs.Of(name)
	if args == nil {
		panic("redisstore: script " + name + " has no arguments in internal/scriptargs")
	}
	src := args.Prologue() + string(body)
	if keys := args.Keys(); keys[len(keys)-1] == "gen" {
		// Store amnesia: the body runs inside gen_wrap (lua/common.lua),
		// which checks the slot's generation sentinel, moves it on after a
		// reservation and returns it beside the body's reply.
		src = fmt.Sprintf("%sreturn gen_wrap(KEYS[%d], gen, function()\n%s\nend)\n", args.Prologue(), len(keys), body)
	}
	if !alone {
		common, err := luaFS.ReadFile("lua/common.lua")
		if err != nil {
			panic("redisstore: " + err.Error())
		}
		src = string(common) + "\n" + src
	}
	return src
}

// loadScript makes the script name (scriptSource) runnable.
func loadScript(name string, readOnly, alone bool) *script {
	src := scriptSource(name, alone)
	sum := sha1.Sum([]byte(src))
	s := &script{src: src, sha: hex.EncodeToString(sum[:])}
	if readOnly {
		// EVALSHA_RO: rueidis may retry it after a network error, which is
		// harmless for a script that cannot write.
		s.lua = rueidis.NewLuaScriptReadOnly(src)
		s.rw = rueidis.NewLuaScript(src)
	} else {
		s.lua = rueidis.NewLuaScript(src)
	}
	return s
}

// scripts are parsed once per [Store]; they are immutable after [New].
type scripts struct {
	claim, reserve, renew, finalize, lookup, decide, settle, index *script
	giveback                                                       *script
	quota, account, storedBytes                                    *script
}

func newScripts() scripts {
	return scripts{
		claim:    loadScript("claim", false, false),
		reserve:  loadScript("reserve", false, false),
		renew:    loadScript("renew", false, false),
		finalize: loadScript("finalize", false, false),
		lookup:   loadScript("lookup", true, false),
		decide:   loadScript("decide", false, false),
		settle:   loadScript("settle", false, false),
		index:    loadScript("index", false, true),
		giveback: loadScript("giveback", false, false),
		// The quota scripts (quota.go) read no record.
		quota:       loadScript("quota", false, true),
		account:     loadScript("account", false, true),
		storedBytes: loadScript("storedbytes", false, true),
	}
}

// ScriptInfo is one of the Lua scripts a [Store] runs, as it sends them.
type ScriptInfo struct {
	Name   string // "claim", "reserve", "renew", "finalize", "lookup", "decide", "settle", "index", "giveback", "quota", "account", "storedbytes"
	SHA1   string // hex, as EVALSHA sends it
	Source string // as EVAL sends it
}

// Scripts lists the scripts a [Store] of this build runs, for tools that
// watch or replay its commands (a fault-injecting proxy, a load generator,
// a MONITOR reader): they recognize a script by its SHA1, never by its
// arguments, whose layout is internal and changes with the SHA.
func Scripts() []ScriptInfo {
	sc := newScripts()
	out := make([]ScriptInfo, 0, 12)
	for _, s := range []struct {
		name string
		sc   *script
	}{{"claim", sc.claim}, {"reserve", sc.reserve}, {"renew", sc.renew}, {"finalize", sc.finalize}, {"lookup", sc.lookup},
		{"decide", sc.decide}, {"settle", sc.settle}, {"index", sc.index}, {"giveback", sc.giveback},
		{"quota", sc.quota}, {"account", sc.account}, {"storedbytes", sc.storedBytes}} {
		out = append(out, ScriptInfo{Name: s.name, SHA1: s.sc.sha, Source: s.sc.src})
	}
	return out
}

// scopeVersion is [idempotency.ScopeVersion] as the scripts compare it with a
// record's (w).
var scopeVersion = strconv.Itoa(idempotency.ScopeVersion)
