package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"time"
)

// This file is the store-amnesia faults (docs/DESIGN.md section 6, "Store
// amnesia"): the gateways' keyspace restored from an older snapshot, or
// emptied, while calls run, on the single Redis and on the Cluster; the
// harness waits for a gateway to report the loss, acknowledges it through
// the CLI as an operator would, and checks that the fleet serves again.
//
// Both act on the gateways' prefix only ("soak:"), in one script per node
// (keyspace.go), so that the linearizability lane (its own prefix,
// "soaklin:") keeps its history and keeps checking it: a whole-server
// FLUSHALL or DEBUG RELOAD would take the lane's records too, and the lane
// (a store of its own, not a gateway) would report that loss as
// non-linearizable histories. To the gateways, which read only their
// prefix, the scripts are the same event.

// gatewayPattern matches every key of the gateways (config.go's
// key_prefix) and none of the lane's.
const gatewayPattern = "soak:*"

// gatewayMarker is the fleet's data-lost marker (redisstore's markerKey
// under the gateways' prefix).
const gatewayMarker = "soak:meta:data_lost"

// storeLoss is one injected loss and what followed it.
type storeLoss struct {
	kind       string    // "store_restored_from_snapshot" or "store_emptied"
	savedAt    time.Time // the snapshot's instant (restore only)
	lostAt     time.Time // the restore or the delete began
	lostEnd    time.Time // and was done on every node
	cluster    bool      // on a Cluster: generations per slot (lossAllows)
	detectedAt time.Time // a gateway's /healthz first answered store_data_lost
	ackAt      time.Time // the CLI's acknowledgement was started
	ackedAt    time.Time // and returned
	exposed    map[string]bool
	baseline   map[string]int // vendor requests per exposed slot at the acknowledgement
	served     int            // calls served (not store-refused) started after ackedAt
	acked      bool
}

// lossState is what the checks need of the losses; w.mu.
type lossState struct {
	losses []*storeLoss
	open   bool // a loss injected and not yet acknowledged
	epoch  int  // moves at every loss and acknowledgement: an observation across it is void
}

// storeLossStep is one planned store loss.
type storeLossStep struct {
	at   time.Time
	kind string
}

// storeLossPlan says when the phase injects its store losses: the restore
// at 30% of the storm, the empty keyspace at 60%, so that a 30-second
// phase has both and time to recover from each.
func storeLossPlan(start time.Time, d time.Duration) []storeLossStep {
	return []storeLossStep{
		{start.Add(d * 3 / 10), "store_restored_from_snapshot"},
		{start.Add(d * 6 / 10), "store_emptied"},
	}
}

// served reports whether the fleet's store took the call: an answer, or a
// refusal other than the store's own.
func (r reply) served() bool {
	if r.transport != nil {
		return false
	}
	return !r.refused || !strings.HasPrefix(r.reason, "store_")
}

// storeLossFault injects one loss into the store and sees it through: the
// loss, its detection, the acknowledgement, a served call. It runs in the
// fault schedule's goroutine, so no other fault (a gateway killed, Redis
// killed) overlaps it, and it ignores the storm's end: a loss left
// unacknowledged would refuse every call of the final checks.
func (w *world) storeLossFault(storm context.Context, rng *rand.Rand, kind string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// A gateway that starts after the loss, before any gateway saw it,
	// would dispatch lost keys unnoticed (DESIGN: a rollback no live
	// gateway saw): so the fleet is whole, and each gateway has reserved
	// an attempt (it holds the store's generation) before the loss.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		up := 0
		for _, g := range w.gws {
			if g.running() {
				up++
			}
		}
		if up == len(w.gws) {
			break
		}
		if time.Now().After(deadline) {
			w.note(kind + "_skipped_gateway_down")
			return
		}
	}
	if w.cluster != nil {
		// Resharding pauses from the snapshot to the restore (keyspace.go).
		w.topoMu.Lock()
	}
	loss, probes := w.injectLoss(ctx, rng, kind)
	if w.cluster != nil {
		w.topoMu.Unlock()
	}
	if loss == nil {
		return
	}

	// Each gateway retries the call it made last before the loss: that
	// gateway holds the generation of its slot from after the snapshot
	// (or from before the store was emptied), so it sees the loss at once
	// on a Cluster too, where generations are kept per slot and another
	// gateway may have none of that slot's.
	for i, s := range probes {
		w.callVia(w.gws[i], s, "")
	}
	// Detection: a gateway's /healthz answers store_data_lost. A storm
	// stopped early (a violation found) does not wait for it.
	var ackVia *gateway
	for deadline := time.Now().Add(20 * time.Second); ackVia == nil && time.Now().Before(deadline) && storm.Err() == nil; {
		for _, g := range w.gws {
			if !g.running() {
				continue
			}
			if code, body := rest(ctx, "GET", g.url()+"/healthz", "", nil); code == 503 && bytes.Contains(body, []byte("store_data_lost")) {
				ackVia = g
				break
			}
		}
		if ackVia == nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if ackVia == nil {
		// Still acknowledged below: a loss seen later would stop the
		// fleet for good otherwise. Counted, as a finding.
		w.note(kind + "_not_detected")
		ackVia = w.pickGateway(rng)
	} else {
		w.mu.Lock()
		loss.detectedAt = time.Now()
		w.mu.Unlock()
	}
	// Clients retry meanwhile: every retry of a lost key must be refused
	// until the acknowledgement.
	time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
	w.acknowledge(ctx, loss, ackVia, rng)
	w.probeRecovery(rng)
}

