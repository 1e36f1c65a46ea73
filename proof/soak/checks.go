package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/receipt"
)

// unknownList is the answer of GET /v1/unknown.
type unknownList struct {
	Unknown []receipt.Receipt `json:"unknown"`
}

// checkVendorTruth counts, from the vendors' ground truth, the effects per
// slot above what its binding allows, vendor keys shared between slots and
// client keys at the vendor. It returns the counts, not yet reported.
func (w *world) checkVendorTruth() map[string]map[string]string {
	bad := map[string]map[string]string{} // invariant -> slot -> detail
	add := func(inv, id, format string, args ...any) {
		if bad[inv] == nil {
			bad[inv] = map[string]string{}
		}
		bad[inv][id] = fmt.Sprintf(format, args...)
	}
	truth := w.vend.truth()
	w.mu.Lock()
	slots := w.slots
	w.mu.Unlock()
	for id, t := range truth {
		w.mu.Lock()
		s := slots[id]
		w.mu.Unlock()
		if s == nil {
			continue
		}
		if len(t.forwardedMeta) > 0 {
			add("client_key_at_vendor", id, "the upstream received the client's _meta members %v", t.forwardedMeta)
		}
		if s.tool.vendorKB {
			if len(t.vendorKeys) > 1 || t.effects > 0 && t.vendorKeys[0] == "" {
				add("duplicates", id, "%d effects under vendor keys %v (one allowed)", t.effects, t.vendorKeys)
			}
			for _, k := range t.vendorKeys {
				if k == s.key {
					add("client_key_at_vendor", id, "the vendor received the client's key %s", k)
				}
			}
			if t.foreignKey {
				add("cross_tenant_results", id, "a vendor key of this slot was first used by another slot")
			}
			for _, k := range sortedKeys(t.keyExecutions) {
				if t.keyExecutions[k] > 1 {
					add("duplicates", id, "the upstream executed vendor key %s %d times", k, t.keyExecutions[k])
				}
			}
		} else if t.effects > 1 {
			// An effect after an acknowledged loss of the slot's record is
			// what acknowledging accepts, and on a Cluster one before the
			// loss reached the gateway that sent it is what DESIGN leaves
			// undetectable: each counted apart (lossAllows). Any other
			// second effect, one between a loss and its acknowledgement
			// included, is a duplicate. Effects since a loss still open
			// are judged when it is acknowledged.
			w.mu.Lock()
			if w.judgedLaterLocked(t.effectTimes[len(t.effectTimes)-1]) {
				w.mu.Unlock()
				continue
			}
			used := map[*storeLoss]bool{}
			apart := map[string]int{}
			for i := 1; i < len(t.effectTimes); i++ {
				if how := lossAllows(w.loss.losses, id, t.effectTimes[i-1], t.effectTimes[i], used); how != "" {
					apart[how]++
				}
			}
			if len(apart) > 0 {
				if w.redispatched == nil {
					w.redispatched = map[string]map[string]int{}
				}
				w.redispatched[id] = apart
			}
			w.mu.Unlock()
			if n := apart[afterAcknowledgement] + apart[beforeMarkerReached]; t.effects-n > 1 {
				add("duplicates", id, "%d effects (binding allows one; %d after an acknowledged loss of its record, %d before the loss reached the gateway)",
					t.effects, apart[afterAcknowledgement], apart[beforeMarkerReached])
			}
		}
	}
	return bad
}

// reportVendorTruth reports what checkVendorTruth finds that was not
// reported before.
func (w *world) reportVendorTruth(reported map[string]bool) {
	for inv, m := range w.checkVendorTruth() {
		for _, id := range sortedKeys(m) {
			if !reported[inv+id] {
				reported[inv+id] = true
				w.violation(inv, id, "%s", m[id])
			}
		}
	}
}

