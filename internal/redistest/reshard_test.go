package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// TestMoveSlotAddRemoveMaster: a master added with a replica serves a slot
// moved to it with its keys, and is removed once the slot moved back; the
// cluster is healthy after each step.
func TestMoveSlotAddRemoveMaster(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 3, 0)
	// 11 keys of one slot (a hash tag), so MoveSlot needs two MIGRATEs of 10.
	var keys []string
	for i := range 11 {
		keys = append(keys, fmt.Sprintf("{mv}k%d", i))
	}
	slot, err := c.KeySlot(keys[0])
	if err != nil {
		t.Fatal(err)
	}
	from, err := c.SlotOwner(slot)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if _, err := c.Node(from).Do("SET", k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	m, err := c.AddMaster(1)
	if err != nil {
		t.Fatal(err)
	}
	if m != 3 || len(c.Nodes()) != 5 {
		t.Fatalf("AddMaster(1) = %d with %d nodes; want 3 and 5", m, len(c.Nodes()))
	}
	if err := c.MoveSlot(slot, from, m, 10); err != nil {
		t.Fatal(err)
	}
	if owner, err := c.SlotOwner(slot); err != nil || owner != m {
		t.Fatalf("SlotOwner after the move = %d, %v; want %d", owner, err, m)
	}
	if n, err := c.Node(m).Do("CLUSTER", "COUNTKEYSINSLOT", strconv.Itoa(slot)); err != nil || n != int64(len(keys)) {
		t.Fatalf("keys on the new master: %v, %v; want %d", n, err, len(keys))
	}
	if _, err := c.Node(from).Do("GET", keys[0]); err == nil || !strings.Contains(err.Error(), "MOVED") {
		t.Fatalf("GET on the old owner: %v; want MOVED", err)
	}
	if err := c.RemoveMaster(m); err == nil {
		t.Fatal("RemoveMaster of a master that serves a slot: no error")
	}
	if err := c.MoveSlot(slot, m, from, 10); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveMaster(m); err != nil {
		t.Fatal(err)
	}
	if c.Node(m).Running() || c.Node(m+1).Running() {
		t.Fatal("a removed node still runs")
	}
	info, err := c.Node(0).Do("CLUSTER", "INFO")
	if err != nil || infoFields(info)["cluster_known_nodes"] != "3" {
		t.Fatalf("after RemoveMaster: %v, %v; want 3 known nodes", infoFields(info)["cluster_known_nodes"], err)
	}
	if v, err := c.Node(from).Do("GET", keys[10]); err != nil || v != "v" {
		t.Fatalf("GET after the round trip: %v, %v", v, err)
	}
}
