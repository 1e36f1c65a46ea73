package faultproxy

import (
	"strings"
	"sync"
)

// ScriptKind names the redisstore script a command runs, by its shape, so
// that a rule can aim at one step of a call without knowing script hashes:
// claim has 19 arguments, finalize at least 8 with an outcome code second,
// decide 6 with an "apt_" first, reserve 8 (each with 2 keys: the record
// and its index bucket), lookup none (1 key). key is the record key
// (KEYS[1]). A command that is not a script is named by its lowercased
// name, with no key; a script of another shape is "script?".
func ScriptKind(cmd []string) (kind, key string) {
	if len(cmd) < 4 {
		if len(cmd) > 0 {
			return strings.ToLower(cmd[0]), ""
		}
		return "", ""
	}
	switch strings.ToUpper(cmd[0]) {
	case "EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO":
	default:
		return strings.ToLower(cmd[0]), ""
	}
	nk := 0
	switch cmd[2] {
	case "1":
		nk = 1
	case "2":
		nk = 2
	}
	if nk == 0 || len(cmd) < 3+nk {
		return "script?", ""
	}
	key, argv := cmd[3], cmd[3+nk:]
	switch {
	case nk == 1 && len(argv) == 0:
		return "lookup", key
	case nk == 1:
	case len(argv) == 19:
		return "claim", key
	case len(argv) >= 8 && (argv[1] == "a" || argv[1] == "r" || argv[1] == "u"):
		return "finalize", key
	case len(argv) == 6 && strings.HasPrefix(argv[0], "apt_"):
		return "decide", key
	case len(argv) == 8:
		return "reserve", key
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
