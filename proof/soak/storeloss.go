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

	"github.com/redis/rueidis"
)

// This file is the store-amnesia faults of the single Redis (docs/DESIGN.md
// section 6, "Store amnesia"): the gateways' keyspace restored from an
// older snapshot, or emptied, while calls run; the harness waits for a
// gateway to report the loss, acknowledges it through the CLI as an
// operator would, and checks that the fleet serves again.
//
// Both act on the gateways' prefix only ("soak:"), in one script each, so
// that the linearizability lane (its own prefix, "soaklin:") keeps its
// history and keeps checking it: a whole-server FLUSHALL or DEBUG RELOAD
// would take the lane's records too, and the lane (a store of its own, not
// a gateway) would report that loss as non-linearizable histories. To the
// gateways, which read only their prefix, the scripts are the same event.

// gatewayPattern matches every key of the gateways (config.go's
// key_prefix) and none of the lane's.
const gatewayPattern = "soak:*"

// snapshotScript dumps every key of ARGV[1] with its absolute expiry (0:
// none), in one step: a snapshot of the gateways' keyspace at one instant.
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
    out[#out + 1] = k
    out[#out + 1] = tostring(at)
    out[#out + 1] = d
  end
end
return out`

// restoreScript deletes every key of ARGV[1], then restores the snapshot
// in ARGV[2..] (key, expiry, payload), skipping what has expired since:
// the gateways' keyspace goes back to the snapshot's instant at once.
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

// storeLoss is one injected loss and what followed it.
type storeLoss struct {
	kind       string    // "store_restored_from_snapshot" or "store_emptied"
	savedAt    time.Time // the snapshot's instant (restore only)
	lostAt     time.Time // the restore or the delete
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

// storeLossFault injects one loss into the single Redis and sees it
// through: the loss, its detection, the acknowledgement, a served call.
// It runs in the fault schedule's goroutine, so no other fault (a gateway
// killed, Redis killed) overlaps it, and it ignores the storm's end: a
// loss left unacknowledged would refuse every call of the final checks.
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
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{w.single.Addr()}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		w.fault("harness_error", "%s: %v", kind, err)
		return
	}
	defer c.Close()
	loss := &storeLoss{kind: kind}
	w.primeGateways(rng)
	var snapshot []string
	if kind == "store_restored_from_snapshot" {
		loss.savedAt = time.Now()
		snapshot, err = c.Do(ctx, c.B().Eval().Script(snapshotScript).Numkeys(0).Arg(gatewayPattern).Build()).AsStrSlice()
		if err != nil {
			w.fault("harness_error", "snapshot: %v", err)
			return
		}
		// Calls run on: records made, finalized, redispatched after the
		// snapshot; then every gateway reserves once more, past it.
		time.Sleep(time.Duration(1000+rng.IntN(1000)) * time.Millisecond)
		w.primeGateways(rng)
	}

	w.mu.Lock()
	loss.lostAt = time.Now()
	loss.exposed = map[string]bool{}
	for id, o := range w.obs {
		// Emptied: every record is gone. Restored: a record is back to
		// its snapshot, which differs only for slots active since.
		if kind == "store_emptied" || o.inFlight > 0 || !o.lastActive.Before(loss.savedAt) {
			loss.exposed[id] = true
		}
	}
	w.loss.losses = append(w.loss.losses, loss)
	w.loss.open = true
	w.loss.epoch++
	w.mu.Unlock()

	args := append([]string{gatewayPattern}, snapshot...)
	res, err := c.Do(ctx, c.B().Eval().Script(restoreScript).Numkeys(0).Arg(args...).Build()).AsIntSlice()
	if err != nil || len(res) != 2 {
		w.fault("harness_error", "%s: %v", kind, err)
		// Nothing may have changed: the acknowledgement below is still
		// right (it answers "nothing to acknowledge" then).
	} else if kind == "store_emptied" {
		w.fault(kind, "the gateways' %d keys deleted (%d slots exposed)", res[0], len(loss.exposed))
	} else {
		w.fault(kind, "the gateways' %d keys replaced by the %d of %v earlier (%d slots exposed)",
			res[0], res[1], loss.lostAt.Sub(loss.savedAt).Round(time.Millisecond), len(loss.exposed))
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
		loss.detectedAt = time.Now()
	}
	// Clients retry meanwhile: every retry of a lost key must be refused
	// until the acknowledgement.
	time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
	w.acknowledge(ctx, loss, ackVia, rng)
	w.probeRecovery(rng)
}

// primeGateways makes one new call through each gateway: each reserves an
// attempt, so each holds the store's current generation.
func (w *world) primeGateways(rng *rand.Rand) {
	for _, g := range w.gws {
		t := w.creds.tenants[rng.IntN(len(w.creds.tenants))]
		s := w.slotFor(t, tools[3], newKey(rng)) // chat.post: unsupported
		w.callVia(g, s, "")
	}
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

// redispatchedAfterLoss tells, of an effect at `at` that follows an effect
// at `prev` of the same slot, whether an acknowledged loss allows it: the
// slot was exposed to the loss, and the acknowledgement came between the
// two (the earlier effect's record was lost; the later one was dispatched
// after the operator accepted that). used marks the losses already spent
// on this slot: one loss allows one more effect. w.mu held.
func redispatchedAfterLoss(losses []*storeLoss, id string, prev, at time.Time, used map[*storeLoss]bool) bool {
	for _, l := range losses {
		if used[l] || !l.acked || !l.exposed[id] {
			continue
		}
		if prev.Before(l.ackAt) && !at.Before(l.ackAt) {
			used[l] = true
			return true
		}
	}
	return false
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
