package main

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/internal/redistest"
)

// TestKeyspaceRollbackOnCluster: on a 2-master Cluster with replicas, a
// snapshot put back brings every slot's generation sentinel back with that
// slot's records (expiry kept, later keys gone), also for a slot moved to
// the other master in between; emptying takes every gateway key; the
// lane's prefix is never touched.
func TestKeyspaceRollbackOnCluster(t *testing.T) {
	needRedis(t)
	c := redistest.StartCluster(t, 2, 1)
	w := &world{cluster: c}
	ctx := context.Background()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	do := func(cmd rueidis.Completed) rueidis.RedisResult {
		t.Helper()
		r := client.Do(ctx, cmd)
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
		return r
	}
	get := func(k string) string {
		t.Helper()
		v, err := do(client.B().Get().Key(k).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			return "(none)"
		}
		return v
	}
	// Two slots, one per master, each with its sentinel and a record.
	slots := map[string]int{}
	owners := map[int]string{}
	for _, tag := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		s, err := c.KeySlot("{" + tag + "}")
		if err != nil {
			t.Fatal(err)
		}
		o, err := c.SlotOwner(s)
		if err != nil {
			t.Fatal(err)
		}
		if owners[o] == "" {
			owners[o], slots[tag] = tag, s
		}
	}
	if len(owners) != 2 {
		t.Fatalf("no two tags on two masters: %v", owners)
	}
	tags := []string{owners[0], owners[1]}
	for _, tag := range tags {
		do(client.B().Set().Key("soak:meta:gen:{" + tag + "}").Value("5").Build())
		do(client.B().Set().Key("soak:idem:{" + tag + "}:x").Value("rec-x").Px(time.Hour).Build())
	}
	do(client.B().Set().Key("soaklin:keep").Value("lane").Build())

	nodes, err := w.lossNodes()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := w.snapshotKeyspace(ctx, nodes)
	closeNodes(nodes)
	if err != nil {
		t.Fatal(err)
	}
	// After the snapshot: generations move on, a record goes, one comes,
	// and the first slot moves to the other master.
	for _, tag := range tags {
		do(client.B().Incr().Key("soak:meta:gen:{" + tag + "}").Build())
		do(client.B().Del().Key("soak:idem:{" + tag + "}:x").Build())
		do(client.B().Set().Key("soak:idem:{" + tag + "}:y").Value("rec-y").Build())
	}
	from, _ := c.SlotOwner(slots[tags[0]])
	to, _ := c.SlotOwner(slots[tags[1]])
	if err := c.MoveSlot(slots[tags[0]], from, to, 10); err != nil {
		t.Fatal(err)
	}

	nodes, err = w.lossNodes()
	if err != nil {
		t.Fatal(err)
	}
	gone, back, err := w.replaceKeyspace(ctx, nodes, snap)
	closeNodes(nodes)
	if err != nil {
		t.Fatal(err)
	}
	if gone != 4 || back != 4 {
		t.Errorf("%d keys went, %d came back; want 4 and 4", gone, back)
	}
	for _, tag := range tags {
		if g, x, y := get("soak:meta:gen:{"+tag+"}"), get("soak:idem:{"+tag+"}:x"), get("soak:idem:{"+tag+"}:y"); g != "5" || x != "rec-x" || y != "(none)" {
			t.Errorf("slot {%s} after the restore: gen %s, x %s, y %s; want 5, rec-x, (none)", tag, g, x, y)
		}
		if ttl, _ := do(client.B().Pttl().Key("soak:idem:{" + tag + "}:x").Build()).AsInt64(); ttl < 50*60*1000 {
			t.Errorf("slot {%s}: the restored record's TTL is %d ms, want about an hour", tag, ttl)
		}
	}

	nodes, err = w.lossNodes()
	if err != nil {
		t.Fatal(err)
	}
	gone, back, err = w.replaceKeyspace(ctx, nodes, nil)
	closeNodes(nodes)
	if err != nil || gone != 4 || back != 0 {
		t.Errorf("emptied: %d keys went, %d came back, %v; want 4, 0", gone, back, err)
	}
	for _, tag := range tags {
		if g := get("soak:meta:gen:{" + tag + "}"); g != "(none)" {
			t.Errorf("slot {%s}: the sentinel survived the emptying: %s", tag, g)
		}
	}
	if v := get("soaklin:keep"); v != "lane" {
		t.Errorf("the lane's key: %s, want it untouched", v)
	}
}
