package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"sync"
	"time"
)

// faults runs the fault schedule drawn from the seed until ctx ends. Faults
// that last (a gateway down, a vendor mode) end in their own goroutine, which
// wg waits for.
func (w *world) faults(ctx context.Context, wg *sync.WaitGroup) {
	rng := rand.New(rand.NewPCG(uint64(w.opt.seed), 3+uint64(len(w.topology))))
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	// The store losses have their own instants and stream (storeloss.go),
	// so the schedule above is the same with or without them.
	var plan []storeLossStep
	if deadline, ok := ctx.Deadline(); ok {
		plan = storeLossPlan(time.Now(), time.Until(deadline))
	}
	lossRng := rand.New(rand.NewPCG(uint64(w.opt.seed), 11))
	for sleep(time.Duration(500+rng.IntN(1300)) * time.Millisecond) {
		if len(plan) > 0 && !time.Now().Before(plan[0].at) {
			w.storeLossFault(ctx, lossRng, plan[0].kind)
			plan = plan[1:]
			continue
		}
		switch p := rng.IntN(100); {
		case p < 28:
			g := w.gws[rng.IntN(len(w.gws))]
			down := time.Duration(300+rng.IntN(1700)) * time.Millisecond
			if !g.running() {
				continue
			}
			g.kill()
			w.fault("gateway_kill9", "gateway %d killed, back in %v", g.idx, down)
			wg.Go(func() {
				time.Sleep(down)
				// Retries end with the storm (quiesce starts what is still
				// down): a minute of retries after it would outlast the wait
				// for calls in flight.
				if err := g.startRetrying(ctx); err != nil && ctx.Err() == nil {
					w.fault("harness_error", "gateway %d did not restart: %v", g.idx, err)
				}
			})
		case p < 38:
			w.redisFault(rng)
		case p < 52:
			n := 1 + rng.IntN(3)
			proxies := w.proxyList()
			px := proxies[rng.IntN(len(proxies))]
			px.DropReplies(n)
			w.fault("redis_reply_dropped", "the next %d script replies through %s are dropped and their connections cut", n, px.Addr())
		case p < 60:
			cut := 0
			for _, px := range w.proxyList() {
				cut += px.CutAll()
			}
			w.fault("redis_conns_cut", "%d connections to Redis cut", cut)
		case p < 88:
			name := routeNames[rng.IntN(len(routeNames))]
			mode := []vendorMode{mode503, modeHangup, modeStall}[rng.IntN(3)]
			d := time.Duration(300+rng.IntN(1500)) * time.Millisecond
			w.vend.setMode(name, mode)
			w.fault("vendor_"+string(mode), "vendor %s answers %s for %v", name, mode, d)
			wg.Go(func() {
				time.Sleep(d)
				w.vend.setMode(name, modeNormal)
			})
		default:
			to := []string{"mail.a", "mail.b"}[1-w.pin.Load()]
			g := w.pickGateway(rng)
			if g == nil {
				continue
			}
			body, _ := json.Marshal(map[string]string{"provider": to})
			code, _ := rest(ctx, "POST", g.url()+"/v1/capabilities/cap.send/pin", w.creds.approver, body)
			if code == 200 {
				w.pin.Store(1 - w.pin.Load())
			}
			w.fault("pin_change", "cap.send pinned to %s -> HTTP %d", to, code)
		}
	}
}

// mcpFaults runs the MCP upstreams' fault schedule until ctx ends: its own
// stream, so the schedule above is the same with or without them. It goes
// through every (upstream, mode) pair in an order drawn from the seed,
// then again, so that a phase of 30 s meets each mode on each upstream.
func (w *world) mcpFaults(ctx context.Context, wg *sync.WaitGroup) {
	rng := rand.New(rand.NewPCG(uint64(w.opt.seed), 13+uint64(len(w.topology))))
	type pair struct {
		name string
		mode vendorMode
	}
	var pairs []pair
	for _, name := range mcpRouteNames {
		for _, m := range modesFor(name) {
			pairs = append(pairs, pair{name, m})
		}
	}
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(1200+rng.IntN(1200)) * time.Millisecond):
		}
		if i%len(pairs) == 0 {
			rng.Shuffle(len(pairs), func(a, b int) { pairs[a], pairs[b] = pairs[b], pairs[a] })
		}
		name, mode := pairs[i%len(pairs)].name, pairs[i%len(pairs)].mode
		d := time.Duration(300+rng.IntN(1200)) * time.Millisecond
		if mode == modeSessionsLost {
			n := w.vend.expireSessions(name)
			w.fault("mcp_"+string(mode), "upstream %s forgets its %d sessions", name, n)
			continue
		}
		w.vend.setMode(name, mode)
		w.fault("mcp_"+string(mode), "upstream %s answers %s for %v", name, mode, d)
		wg.Go(func() {
			time.Sleep(d)
			w.vend.setMode(name, modeNormal)
		})
	}
}

// redisFault kills Redis: a Cluster master (its replica takes over; the old
// master comes back as a replica), or the single Redis (AOF, appendfsync
// always: it comes back with every acknowledged write).
func (w *world) redisFault(rng *rand.Rand) {
	if w.cluster == nil {
		// With appendfsync always nothing acknowledged may roll back, so
		// this is no failover for the settle check.
		w.single.Kill()
		w.fault("redis_kill9_restart", "single Redis killed")
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		if err := w.single.Relaunch(); err != nil {
			w.fault("harness_error", "Redis did not restart: %v", err)
		}
		return
	}
	// One topology change at a time: a reshard never meets a failover
	// half done (reshard.go).
	w.topoMu.Lock()
	defer w.topoMu.Unlock()
	var masters []int
	for i, n := range w.cluster.Nodes() {
		if !n.Running() {
			continue
		}
		if r, err := n.Do("ROLE"); err == nil {
			if a, ok := r.([]any); ok && len(a) > 0 && a[0] == "master" {
				masters = append(masters, i)
			}
		}
	}
	if len(masters) == 0 {
		return
	}
	i := masters[rng.IntN(len(masters))]
	node := w.cluster.Node(i)
	node.Kill()
	w.mu.Lock()
	w.failovers = append(w.failovers, time.Now())
	w.mu.Unlock()
	w.fault("redis_master_kill9_failover", "master node %d (%s) killed", i, node.Addr())
	if err := w.cluster.Ready(60 * time.Second); err != nil {
		w.fault("harness_error", "no failover: %v", err)
	}
	if err := node.Relaunch(); err != nil {
		w.fault("harness_error", "node %d did not restart: %v", i, err)
		return
	}
	if err := w.cluster.Ready(60 * time.Second); err != nil {
		w.fault("harness_error", "cluster not healthy after the restart: %v", err)
	}
	if err := w.announceProxies(); err != nil {
		w.fault("harness_error", "%v", err)
	}
}