// checkReceipts reads the receipts of slots the vendors saw (or whose
// record was seen), in order: the vendor's count first, then the receipt,
// so attempt_count must never be below it; and a record once seen must not
// vanish, nor lose more than the one never-sent attempt its owner may take
// back. limit 0 checks every slot.
func (w *world) checkReceipts(ctx context.Context, rng *rand.Rand, limit int, reported map[string]bool) {
	w.mu.Lock()
	ids := sortedKeys(w.slots)
	w.mu.Unlock()
	if limit > 0 && len(ids) > limit {
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		ids = ids[:limit]
	}
	for _, id := range ids {
		if ctx.Err() != nil {
			return
		}
		seen := w.vend.seenCount(id) // not under w.mu: the vendors log under theirs
		w.mu.Lock()
		s, o := w.slots[id], *w.obs[id]
		epoch, open := w.loss.epoch, w.loss.open
		// Requests of records a store loss took do not count against
		// the record made again after the acknowledgement.
		seen -= w.vendorBaselineLocked(id)
		w.mu.Unlock()
		if open {
			return // a receipt read now may miss a record the loss took
		}
		if seen == 0 && !o.recordSeen {
			continue
		}
		g := w.pickGateway(rng)
		if g == nil {
			return
		}
		u := g.url() + "/v1/receipts/" + s.key + "?tool=" + url.QueryEscape(s.tool.name)
		code, body := rest(ctx, "GET", u, s.tenant.apiKey, nil)
		if e, o := w.lossEpoch(); e != epoch || o {
			return // a loss or an acknowledgement meanwhile: read again next time
		}
		for _, sec := range w.creds.secrets() {
			if strings.Contains(string(body), sec) && !reported["secrets"+id] {
				reported["secrets"+id] = true
				w.violation("secrets", id, "a receipt holds the secret %.12s...", sec)
			}
		}
		switch code {
		case 200:
			var rc receipt.Receipt
			if json.Unmarshal(body, &rc) != nil {
				continue
			}
			w.logSlot(id, "receipt via gateway %d: %s attempts=%d (vendor saw %d)", g.idx, rc.Outcome, rc.AttemptCount, seen)
			if rc.AttemptCount < seen && !reported["attempt"+id] {
				reported["attempt"+id] = true
				w.violation("attempt_count_below_vendor", id, "attempt_count %d, the vendor saw %d", rc.AttemptCount, seen)
			}
			if rc.AttemptCount < o.maxAttempts-1 && !reported["lost"+id] {
				reported["lost"+id] = true
				w.violation("acknowledged_reservations_lost", id, "attempt_count %d after %d was seen", rc.AttemptCount, o.maxAttempts)
			}
			w.mu.Lock()
			w.obs[id].recordSeen = true
			w.obs[id].maxAttempts = max(w.obs[id].maxAttempts, rc.AttemptCount)
			w.mu.Unlock()
		case 404:
			w.logSlot(id, "receipt via gateway %d: 404 (vendor saw %d)", g.idx, seen)
			if !reported["lost"+id] {
				reported["lost"+id] = true
				w.violation("acknowledged_reservations_lost", id, "no record, but the vendor saw %d requests / a record was seen before", seen)
			}
		}
	}
}

// checkSettledReplay calls every settled slot again: it must replay its
// settlement (unless a failover since may have rolled the settle back).
func (w *world) checkSettledReplay(rng *rand.Rand) int {
	w.mu.Lock()
	var ids []string
	for _, id := range sortedKeys(w.obs) {
		if w.obs[id].settled != "" {
			ids = append(ids, id)
		}
	}
	w.mu.Unlock()
	for _, id := range ids {
		w.mu.Lock()
		s := w.slots[id]
		w.mu.Unlock()
		w.call(rng, s, "") // checkReply compares the outcome with the settlement
	}
	return len(ids)
}