// injectLoss takes the snapshot (restore only), lets calls run on, and
// replaces the keyspace: the loss itself, recorded in w.loss. It returns
// the loss (nil if nothing was injected) and, per gateway, the slot of the
// last call it made before the loss.
func (w *world) injectLoss(ctx context.Context, rng *rand.Rand, kind string) (*storeLoss, []*slot) {
	nodes, err := w.lossNodes()
	if err != nil {
		w.fault("harness_error", "%s: %v", kind, err)
		return nil, nil
	}
	defer closeNodes(nodes)
	loss := &storeLoss{kind: kind, cluster: w.cluster != nil}
	probes := w.primeGateways(rng)
	var snapshot []keyDump
	if kind == "store_restored_from_snapshot" {
		loss.savedAt = time.Now()
		snapshot, err = w.snapshotKeyspace(ctx, nodes)
		if err != nil {
			w.fault("harness_error", "%s: %v", kind, err)
			return nil, nil
		}
		// Calls run on: records made, finalized, redispatched after the
		// snapshot; then every gateway reserves once more, past it.
		time.Sleep(time.Duration(1000+rng.IntN(1000)) * time.Millisecond)
		probes = w.primeGateways(rng)
	}

	w.mu.Lock()
	loss.lostAt = time.Now()
	w.loss.losses = append(w.loss.losses, loss)
	w.loss.open = true
	w.loss.epoch++
	w.mu.Unlock()

	gone, back, err := w.replaceKeyspace(ctx, nodes, snapshot)

	w.mu.Lock()
	loss.lostEnd = time.Now()
	loss.exposed = map[string]bool{}
	for id, o := range w.obs {
		// Emptied: every record is gone. Restored: a record is back to
		// its snapshot, which differs only for slots active since (until
		// the last node was done).
		if kind == "store_emptied" || o.inFlight > 0 || !o.lastActive.Before(loss.savedAt) {
			loss.exposed[id] = true
		}
	}
	w.mu.Unlock()
	where := "the gateways'"
	if w.cluster != nil {
		where = fmt.Sprintf("on %d masters the gateways'", len(nodes))
	}
	if err != nil {
		// Some nodes may have lost nothing: the acknowledgement that
		// follows is still right (it answers "nothing to acknowledge" if
		// nothing was lost).
		w.fault("harness_error", "%s: %v", kind, err)
	}
	if kind == "store_emptied" {
		w.fault(kind, "%s %d keys deleted in %v (%d slots exposed)", where, gone,
			loss.lostEnd.Sub(loss.lostAt).Round(time.Millisecond), len(loss.exposed))
	} else {
		w.fault(kind, "%s %d keys replaced by the %d of %v earlier in %v (%d slots exposed)", where, gone, back,
			loss.lostAt.Sub(loss.savedAt).Round(time.Millisecond), loss.lostEnd.Sub(loss.lostAt).Round(time.Millisecond), len(loss.exposed))
	}
	return loss, probes
}

// primeGateways makes one new call through each gateway: each reserves an
// attempt, so each holds the store's current generation (on a Cluster, its
// slot's). It returns the slots, by gateway.
func (w *world) primeGateways(rng *rand.Rand) []*slot {
	out := make([]*slot, len(w.gws))
	for i, g := range w.gws {
		t := w.creds.tenants[rng.IntN(len(w.creds.tenants))]
		out[i] = w.slotFor(t, tools[3], newKey(rng)) // chat.post: unsupported
		w.callVia(g, out[i], "")
	}
	return out
}

