package main

import (
	"strings"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
)

// The limit server's calls each get a bucket of their own, as refserver's
// do (one per cluster slot of a random key), and only the keys change.
func TestSlotBucket(t *testing.T) {
	const bucket = "obol:unk:ws_bench:{abc}"
	seen := map[string]bool{}
	for range 200 {
		b := slotBucket(bucket, idempotency.NewKey().String())
		if !strings.HasPrefix(b, "obol:unk:ws_bench:{") || !strings.HasSuffix(b, "}") || b == bucket {
			t.Fatalf("bucket %q", b)
		}
		seen[b] = true
	}
	if len(seen) < 190 {
		t.Errorf("200 keys fell in %d buckets", len(seen))
	}
	if got := slotBucket("obol:unk:ws_bench", "idt_00000000000000000000000000000001"); got != "obol:unk:ws_bench" {
		t.Errorf("a key without a tag became %q", got)
	}
	const oldKey, newKey = "idt_00000000000000000000000000000001", "idt_0000000000000000000000000000abcd"
	tp := template{cmd: []string{"EVALSHA", "sha", "3", "rec:" + oldKey, "b:{x}", "p:{y}", "arg{z}", "op", "inc", "m-" + oldKey}, op: 7, vk: -1, inc: 8, memb: 9}
	cmd := tp.args("rec:"+newKey, oldKey, newKey, "inc2")
	if cmd[3] != "rec:"+newKey || cmd[4] != "b:{11213}" || cmd[5] != "p:{11213}" || cmd[6] != "arg{z}" || cmd[8] != "inc2" || cmd[9] != "m-"+newKey {
		t.Errorf("built %q", cmd)
	}
}