// scanRedis reads every key and value of every master for the secrets.
func (w *world) scanRedis(ctx context.Context) (keys int, err error) {
	// A node that stops answering ends the scan as a harness error, not a
	// soak that waits for it in silence.
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var addrs []string
	if w.cluster != nil {
		for _, n := range w.cluster.Nodes() {
			if r, err := n.Do("ROLE"); err == nil {
				if a, ok := r.([]any); ok && len(a) > 0 && a[0] == "master" {
					addrs = append(addrs, n.Addr())
				}
			}
		}
	} else {
		addrs = []string{w.single.Addr()}
	}
	secrets := w.creds.secrets()
	for _, addr := range addrs {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
		if err != nil {
			return keys, err
		}
		var cursor uint64
		for {
			e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Count(500).Build()).AsScanEntry()
			if err != nil {
				c.Close()
				return keys, err
			}
			for _, k := range e.Elements {
				keys++
				typ, _ := c.Do(ctx, c.B().Type().Key(k).Build()).ToString()
				var vals []string
				switch typ {
				case "hash":
					m, _ := c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap()
					for f, v := range m {
						vals = append(vals, f, v)
					}
				case "string":
					v, _ := c.Do(ctx, c.B().Get().Key(k).Build()).ToString()
					vals = append(vals, v)
					// A record's body is stored compressed: read it decoded too.
					if fields, err := redisstore.RecordFields(v); err == nil {
						vals = append(vals, fields...)
					}
				case "zset":
					vals, _ = c.Do(ctx, c.B().Zrange().Key(k).Min("0").Max("-1").Build()).AsStrSlice()
				case "set":
					vals, _ = c.Do(ctx, c.B().Smembers().Key(k).Build()).AsStrSlice()
				case "list":
					vals, _ = c.Do(ctx, c.B().Lrange().Key(k).Start(0).Stop(-1).Build()).AsStrSlice()
				}
				vals = append(vals, k)
				for _, v := range vals {
					for _, sec := range secrets {
						if strings.Contains(v, sec) {
							w.violation("secrets", "", "Redis key %q holds the secret %.12s...", k, sec)
						}
					}
				}
			}
			cursor = e.Cursor
			if cursor == 0 {
				break
			}
		}
		c.Close()
	}
	return keys, nil
}

// scanLogs reads every gateway's log for the secrets.
func (w *world) scanLogs() {
	for _, g := range w.gws {
		b, err := os.ReadFile(g.logPath)
		if err != nil {
			continue
		}
		for _, sec := range w.creds.secrets() {
			if strings.Contains(string(b), sec) {
				w.violation("secrets", "", "gateway %d's log holds the secret %.12s...", g.idx, sec)
			}
		}
	}
}

// quiesce brings the fleet back after the storm: vendors normal, Redis
// healthy, every gateway running; then waits out leases and attempts.
func (w *world) quiesce(ctx context.Context) {
	for _, n := range slices.Concat(routeNames, mcpRouteNames) {
		w.vend.setMode(n, modeNormal)
	}
	if w.cluster != nil {
		for i, n := range w.cluster.Nodes() {
			if !n.Running() && !w.cluster.Removed(i) {
				if err := n.Relaunch(); err != nil {
					w.fault("harness_error", "node %d did not restart: %v", i, err)
				}
			}
		}
		if err := w.cluster.Ready(60 * time.Second); err != nil {
			w.fault("harness_error", "cluster not healthy at the end: %v", err)
		}
		if err := w.announceProxies(); err != nil {
			w.fault("harness_error", "%v", err)
		}
	} else if !w.single.Running() {
		if err := w.single.Relaunch(); err != nil {
			w.fault("harness_error", "Redis did not restart: %v", err)
		}
	}
	// Together: one after the other, three gateways that cannot start (a
	// store still failing over) took up to two minutes each, in silence.
	var wg sync.WaitGroup
	for _, g := range w.gws {
		if !g.running() {
			wg.Go(func() {
				if err := g.startRetrying(ctx); err != nil {
					w.fault("harness_error", "gateway %d did not restart: %v", g.idx, err)
				}
			})
		}
	}
	wg.Wait()
}
