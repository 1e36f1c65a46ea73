package redisstore

import (
	"regexp"
	"strconv"
	"testing"
)

// TestReplyLayout checks that reply.go reads the claimed and reserved
// replies at the positions lua/common.lua names.
func TestReplyLayout(t *testing.T) {
	src, err := luaFS.ReadFile("lua/common.lua")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]int{
		"CLAIMED": {"token": claimedToken, "lease": claimedLease, "applied": claimedApplied, "vk": claimedVendorKey,
			"deadline": claimedDeadline, "inc": claimedIncarnation, "moved": claimedMoved},
		"RESERVED": {"token": reservedToken, "lease": reservedLease, "deadline": reservedDeadline, "applied": reservedApplied},
	}
	field := regexp.MustCompile(`(\w+) = (\d+)`)
	for name, fields := range want {
		m := regexp.MustCompile(`(?m)^local ` + name + ` = \{([^}]*)\}$`).FindSubmatch(src)
		if m == nil {
			t.Fatalf("lua/common.lua declares no %s layout", name)
		}
		got := map[string]int{}
		for _, f := range field.FindAllSubmatch(m[1], -1) {
			n, _ := strconv.Atoi(string(f[2]))
			got[string(f[1])] = n - 1 // Lua counts from 1
		}
		if len(got) != len(fields) {
			t.Errorf("%s: lua names %v, Go %v", name, got, fields)
		}
		for f, i := range fields {
			if got[f] != i {
				t.Errorf("%s.%s: lua position %d, Go %d", name, f, got[f], i)
			}
		}
	}
}
