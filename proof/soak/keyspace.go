package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/rueidis"
)

// This file takes and puts back the gateways' keyspace for the store
// losses (storeloss.go), on the single Redis and on every Cluster master.
//
// On a Cluster each master runs one script over its own keys: its part of
// the keyspace goes back (or goes) at one instant, every generation
// sentinel with the records of its slot, as when that master is restored
// from its own snapshot or restarted empty. The writes are ordinary
// commands, replicated to the master's replica (and WAITed for), so a later
// failover keeps the loss rather than bringing the lost records back, as a
// DEBUG RELOAD, which its replica never hears of, would. Redis 7 lets a
// script that declares no keys reach every key of the slots its node
// serves; the soak pauses resharding for the length of a loss (the fault
// holds topoMu), so no slot is migrating and no script meets MOVED, ASK or
// TRYAGAIN: a slot moved between the snapshot and the restore is put back
// on the master that serves it at the restore.

// snapshotScript dumps every key of ARGV[1] with its absolute expiry (0:
// none) and, with ARGV[2] "slot", its Cluster slot (else -1), in one step:
// a snapshot of the gateways' keyspace on this node at one instant.
const snapshotScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  local d = redis.call('DUMP', k)
  if d then
    local pttl = redis.call('PTTL', k)
    local at = 0
    if pttl > 0 then at = now + pttl end
    local slot = -1
    if ARGV[2] == 'slot' then slot = redis.call('CLUSTER', 'KEYSLOT', k) end
    out[#out + 1] = k
    out[#out + 1] = tostring(at)
    out[#out + 1] = d
    out[#out + 1] = tostring(slot)
  end
end
return out`

// restoreScript deletes every key of ARGV[1] on this node, then restores
// the dumps in ARGV[2..] (key, expiry, payload), skipping what has expired
// since: this node's part of the keyspace goes back to the snapshot's
// instant at once (with no dumps: it is emptied).
const restoreScript = `
local gone = 0
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  redis.call('DEL', k)
  gone = gone + 1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local back = 0
for i = 2, #ARGV, 3 do
  local at = tonumber(ARGV[i + 1])
  if at == 0 then
    redis.call('RESTORE', ARGV[i], 0, ARGV[i + 2])
    back = back + 1
  elseif at > now then
    redis.call('RESTORE', ARGV[i], at, ARGV[i + 2], 'ABSTTL')
    back = back + 1
  end
end
return {gone, back}`

// keyDump is one key of a snapshot.
type keyDump struct {
	key, at, payload string
	slot             int // its Cluster slot; -1 on the single Redis
}

// storeNode is one Redis node the losses act on, reached directly (not
// through its fault proxy: the harness's own commands must not be dropped).
type storeNode struct {
	idx    int // the Cluster node's index; -1 for the single Redis
	client rueidis.Client
}

// lossNodes opens a client to each node holding the gateways' keys: the
// single Redis, or every running master. The caller closes them.
func (w *world) lossNodes() ([]storeNode, error) {
	var nodes []storeNode
	open := func(idx int, addr string) error {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			return err
		}
		nodes = append(nodes, storeNode{idx, c})
		return nil
	}
	var err error
	if w.cluster == nil {
		err = open(-1, w.single.Addr())
	} else {
		for _, m := range w.masters() {
			if err = open(m, w.cluster.Node(m).Addr()); err != nil {
				break
			}
		}
	}
	if err != nil {
		closeNodes(nodes)
		return nil, err
	}
	return nodes, nil
}

func closeNodes(nodes []storeNode) {
	for _, n := range nodes {
		n.client.Close()
	}
}

// snapshotKeyspace dumps the gateways' keys of every node, one script per
// node.
func (w *world) snapshotKeyspace(ctx context.Context, nodes []storeNode) ([]keyDump, error) {
	var out []keyDump
	for _, n := range nodes {
		mode := ""
		if n.idx >= 0 {
			mode = "slot"
		}
		v, err := n.client.Do(ctx, n.client.B().Eval().Script(snapshotScript).Numkeys(0).Arg(gatewayPattern, mode).Build()).AsStrSlice()
		if err != nil {
			return nil, fmt.Errorf("snapshot of node %d: %w", n.idx, err)
		}
		for i := 0; i+3 < len(v); i += 4 {
			slot, err := strconv.Atoi(v[i+3])
			if err != nil {
				return nil, fmt.Errorf("snapshot of node %d: slot %q", n.idx, v[i+3])
			}
			out = append(out, keyDump{key: v[i], at: v[i+1], payload: v[i+2], slot: slot})
		}
	}
	return out, nil
}

// replaceKeyspace puts snap back in place of the gateways' keys on every
// node (with snap empty: deletes them) and returns how many keys went and
// how many came back.
//
// On a Cluster the node that serves the fleet's data-lost marker goes
// first: a gateway that sees the loss on a node already done writes the
// marker there, and a later script would take it away again. The others
// run together, so the fleet meets a half-restored keyspace for as short a
// time as can be. Each master then WAITs for its replica.
func (w *world) replaceKeyspace(ctx context.Context, nodes []storeNode, snap []keyDump) (gone, back int, err error) {
	owner := map[int]int{} // slot -> index in nodes
	first := 0
	if w.cluster != nil {
		for i, n := range nodes {
			slots, err := w.cluster.SlotsOf(n.idx)
			if err != nil {
				return 0, 0, err
			}
			for _, s := range slots {
				owner[s] = i
			}
		}
		v, err := nodes[0].client.Do(ctx, nodes[0].client.B().ClusterKeyslot().Key(gatewayMarker).Build()).AsInt64()
		if err != nil {
			return 0, 0, fmt.Errorf("the marker's slot: %w", err)
		}
		o, ok := owner[int(v)]
		if !ok {
			return 0, 0, fmt.Errorf("no master serves slot %d (the marker's)", v)
		}
		first = o
	}
	args := make([][]string, len(nodes))
	for i := range args {
		args[i] = []string{gatewayPattern}
	}
	for _, d := range snap {
		i := 0
		if d.slot >= 0 {
			o, ok := owner[d.slot]
			if !ok {
				return 0, 0, fmt.Errorf("no master serves slot %d (key %s)", d.slot, d.key)
			}
			i = o
		}
		args[i] = append(args[i], d.key, d.at, d.payload)
	}
	var mu sync.Mutex
	var errs []error
	replace := func(i int) {
		n := nodes[i]
		res, err := n.client.Do(ctx, n.client.B().Eval().Script(restoreScript).Numkeys(0).Arg(args[i]...).Build()).AsIntSlice()
		if err == nil && len(res) != 2 {
			err = fmt.Errorf("reply %v", res)
		}
		if err == nil && n.idx >= 0 {
			// With wait_replicas 1 the fleet's own writes are on the replica
			// before they count; the loss is, too, before anyone sees it.
			acked, werr := n.client.Do(ctx, n.client.B().Wait().Numreplicas(1).Timeout(5000).Build()).AsInt64()
			if werr == nil && acked < 1 {
				werr = fmt.Errorf("no replica acknowledged the loss within 5s")
			}
			if werr != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("node %d: WAIT: %w", n.idx, werr))
				mu.Unlock()
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("node %d: %w", n.idx, err))
			return
		}
		gone += int(res[0])
		back += int(res[1])
	}
	replace(first)
	var wg sync.WaitGroup
	for i := range nodes {
		if i != first {
			wg.Go(func() { replace(i) })
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		return gone, back, fmt.Errorf("%v", errs)
	}
	return gone, back, nil
}
