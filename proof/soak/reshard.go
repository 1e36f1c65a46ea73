package main

import (
	"context"
	"math/rand/v2"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/obol-gateway/obol/proof/internal/faultproxy"
)

// window is a span of time a fault lasted.
type window struct{ from, to time.Time }

// reshardBatch is how many keys one MIGRATE moves: redis-cli --cluster
// reshard's --cluster-pipeline default.
const reshardBatch = 10

// reshard changes the Cluster's topology while the storm runs, as an
// operator would with redis-cli --cluster: it moves ranges of slots that
// hold live records or unknown-index buckets between masters, slot after
// slot at redis-cli's pace (no pause between the steps), adds a master
// (with a replica: the fleet WAITs for one) a fifth into the phase, moves
// slots onto it, and removes it again two thirds in, after moving its slots
// away. Its schedule is drawn from the seed on a stream of its own, so the
// other faults keep theirs.
func (w *world) reshard(ctx context.Context, phase time.Duration) {
	rng := rand.New(rand.NewPCG(uint64(w.opt.seed), 11))
	start := time.Now()
	added, addedOnce := -1, false
	for {
		select {
		case <-ctx.Done():
			if added >= 0 {
				w.removeMaster(rng, added)
			}
			return
		case <-time.After(time.Duration(400+rng.IntN(1200)) * time.Millisecond):
		}
		switch since := time.Since(start); {
		case !addedOnce && since >= phase/5:
			addedOnce = true
			added = w.addMaster()
		case added >= 0 && since >= phase*2/3:
			w.removeMaster(rng, added)
			added = -1
		default:
			w.moveSlots(rng, added)
		}
	}
}

// masters returns the running masters, by their own ROLE.
func (w *world) masters() []int {
	var out []int
	for i, n := range w.cluster.Nodes() {
		if !n.Running() || w.cluster.Removed(i) {
			continue
		}
		if r, err := n.Do("ROLE"); err == nil {
			if a, ok := r.([]any); ok && len(a) > 0 && a[0] == "master" {
				out = append(out, i)
			}
		}
	}
	return out
}

// moveSlots moves a range of up to 48 slots, starting at the slot of a live
// record or of an unknown-index bucket, from its master to another (the
// added one, half the time, while there is one).
func (w *world) moveSlots(rng *rand.Rand, added int) {
	w.topoMu.Lock()
	defer w.topoMu.Unlock()
	masters := w.masters()
	if len(masters) < 2 {
		return
	}
	kind, pattern := "record", "soak:idem:*"
	if rng.IntN(2) == 0 {
		kind, pattern = "bucket", "soak:unk:*"
	}
	key := w.someKey(rng, masters, pattern)
	if key == "" {
		return
	}
	slot, err := w.cluster.KeySlot(key)
	if err != nil {
		return
	}
	from, err := w.cluster.SlotOwner(slot)
	if err != nil {
		return
	}
	var others []int
	for _, m := range masters {
		if m != from {
			others = append(others, m)
		}
	}
	to := others[rng.IntN(len(others))]
	for _, m := range others {
		if m == added && rng.IntN(2) == 0 {
			to = added
		}
	}
	owned, err := w.cluster.SlotsOf(from)
	if err != nil {
		return
	}
	mine := map[int]bool{}
	for _, s := range owned {
		mine[s] = true
	}
	want := 1 + rng.IntN(48)
	began := time.Now()
	moved, keys := 0, 0
	for s := slot; s < slot+want && s < 16384 && mine[s]; s++ {
		n, err := w.moveSlot(s, from, to)
		keys += n
		if err != nil {
			w.fault("harness_error", "reshard of slot %d from node %d to node %d: %v", s, from, to, err)
			break
		}
		moved++
	}
	w.endReshard(began)
	w.fault("reshard", "%d slots from %d (a %s's) moved from node %d to node %d with %d keys in %v",
		moved, slot, kind, from, to, keys, time.Since(began).Round(time.Millisecond))
}

// moveSlot is Cluster.MoveSlot that counts the keys moved.
func (w *world) moveSlot(slot, from, to int) (int, error) {
	if err := w.cluster.BeginMigration(slot, from, to); err != nil {
		return 0, err
	}
	keys := 0
	for {
		n, err := w.cluster.MigrateKeys(slot, from, to, reshardBatch)
		if err != nil {
			return keys, err
		}
		if n == 0 {
			break
		}
		keys += n
	}
	return keys, w.cluster.FinishMigration(slot, from, to)
}

