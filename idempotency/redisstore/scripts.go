package redisstore

import (
	"crypto/sha1"
	"embed"
	"encoding/hex"

	"github.com/redis/rueidis"
)

//go:embed lua/*.lua
var luaFS embed.FS

// script is one embedded Lua script, sent as EVALSHA with an EVAL fallback
// on NOSCRIPT. rueidis re-sends a command by itself only when it is
// read-only or marked retryable, after a network error (and then until ctx
// ends: see Options.ReadTimeout), on MOVED/ASK redirects (the redirecting
// node did not run it), and when ClientOption.ConnLifetime expires a
// connection (see New). Mutating scripts are therefore plain
// rueidis.NewLuaScript scripts, never a Retryable or NoSha variant: a write
// whose reply was lost comes back as an error (an *OpError), never silently
// a second time.
type script struct {
	src string
	sha string
	lua *rueidis.Lua
	// rw runs a read-only script with plain EVALSHA, for servers that refuse
	// TIME inside EVALSHA_RO (miniredis does; Redis 7 does not).
	rw *rueidis.Lua
}

// loadScript reads lua/name.lua, after lua/common.lua unless alone: a
// script that reads no record (the index) skips the shared chunk, which
// every call runs.
func loadScript(name string, readOnly, alone bool) *script {
	body, err := luaFS.ReadFile("lua/" + name + ".lua")
	if err != nil {
		panic("redisstore: " + err.Error()) // embedded at build time
	}
	src := string(body)
	if !alone {
		common, err := luaFS.ReadFile("lua/common.lua")
		if err != nil {
			panic("redisstore: " + err.Error())
		}
		src = string(common) + "\n" + src
	}
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

// scripts are parsed once per Store; they are immutable after New.
type scripts struct {
	claim, reserve, renew, finalize, lookup, decide, settle, index *script
	giveback                                                       *script
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
	}
}