// acknowledge runs the operator's CLI against g, then marks the loss
// acknowledged: the exposed slots' observations start over, and their
// vendor requests so far belong to the records that were lost.
func (w *world) acknowledge(ctx context.Context, loss *storeLoss, g *gateway, rng *rand.Rand) {
	// The loss is open (the receipt checks wait) until the CLI returns.
	// The vendors' counts are read outside w.mu: the vendors log under
	// their own lock.
	w.mu.Lock()
	loss.ackAt = time.Now()
	ids := sortedKeys(loss.exposed)
	w.mu.Unlock()
	baseline := map[string]int{}
	for _, id := range ids {
		baseline[id] = w.vend.seenCount(id)
	}
	w.mu.Lock()
	loss.baseline = baseline
	for _, id := range ids {
		if o := w.obs[id]; o != nil {
			o.recordSeen, o.maxAttempts = false, 0
		}
	}
	w.loss.epoch++
	w.mu.Unlock()
	var out, errOut bytes.Buffer
	ok := false
	for try := 0; try < 3 && !ok; try++ {
		if g == nil || !g.running() {
			g = w.pickGateway(rng)
		}
		if g == nil {
			time.Sleep(time.Second)
			continue
		}
		out.Reset()
		errOut.Reset()
		cctx, cancel := context.WithTimeout(ctx, 35*time.Second)
		cmd := exec.CommandContext(cctx, g.bin, "store", "acknowledge-data-loss", "-url", g.url())
		cmd.Env = append(os.Environ(), "OBOL_APPROVER_KEY="+w.creds.approver)
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		cancel()
		ok = err == nil
		if !ok {
			time.Sleep(500 * time.Millisecond)
		}
	}
	w.mu.Lock()
	loss.ackedAt = time.Now()
	loss.acked = ok
	w.loss.open = false
	w.loss.epoch++
	w.mu.Unlock()
	if !ok {
		w.fault("harness_error", "refserver store acknowledge-data-loss failed: %s %s", strings.TrimSpace(out.String()), strings.TrimSpace(errOut.String()))
		return
	}
	w.fault("store_loss_acknowledged", "through gateway %d: %s", g.idx, strings.TrimSpace(out.String()))
}

// probeRecovery calls one new slot until the store takes it (30s at most):
// the fleet serves again after an acknowledgement. The count of served
// calls after it is checked at the end; this makes sure there is one to
// count even when the storm ends right after the acknowledgement.
func (w *world) probeRecovery(rng *rand.Rand) {
	t := w.creds.tenants[rng.IntN(len(w.creds.tenants))]
	s := w.slotFor(t, tools[3], newKey(rng))
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if r := w.call(rng, s, ""); r.served() {
			return
		}
	}
}

// lossEpoch is the current loss epoch and whether a loss is open; an
// observation begun in one epoch is void in another.
func (w *world) lossEpoch() (epoch int, open bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.loss.epoch, w.loss.open
}

// vendorBaseline is the count of s's vendor requests that belong to
// records lost before the latest acknowledgement; w.mu held.
func (w *world) vendorBaselineLocked(id string) int {
	b := 0
	for _, l := range w.loss.losses {
		if n, ok := l.baseline[id]; ok {
			b = n
		}
	}
	return b
}

// markerReach bounds how long after a gateway saw a loss every other
// gateway has seen it too: each reads the fleet's marker at most once per
// lease, on a claim (docs/DESIGN.md section 6, Store amnesia); twice the
// lease leaves a loaded machine's pauses room.
const markerReach = 2 * laneLease

// Ways a store loss accounts for a second effect of a slot
// (lossAllows).
const (
	afterAcknowledgement = "after_acknowledgement"
	beforeMarkerReached  = "before_marker_reached"
)

