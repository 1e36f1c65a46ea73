package redisstore

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

// TestCRC16: the check value of CRC-16/XMODEM and the example of the Redis
// Cluster specification.
func TestCRC16(t *testing.T) {
	if got := crc16("123456789"); got != 0x31c3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	if got := keySlot("foo{bar}zap"); got != keySlot("bar") {
		t.Fatalf("a hash tag is not what is hashed")
	}
	if keySlot("foo{}bar") != int(crc16("foo{}bar"))%clusterSlots {
		t.Fatal("an empty hash tag is hashed as a tag")
	}
}

// TestKeySlotMatchesRueidis: keySlot agrees with the slot rueidis routes a
// command by on a Cluster, for random keys with and without braces.
func TestKeySlotMatchesRueidis(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	c := realClient(t, cl.Addrs()...)
	rng := rand.New(rand.NewPCG(7, 7))
	const alphabet = "abcxyz019_:.-{}"
	for i := range 20000 {
		b := make([]byte, rng.IntN(40)+1)
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		k := string(b)
		if i%2 == 0 {
			k = "obol:idem:ws_" + k
		}
		cmd := c.B().Get().Key(k).Build()
		if got, want := keySlot(k), int(cmd.Slot()); got != want {
			t.Fatalf("keySlot(%q) = %d, rueidis says %d", k, got, want)
		}
	}
}

// TestSlotTags: every slot has a tag, each tag hashes to its slot, and a
// bucket key shares the slot of its record key.
func TestSlotTags(t *testing.T) {
	tags := slotTags()
	for s, tag := range tags {
		if tag == "" || len(tag) > 4 || strings.ContainsAny(tag, "{}") {
			t.Fatalf("slot %d: tag %q", s, tag)
		}
		if got := keySlot("x{" + tag + "}y"); got != s {
			t.Fatalf("tag %q of slot %d hashes to %d", tag, s, got)
		}
	}
	m := newMini(t, Options{})
	for range 1000 {
		scope := idempotency.Scope{Workspace: "ws_acme", Connection: "conn_x", Tool: "t.create"}
		rk, err := scope.StorageKey(m.store.prefix, idempotency.NewKey())
		if err != nil {
			t.Fatal(err)
		}
		if b := m.store.bucketOf(scope.Workspace, rk); keySlot(b) != keySlot(rk) {
			t.Fatalf("bucket %s and record %s: slots %d and %d", b, rk, keySlot(b), keySlot(rk))
		}
	}
}

func BenchmarkSlotTags(b *testing.B) {
	for b.Loop() {
		buildSlotTags()
	}
}

func BenchmarkKeySlot(b *testing.B) {
	k := "obol:idem:ws_acme:conn_stripe:0123456789abcdef:idt_0123456789abcdef0123456789abcdef"
	for b.Loop() {
		keySlot(k)
	}
}
