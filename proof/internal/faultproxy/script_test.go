package faultproxy

import (
	"strings"
	"testing"

	"github.com/obol-gateway/obol/idempotency/redisstore"
)

func TestScriptKind(t *testing.T) {
	sha := map[string]string{}
	for _, s := range redisstore.Scripts() {
		sha[s.Name] = s.SHA1
	}
	src := redisstore.Scripts()[0]
	for _, c := range []struct {
		cmd       []string
		kind, key string
	}{
		{nil, "", ""},
		{[]string{"ping"}, "ping", ""},
		{[]string{"SET", "k", "v", "PX"}, "set", ""},
		{[]string{"EVALSHA", sha["lookup"], "1", "rec:1"}, "lookup", "rec:1"},
		{[]string{"EVALSHA_RO", sha["lookup"], "1", "rec:1"}, "lookup", "rec:1"},
		{[]string{"evalsha", strings.ToUpper(sha["claim"]), "2", "rec:1", "bucket", "x"}, "claim", "rec:1"},
		{[]string{"EVALSHA", sha["finalize"], "2", "rec:1", "bucket"}, "finalize", "rec:1"},
		{[]string{"EVALSHA", sha["index"], "1", "unk:ws", "page", "-inf", "", "5"}, "index", "unk:ws"},
		{[]string{"EVAL", src.Source, "2", "rec:2", "bucket"}, src.Name, "rec:2"},
		{[]string{"EVALSHA", "abc", "2", "rec:1", "bucket"}, "script?", "rec:1"},
		{[]string{"EVAL", "return 1", "0"}, "script?", ""},
		{[]string{"EVALSHA"}, "script?", ""},
	} {
		if kind, key := ScriptKind(c.cmd); kind != c.kind || key != c.key {
			t.Errorf("ScriptKind(%.80q) = %q, %q; want %q, %q", c.cmd, kind, key, c.kind, c.key)
		}
	}
}

func TestOnScriptFiresOnce(t *testing.T) {
	var sha string
	for _, s := range redisstore.Scripts() {
		if s.Name == "lookup" {
			sha = s.SHA1
		}
	}
	r := OnScript("lookup", "abc", HoldReply)
	cmd := []string{"EVALSHA", sha, "1", "rec:abc:1"}
	if a := r([]string{"EVALSHA", sha, "1", "rec:zzz"}); a != Pass {
		t.Errorf("another key: %v", a)
	}
	if a := r([]string{"GET", "rec:abc:1", "x", "y"}); a != Pass {
		t.Errorf("not a script: %v", a)
	}
	if a := r(cmd); a != HoldReply {
		t.Errorf("first hit: %v, want hold_reply", a)
	}
	if a := r(cmd); a != Pass {
		t.Errorf("second hit: %v, want pass", a)
	}
}
