package faultproxy

import (
	"strings"
	"testing"
)

func TestScriptKind(t *testing.T) {
	script := func(key string, argv ...string) []string {
		return append([]string{"EVALSHA", "abc", "2", key, "bucket"}, argv...)
	}
	n := func(k int) []string { return strings.Split(strings.Repeat("x,", k-1)+"x", ",") }
	for _, c := range []struct {
		cmd       []string
		kind, key string
	}{
		{nil, "", ""},
		{[]string{"ping"}, "ping", ""},
		{[]string{"SET", "k", "v", "PX"}, "set", ""},
		{[]string{"EVALSHA", "abc", "1", "rec:1"}, "lookup", "rec:1"},
		{script("rec:1", n(19)...), "claim", "rec:1"},
		{script("rec:1", "tok", "a", "1", "2", "3", "m", "4", "5"), "finalize", "rec:1"},
		{script("rec:1", "tok", "z", "1", "2", "3", "m", "4", "5", "6"), "script?", "rec:1"},
		{script("rec:1", "apt_1", "2", "3", "4", "m", "1"), "decide", "rec:1"},
		{script("rec:1", n(8)...), "reserve", "rec:1"},
		{[]string{"EVAL_RO", "src", "1", "rec:2"}, "lookup", "rec:2"},
		{[]string{"EVALSHA", "abc", "1", "unk:ws", "page", "-inf", "", "5"}, "script?", "unk:ws"},
		{[]string{"EVAL", "src", "3", "a", "b", "c"}, "script?", ""},
		{[]string{"EVAL", "src", "2", "a"}, "script?", ""},
	} {
		if kind, key := ScriptKind(c.cmd); kind != c.kind || key != c.key {
			t.Errorf("ScriptKind(%q) = %q, %q; want %q, %q", c.cmd, kind, key, c.kind, c.key)
		}
	}
}

func TestOnScriptFiresOnce(t *testing.T) {
	r := OnScript("lookup", "abc", HoldReply)
	cmd := []string{"EVALSHA", "sha", "1", "rec:abc:1"}
	if a := r([]string{"EVALSHA", "sha", "1", "rec:zzz"}); a != Pass {
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