// someKey returns a key matching pattern from a random master ("" if none
// is found in a few SCAN rounds).
func (w *world) someKey(rng *rand.Rand, masters []int, pattern string) string {
	n := w.cluster.Node(masters[rng.IntN(len(masters))])
	cursor := "0"
	for range 8 {
		v, err := n.Do("SCAN", cursor, "MATCH", pattern, "COUNT", "500")
		a, _ := v.([]any)
		if err != nil || len(a) != 2 {
			return ""
		}
		cursor, _ = a[0].(string)
		if keys, _ := a[1].([]any); len(keys) > 0 {
			k, _ := keys[rng.IntN(len(keys))].(string)
			return k
		}
		if cursor == "0" {
			return ""
		}
	}
	return ""
}

// endReshard records a reshard's window.
func (w *world) endReshard(began time.Time) {
	w.mu.Lock()
	w.migrations = append(w.migrations, window{began, time.Now()})
	w.mu.Unlock()
}

// overlapsReshard reports whether [from, to] meets a reshard; w.mu held.
func (w *world) overlapsReshard(from, to time.Time) bool {
	for _, m := range w.migrations {
		if !m.from.After(to) && !m.to.Before(from) {
			return true
		}
	}
	return false
}

// addMaster adds a master with one replica, each behind a fault proxy of
// its own that it announces, and returns its index (-1 on failure).
func (w *world) addMaster() int {
	w.topoMu.Lock()
	defer w.topoMu.Unlock()
	began := time.Now()
	m, err := w.cluster.AddMaster(1)
	if err != nil {
		w.fault("harness_error", "add a master: %v", err)
		return -1
	}
	if err := w.proxyNewNodes(); err != nil {
		w.fault("harness_error", "%v", err)
	}
	w.fault("master_added", "node %d (and its replica) joined the Cluster in %v", m, time.Since(began).Round(time.Millisecond))
	return m
}

// removeMaster moves every slot of the added master (or of its replica, if
// a failover promoted it) to the other masters, then takes both out.
func (w *world) removeMaster(rng *rand.Rand, added int) {
	w.topoMu.Lock()
	defer w.topoMu.Unlock()
	began := time.Now()
	m := added
	for _, i := range []int{added, added + 1} {
		if r, err := w.cluster.Node(i).Do("ROLE"); err == nil {
			if a, ok := r.([]any); ok && len(a) > 0 && a[0] == "master" {
				m = i
			}
		}
	}
	slots, err := w.cluster.SlotsOf(m)
	if err != nil {
		w.fault("harness_error", "remove master %d: %v", m, err)
		return
	}
	var others []int
	for _, i := range w.masters() {
		if i != added && i != added+1 {
			others = append(others, i)
		}
	}
	if len(others) == 0 {
		w.fault("harness_error", "remove master %d: no other master", m)
		return
	}
	off, keys := rng.IntN(len(others)), 0
	for i, s := range slots {
		n, err := w.moveSlot(s, m, others[(off+i)%len(others)])
		keys += n
		if err != nil {
			w.fault("harness_error", "move slot %d off master %d: %v", s, m, err)
			w.endReshard(began)
			return
		}
	}
	w.endReshard(began)
	if err := w.cluster.RemoveMaster(m); err != nil {
		w.fault("harness_error", "remove master %d: %v", m, err)
		return
	}
	w.fault("master_removed", "node %d's %d slots (%d keys) moved away and it left the Cluster, in %v",
		m, len(slots), keys, time.Since(began).Round(time.Millisecond))
}

// proxyNewNodes starts a fault proxy for every node that has none yet and
// makes the nodes announce the proxies.
func (w *world) proxyNewNodes() error {
	nodes := w.cluster.Nodes()
	for i := len(w.proxyList()); i < len(nodes); i++ {
		p, err := faultproxy.New(nodes[i].Addr())
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.proxies = append(w.proxies, p)
		w.mu.Unlock()
	}
	return w.announceProxies()
}

// migrationErrors matches a store error caused by a moving slot in a
// gateway's log.
var migrationErrors = regexp.MustCompile(`TRYAGAIN|MOVED \d+|ASK \d+`)

// countMigrationErrors counts, in the gateways' logs, the errors a moving
// slot caused that got past the store's own re-sends: store errors the
// orchestrator saw (it re-sends those too), and calls refused
// store_unavailable because of one, which reached a client.
func (w *world) countMigrationErrors() {
	seen, refused := 0, 0
	for _, g := range w.gws {
		b, err := os.ReadFile(g.logPath)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !migrationErrors.MatchString(line) {
				continue
			}
			switch {
			case strings.Contains(line, "store error"):
				seen++
			case strings.Contains(line, "tools/call refused") && strings.Contains(line, "store_unavailable"):
				refused++
			}
		}
	}
	w.mu.Lock()
	w.c.notes["reshard_store_errors_logged"] += seen
	w.c.notes["reshard_store_unavailable_to_clients"] += refused
	w.mu.Unlock()
}