// lossAllows tells, of an effect at `at` that follows an effect at `prev`
// of the same slot, whether a loss that exposed the slot accounts for it,
// and how; "" if none does.
//
//   - afterAcknowledgement: the acknowledgement came between the two (the
//     earlier effect's record was lost; the later one was dispatched after
//     the operator accepted that). Any topology.
//   - beforeMarkerReached: on a Cluster only, the earlier effect came
//     before the loss was done and the later one after it began, before
//     the loss could have reached every gateway (markerReach after the
//     harness saw it). A Cluster keeps a generation per slot, so a gateway
//     that never saw the lost writes of a slot cannot tell a retry there
//     from a fresh call until the marker reaches it: DESIGN's "a rollback
//     no live gateway saw". A loss no gateway reported allows nothing.
//     (On the single Redis one generation covers every slot and every
//     gateway holds the latest before the loss: nothing is allowed there.)
//
// used marks the losses already spent on this slot: one loss allows one
// more effect. w.mu held.
func lossAllows(losses []*storeLoss, id string, prev, at time.Time, used map[*storeLoss]bool) string {
	for _, l := range losses {
		if used[l] || !l.exposed[id] {
			continue
		}
		if l.acked && prev.Before(l.ackAt) && !at.Before(l.ackAt) {
			used[l] = true
			return afterAcknowledgement
		}
		if l.cluster && !l.detectedAt.IsZero() && prev.Before(l.lostEnd) && !at.Before(l.lostAt) &&
			at.Before(l.detectedAt.Add(markerReach)) && (l.ackAt.IsZero() || at.Before(l.ackAt)) {
			used[l] = true
			return beforeMarkerReached
		}
	}
	return ""
}

// judgedLater reports whether an effect at `at` falls to a loss still
// open: its allowance is known once the loss is acknowledged. w.mu held.
func (w *world) judgedLaterLocked(at time.Time) bool {
	if !w.loss.open || len(w.loss.losses) == 0 {
		return false
	}
	return !at.Before(w.loss.losses[len(w.loss.losses)-1].lostAt)
}

// lossAfter reports whether slot id was exposed to a loss after t; w.mu
// held.
func (w *world) lossAfterLocked(id string, t time.Time) bool {
	for _, l := range w.loss.losses {
		if l.exposed[id] && l.lostAt.After(t) {
			return true
		}
	}
	return false
}

// summarizeLosses measures each loss's recovery and counts the served
// calls after each acknowledgement (an invariant: the fleet serves again).
// The recovery is reported, never asserted: the time until a one-second
// window of served calls reaches half the rate of the five seconds before
// the loss.
func (w *world) summarizeLosses() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.loss.losses {
		if !l.acked {
			continue
		}
		l.served = 0
		for _, c := range w.servedCalls {
			if c.start.After(l.ackedAt) {
				l.served++
			}
		}
		if l.served == 0 {
			w.c.violated["no_call_served_after_acknowledgement"]++
			w.out.printf("VIOLATION no_call_served_after_acknowledgement: %s acknowledged at %s", l.kind, l.ackedAt.Format("15:04:05.000"))
		}
		before := 0
		for _, c := range w.servedCalls {
			if !c.end.Before(l.lostAt.Add(-5*time.Second)) && c.end.Before(l.lostAt) {
				before++
			}
		}
		rate := float64(before) / 5
		recovered, cut := time.Duration(-1), false
		for off := time.Duration(0); off <= 9*time.Second; off += 100 * time.Millisecond {
			from := l.ackAt.Add(off)
			if from.Add(time.Second).After(w.stormEnd) {
				cut = true // the clients stopped: no window to measure
				break
			}
			n := 0
			for _, c := range w.servedCalls {
				if !c.end.Before(from) && c.end.Before(from.Add(time.Second)) {
					n++
				}
			}
			if float64(n) >= rate/2 {
				recovered = off + time.Second
				break
			}
		}
		detect := "not seen"
		if !l.detectedAt.IsZero() {
			detect = l.detectedAt.Sub(l.lostAt).Round(time.Millisecond).String()
		}
		line := fmt.Sprintf("%s (phase %s): %d slots exposed, detected after %s, acknowledged %s after the loss; %.0f calls/s before; ",
			l.kind, w.topology, len(l.exposed), detect, l.ackedAt.Sub(l.lostAt).Round(time.Millisecond), rate)
		if recovered >= 0 {
			w.c.notes["store_loss_recovered_to_half_within_10s"]++
			w.c.notes["store_loss_recovery_ms_max"] = max(w.c.notes["store_loss_recovery_ms_max"], int(recovered.Milliseconds()))
			line += fmt.Sprintf("back to half within %v of the acknowledgement", recovered)
		} else if cut {
			w.c.notes["store_loss_recovery_unmeasured_storm_ended"]++
			line += "not back to half before the storm ended (unmeasured)"
		} else {
			w.c.notes["store_loss_not_back_to_half_within_10s"]++
			line += "NOT back to half within 10s of the acknowledgement"
		}
		line += fmt.Sprintf("; %d calls served after it", l.served)
		w.c.lossLines = append(w.c.lossLines, line)
	}
}
