package redisstore

import (
	"encoding/json"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
)

// TestScopeStrings holds what the scope cache renders equal to what it
// stands for: StorageKey, the index member and buckets, and VendorKey, for
// scopes with and without a connection, a capability call included, and
// when scopes evict each other.
func TestScopeStrings(t *testing.T) {
	m := newMini(t, Options{Prefix: "p:"})
	s := m.store
	scopes := []idempotency.Scope{testScope,
		{Workspace: "ws_2", Connection: "conn.a-b_c", Tool: "x.y"},
		{Workspace: "ws_2", Tool: "cap.search"},
		{Workspace: "ws_2", Connection: "", Tool: "plain"},
	}
	for i := range 3 * scopeCacheSize {
		scopes = append(scopes, idempotency.Scope{Workspace: "w" + itoa(int64(i)), Connection: "c", Tool: "t"})
	}
	hash := hashOf("args")
	for round := range 2 { // the second round reads what the first cached
		for _, sc := range scopes {
			k := idempotency.NewKey()
			want, err := sc.StorageKey(s.prefix, k)
			got, ss, err2 := s.storageKey(sc, k)
			if (err == nil) != (err2 == nil) {
				t.Fatalf("round %d, %+v: StorageKey error %v, cached %v", round, sc, err, err2)
			}
			if err != nil {
				continue
			}
			if got != want {
				t.Fatalf("round %d, %+v: key %q, want %q", round, sc, got, want)
			}
			wm, _ := json.Marshal(indexMember{sc.Connection, sc.Tool, k.String()})
			wb := s.bucketOf(sc.Workspace, want)
			if b, mem := ss.bucket(keySlot(got)), ss.member(k); b != wb || mem != string(wm) {
				t.Fatalf("round %d, %+v: bucket %q member %q, want %q %q", round, sc, b, mem, wb, wm)
			}
			if p, wp := ss.pending(keySlot(got)), s.pendingOf(sc.Workspace, want); p != wp {
				t.Fatalf("round %d, %+v: pending %q, want %q", round, sc, p, wp)
			}
			if vk, wvk := ss.vendorKey(k, hash), packKey(idempotency.VendorKey(s.deployment, sc, k, hash)); vk != wvk {
				t.Fatalf("round %d, %+v: vendor key %x, want %x", round, sc, vk, wvk)
			}
		}
	}
	// A zero key and an invalid scope fail as StorageKey does.
	if _, _, err := s.storageKey(testScope, idempotency.Key{}); err == nil {
		t.Fatal("zero key: no error")
	}
	if _, _, err := s.storageKey(idempotency.Scope{Workspace: "a:b", Tool: "t"}, idempotency.NewKey()); err == nil {
		t.Fatal("invalid workspace: no error")
	}
}
