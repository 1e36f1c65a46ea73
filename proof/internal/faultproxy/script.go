package faultproxy

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"

	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// storeScripts names redisstore's scripts by their SHA1, as this build's
// Store sends them (redisstore.Scripts).
var storeScripts = func() map[string]string {
	m := map[string]string{}
	for _, s := range redisstore.Scripts() {
		m[s.SHA1] = s.Name
	}
	return m
}()

// ScriptKind names the redisstore script a command runs ("claim",
// "reserve", "renew", "finalize", "lookup", "decide", "settle", "index",
// "giveback", "quota", "account", "storedbytes"), so that a rule can aim at one step of a call without knowing
// script hashes. It recognizes the script by its SHA1 (EVALSHA's, or that
// of EVAL's source) among those of redisstore.Scripts, never by its
// arguments. key is KEYS[1] (the record key; the index bucket for index).
// A command that is not a script is named by its lowercased name, with no
// key; another script is "script?".
func ScriptKind(cmd []string) (kind, key string) {
	if len(cmd) == 0 {
		return "", ""
	}
	var sha string
	switch strings.ToUpper(cmd[0]) {
	case "EVALSHA", "EVALSHA_RO":
		if len(cmd) > 1 {
			sha = strings.ToLower(cmd[1])
		}
	case "EVAL", "EVAL_RO":
		if len(cmd) > 1 {
			sum := sha1.Sum([]byte(cmd[1]))
			sha = hex.EncodeToString(sum[:])
		}
	default:
		return strings.ToLower(cmd[0]), ""
	}
	if len(cmd) > 3 && cmd[2] != "0" {
		key = cmd[3]
	}
	if name, ok := storeScripts[sha]; ok {
		return name, key
	}
	return "script?", key
}

// OnScript returns a rule that applies a to the first command running the
// script kind on a record key containing sub, and passes everything else,
// the same script on the same key included (a re-send gets through).
func OnScript(kind, sub string, a Action) Rule {
	var once sync.Once
	return func(cmd []string) Action {
		k, key := ScriptKind(cmd)
		hit := Pass
		if k == kind && strings.Contains(key, sub) {
			once.Do(func() { hit = a })
		}
		return hit
	}
}
