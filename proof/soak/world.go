package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/proof/internal/faultproxy"
)

// slot is one (workspace, tool, key): what one effect at most may come of.
type slot struct {
	id      string
	tenant  tenant
	tool    toolInfo
	key     string
	args    json.RawMessage
	created time.Time
}

// observation is what the soak has seen of a slot's record.
type observation struct {
	recordSeen  bool
	maxAttempts int
	settled     string // outcome the operator settled it as
	settledAt   time.Time
	inFlight    int       // calls of the slot under way
	lastActive  time.Time // the latest start or end of a call, or settle
}

// callSpan is when one served call (storeloss.go) started and ended.
type callSpan struct{ start, end time.Time }

// event is one line of a slot's history (or of the fault log).
type event struct {
	at   time.Time
	text string
}

// counts are the run's numbers; violations are the invariants.
type counts struct {
	calls    map[string]int
	byTool   map[string]int // "tool calls" and "tool accepted"
	faults   map[string]int
	settled  map[string]int
	notes    map[string]int
	violated map[string]int // invariant -> violations found
	// lossLines describe each store loss and the fleet's recovery.
	lossLines []string
}

// invariants in table order.
var invariants = []string{
	"duplicates", "attempt_count_below_vendor", "acknowledged_reservations_lost",
	"cross_tenant_results", "client_key_at_vendor", "secrets", "settled_not_replayed",
	"broker_retries_enabled", "linearizability", "no_call_served_after_acknowledgement",
	"upstream_obol_meta_passed_on",
}

// world is one phase: a Redis topology, a fleet of gateways, the vendors,
// the clients, the faults and the checks.
type world struct {
	opt      options
	topology string
	dir      string
	out      *logger
	creds    credentials
	vend     *vendors
	gws      []*gateway
	host     *redistest.Host
	cluster  *redistest.Cluster
	single   *redistest.Server
	proxies  []*faultproxy.Proxy // one per Redis node, in the order of the nodes; w.mu once the storm runs
	redisURL string
	start    time.Time

	mu           sync.Mutex
	slots        map[string]*slot
	obs          map[string]*observation
	history      map[string][]event
	faultLog     []event
	failovers    []time.Time // Redis failovers: a finalize or settle before one may roll back
	c            counts
	offending    []string          // slots with a violation, first found first
	firstOf      map[string]string // invariant -> the first slot that broke it
	laneReported int               // lane violations reported so far
	laneReport   string            // the lane's report of its first violation
	loss         lossState
	servedCalls  []callSpan                // calls the store took (storeloss.go)
	redispatched map[string]map[string]int // slot -> effects a store loss allows, by how (lossAllows)
	stormEnd     time.Time

	// topoMu serializes the changes of the Cluster's topology: a failover
	// (redisFault) and a reshard or a master added or removed (reshard.go).
	topoMu     sync.Mutex
	migrations []window // reshards, for the figures of store errors during them; w.mu

	callsN atomic.Int64
	pin    atomic.Int32 // 0: mail.a, 1: mail.b
}

func newCounts() counts {
	return counts{calls: map[string]int{}, byTool: map[string]int{}, faults: map[string]int{}, settled: map[string]int{}, notes: map[string]int{}, violated: map[string]int{}}
}

func (w *world) logSlot(id, format string, args ...any) {
	if id == "" {
		return
	}
	w.mu.Lock()
	w.history[id] = append(w.history[id], event{time.Now(), fmt.Sprintf(format, args...)})
	w.mu.Unlock()
}

func (w *world) fault(kind, format string, args ...any) {
	text := kind + ": " + fmt.Sprintf(format, args...)
	w.mu.Lock()
	w.c.faults[kind]++
	w.faultLog = append(w.faultLog, event{time.Now(), text})
	w.mu.Unlock()
	if kind == "harness_error" {
		// Always shown: the soak's own trouble, which the table only counts.
		w.out.printf("fault %s", text)
		return
	}
	w.out.verboseLine("fault %s", text)
}

func (w *world) note(kind string) {
	w.mu.Lock()
	w.c.notes[kind]++
	w.mu.Unlock()
}

// violation counts one broken invariant for slot (may be "" for a global
// one) and remembers the slot for the history print.
func (w *world) violation(inv, id, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.mu.Lock()
	w.c.violated[inv]++
	quiet := violationsLocked(w.c) > maxViolationLines
	if id != "" && !slices.Contains(w.offending, id) {
		w.offending = append(w.offending, id)
	}
	if id != "" && w.firstOf[inv] == "" {
		if w.firstOf == nil {
			w.firstOf = map[string]string{}
		}
		w.firstOf[inv] = id
	}
	if id != "" {
		w.history[id] = append(w.history[id], event{time.Now(), "VIOLATION " + inv + ": " + msg})
	}
	w.mu.Unlock()
	if !quiet {
		w.out.printf("VIOLATION %s: %s %s", inv, id, msg)
	}
}

// maxViolationLines bounds the VIOLATION lines printed as they are found;
// the table counts them all.
const maxViolationLines = 20

// setup starts Redis, the vendors and the gateways of the phase.
func (w *world) setup(ctx context.Context, bin string) error {
	w.host = redistest.NewHost(w.dir)
	var err error
	waitReplicas := 0
	switch w.topology {
	case "cluster":
		w.cluster, err = w.host.StartCluster(3, 1)
		if err != nil {
			return err
		}
		for _, n := range w.cluster.Nodes() {
			p, err := faultproxy.New(n.Addr())
			if err != nil {
				return err
			}
			w.proxies = append(w.proxies, p)
		}
		if err := w.announceProxies(); err != nil {
			return err
		}
		var addrs []string
		for _, p := range w.proxies {
			addrs = append(addrs, p.Addr())
		}
		w.redisURL = "redis://" + strings.Join(addrs, ",")
		waitReplicas = 1
	default:
		w.single, err = w.host.Start("--appendonly", "yes", "--appendfsync", "always")
		if err != nil {
			return err
		}
		p, err := faultproxy.New(w.single.Addr())
		if err != nil {
			return err
		}
		w.proxies = []*faultproxy.Proxy{p}
		w.redisURL = "redis://" + p.Addr()
	}
	w.vend, err = newVendors(8*time.Second, func(id, format string, args ...any) { w.logSlot(id, format, args...) })
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(w.dir, "gateway.json")
	if err := os.WriteFile(cfgPath, []byte(gatewayConfig(w.creds, w.vend.URL, waitReplicas)), 0o600); err != nil {
		return err
	}
	for i := range w.opt.gateways {
		port, err := freePort()
		if err != nil {
			return err
		}
		w.gws = append(w.gws, &gateway{idx: i, bin: bin, cfgPath: cfgPath, redis: w.redisURL,
			env: w.creds.envList(w.opt.broken), logPath: filepath.Join(w.dir, fmt.Sprintf("gateway%d.log", i)),
			base: fmt.Sprintf("http://127.0.0.1:%d", port)})
	}
	// The first gateway writes the fleet's scope version and deployment id;
	// the others start after it, together.
	if err := w.gws[0].startRetrying(ctx); err != nil {
		return err
	}
	errs := make([]error, len(w.gws))
	var wg sync.WaitGroup
	for i, g := range w.gws[1:] {
		wg.Go(func() { errs[i] = g.startRetrying(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// announceProxies makes every running Cluster node announce its proxy's
// port (cluster-announce-port), so that the gateways, which learn the
// nodes from CLUSTER SLOTS, reach every node through its fault proxy; then
// waits until every node's view shows only proxy ports. A restarted node
// announces its own port again until this runs.
func (w *world) announceProxies() error {
	nodes := w.cluster.Nodes()
	proxies := w.proxyList()
	for i, n := range nodes {
		if !n.Running() || i >= len(proxies) {
			continue
		}
		_, port, _ := strings.Cut(proxies[i].Addr(), ":")
		if _, err := n.Do("CONFIG", "SET", "cluster-announce-port", port); err != nil {
			return fmt.Errorf("soak: node %s: announce the proxy port: %w", n.Addr(), err)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		stale := ""
		for _, n := range nodes {
			if !n.Running() {
				continue
			}
			v, err := n.Do("CLUSTER", "NODES")
			text, _ := v.(string)
			if err != nil {
				stale = err.Error()
				break
			}
			for j, m := range nodes {
				if m.Running() && strings.Contains(text, m.Addr()+"@") {
					stale = fmt.Sprintf("node %s still sees node %d at %s", n.Addr(), j, m.Addr())
				}
			}
		}
		if stale == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: the cluster did not learn the proxy ports within 60s: %s", stale)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// proxyList returns the fault proxies, one per Redis node in the order of
// the nodes; a master added during the storm appends its own.
func (w *world) proxyList() []*faultproxy.Proxy {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]*faultproxy.Proxy(nil), w.proxies...)
}

// teardown stops everything the phase started; it is safe after a partial
// setup.
func (w *world) teardown() {
	var wg sync.WaitGroup
	for _, g := range w.gws {
		wg.Go(func() { g.stop(3 * time.Second) })
	}
	wg.Wait()
	if w.vend != nil {
		w.vend.close()
	}
	for _, p := range w.proxies {
		_ = p.Close() // only the listener's close can fail, and the run is over
	}
	if w.host != nil {
		w.host.Close()
	}
}

// gateway picks a running gateway with rng; nil if none runs.
func (w *world) pickGateway(rng *rand.Rand) *gateway {
	n := len(w.gws)
	off := rng.IntN(n)
	for i := range n {
		if g := w.gws[(off+i)%n]; g.running() {
			return g
		}
	}
	return nil
}

// newKey draws an idempotency key from rng, so that the workload is the
// same for the same seed.
func newKey(rng *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rng.UintN(256))
	}
	return "idt_" + hex.EncodeToString(b[:])
}

// slotFor returns the slot of (tenant, tool, key), creating it.
func (w *world) slotFor(t tenant, tl toolInfo, key string) *slot {
	id := t.id + "|" + tl.name + "|" + key
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.slots[id]; s != nil {
		return s
	}
	args, _ := json.Marshal(callBody{Slot: id, Marker: t.marker, Amount: 100 + len(w.slots)%900})
	s := &slot{id: id, tenant: t, tool: tl, key: key, args: args, created: time.Now()}
	w.slots[id] = s
	w.obs[id] = &observation{}
	return s
}

// checkReply applies the per-reply invariants: no secret, no other
// tenant's marker, a settled slot replays its settlement.
func (w *world) checkReply(s *slot, r reply, when time.Time, epoch int, open bool) {
	for _, sec := range w.creds.secrets() {
		if strings.Contains(string(r.body), sec) {
			w.violation("secrets", s.id, "a reply holds the secret %.12s...", sec)
		}
	}
	if strings.Contains(string(r.body), mcpPlanted) {
		w.violation("upstream_obol_meta_passed_on", s.id, "a reply carries the upstream's own dev.obol/ _meta member")
	}
	for _, t := range w.creds.tenants {
		if t.id != s.tenant.id && strings.Contains(string(r.body), t.marker) {
			w.violation("cross_tenant_results", s.id, "a reply to %s carries %s's marker", s.tenant.id, t.id)
		}
	}
	if r.transport != nil || r.refused || r.result.Meta.Approval != nil {
		return
	}
	rc := r.result.Meta.Receipt
	w.mu.Lock()
	o := w.obs[s.id]
	// An answer across a store loss or its acknowledgement may show a
	// record the store no longer holds.
	void := open || epoch != w.loss.epoch
	if !void {
		o.recordSeen = true
	}
	settled, settledAt := o.settled, o.settledAt
	rolledBack := w.failoverAfter(settledAt)
	lost := w.lossAfterLocked(s.id, settledAt)
	w.mu.Unlock()
	if settled != "" && settledAt.Before(when) && string(rc.Outcome) != settled {
		if lost {
			w.note("settle_lost_with_the_store")
		} else if rolledBack {
			w.note("settle_rolled_back_by_failover")
		} else {
			w.violation("settled_not_replayed", s.id, "settled %s, then a call got %s", settled, rc.Outcome)
		}
	}
}

// failoverAfter reports whether a Redis failover happened after t; w.mu held.
func (w *world) failoverAfter(t time.Time) bool {
	for _, f := range w.failovers {
		if f.After(t) {
			return true
		}
	}
	return false
}

// call runs one call of s through a gateway and records everything.
func (w *world) call(rng *rand.Rand, s *slot, ticket string) reply {
	g := w.pickGateway(rng)
	if g == nil {
		return reply{transport: fmt.Errorf("no gateway running")}
	}
	return w.callVia(g, s, ticket)
}

// callVia runs one call of s through g and records everything.
func (w *world) callVia(g *gateway, s *slot, ticket string) reply {
	tool := s.tool.name
	w.mu.Lock()
	start := time.Now()
	epoch, open := w.loss.epoch, w.loss.open
	w.obs[s.id].inFlight++
	w.obs[s.id].lastActive = start
	w.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 80*time.Second)
	r := callTool(ctx, g.url(), s.tenant.apiKey, tool, s.key, ticket, s.tool.metaKey, s.args)
	cancel()
	w.callsN.Add(1)
	w.mu.Lock()
	end := time.Now()
	w.obs[s.id].inFlight--
	w.obs[s.id].lastActive = end
	if r.served() {
		w.servedCalls = append(w.servedCalls, callSpan{start, end})
	}
	if w.overlapsReshard(start, time.Now()) {
		// Any cause: a reply dropped or a connection cut meanwhile answers
		// store_unavailable too (countMigrationErrors tells the causes).
		w.c.notes["reshard_calls_during"]++
		if r.refused && r.reason == "store_unavailable" {
			w.c.notes["reshard_calls_during_store_unavailable"]++
		}
	}
	w.c.calls[r.kind()]++
	w.c.byTool[tool+" calls"]++
	if !r.refused && r.transport == nil && r.result.Meta.Receipt.Outcome == "accepted" {
		w.c.byTool[tool+" accepted"]++
	}
	w.mu.Unlock()
	w.logSlot(s.id, "call via gateway %d (sent %s) -> %s", g.idx, start.Format("15:04:05.000"), r)
	w.checkReply(s, r, start, epoch, open)
	return r
}

// client runs the workload of one client until ctx ends: new calls, and
// retries of its earlier calls with the same key (after a lost answer, an
// unknown outcome, or just again).
func (w *world) client(ctx context.Context, idx int, sharedKeys []string) {
	// Two streams: what to do next (its draws are the same every
	// iteration, whatever happened), and the new calls themselves, so the
	// n-th new call of a client is the same call in every run of a seed.
	stream := uint64(idx) + 1000*uint64(len(w.topology))
	act := rand.New(rand.NewPCG(uint64(w.opt.seed), stream))
	gen := rand.New(rand.NewPCG(uint64(w.opt.seed), stream+1<<32))
	var mine, pending []*slot
	total := 0
	for _, t := range tools {
		total += t.weight
	}
	for ctx.Err() == nil {
		p, pick := act.IntN(100), act.Uint64()
		var s *slot
		switch {
		case len(pending) > 0 && p < 40:
			i := int(pick % uint64(len(pending)))
			s = pending[i]
			pending = slices.Delete(pending, i, i+1)
		case len(mine) > 0 && p < 55:
			s = mine[pick%uint64(len(mine))]
		default:
			t := w.creds.tenants[gen.IntN(len(w.creds.tenants))]
			n := gen.IntN(total)
			tl := tools[0]
			for _, c := range tools {
				if n < c.weight {
					tl = c
					break
				}
				n -= c.weight
			}
			key := newKey(gen)
			if gen.IntN(10) == 0 {
				// A key another tenant (or this one) uses too.
				key = sharedKeys[gen.IntN(len(sharedKeys))]
			}
			s = w.slotFor(t, tl, key)
			mine = append(mine, s)
		}
		r := w.call(act, s, "")
		if r.result.Meta.Approval != nil && r.result.Meta.Approval.Ticket != "" {
			r = w.approve(ctx, act, s, r.result.Meta.Approval.Ticket)
		}
		if !r.final() && len(pending) < 64 {
			pending = append(pending, s)
		}
		if r.transport != nil || r.refused {
			// Back off a little: the gateway may be down or Redis failing over.
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(50+pick%200) * time.Millisecond):
			}
		}
	}
}

// approve decides a held call (mostly approving it) and resumes it.
func (w *world) approve(ctx context.Context, rng *rand.Rand, s *slot, ticket string) reply {
	decision := "approve"
	if rng.IntN(5) == 0 {
		decision = "deny"
	}
	g := w.pickGateway(rng)
	if g == nil {
		return reply{transport: fmt.Errorf("no gateway running")}
	}
	code, _ := rest(ctx, "POST", g.url()+"/v1/approvals/"+ticket+"/"+decision, w.creds.approver, []byte(`{}`))
	w.logSlot(s.id, "approver %s ticket via gateway %d -> HTTP %d", decision, g.idx, code)
	return w.call(rng, s, ticket)
}

// operator lists unknown records and settles them by the vendor's own
// truth, as an on-call engineer would after asking the vendor.
func (w *world) operator(ctx context.Context) {
	rng := rand.New(rand.NewPCG(uint64(w.opt.seed), 7))
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(1500 * time.Millisecond):
		}
		w.settleRound(ctx, rng)
	}
}

func (w *world) settleRound(ctx context.Context, rng *rand.Rand) {
	for _, t := range w.creds.tenants {
		g := w.pickGateway(rng)
		if g == nil {
			return
		}
		code, body := rest(ctx, "GET", g.url()+"/v1/unknown?workspace="+t.id, w.creds.approver, nil)
		if code != 200 {
			continue
		}
		for _, sec := range w.creds.secrets() {
			if strings.Contains(string(body), sec) {
				w.violation("secrets", "", "the unknown listing holds the secret %.12s...", sec)
			}
		}
		var list unknownList
		if json.Unmarshal(body, &list) != nil {
			continue
		}
		for _, rc := range list.Unknown {
			id := t.id + "|" + rc.Tool + "|" + rc.IdempotencyKey
			outcome := "definitely_rejected"
			if w.vend.performed(id) {
				outcome = "accepted"
			}
			req, _ := json.Marshal(map[string]any{"outcome": outcome, "note": "soak operator: checked with the vendor", "attempt_count": rc.AttemptCount})
			u := g.url() + "/v1/receipts/" + rc.IdempotencyKey + "/resolve?tool=" + url.QueryEscape(rc.Tool) + "&workspace=" + t.id
			w.mu.Lock()
			at := time.Now()
			epoch, open := w.loss.epoch, w.loss.open
			if o := w.obs[id]; o != nil {
				o.lastActive = at // a settle is a write a snapshot restore undoes
			}
			w.mu.Unlock()
			code, _ := rest(ctx, "POST", u, w.creds.approver, req)
			w.logSlot(id, "operator: listed unknown (attempts=%d), settles %s via gateway %d -> HTTP %d", rc.AttemptCount, outcome, g.idx, code)
			if code == 200 {
				w.mu.Lock()
				w.c.settled[outcome]++
				if o := w.obs[id]; o != nil {
					o.settled, o.settledAt = outcome, at
					o.recordSeen = o.recordSeen || !open && epoch == w.loss.epoch
					o.lastActive = time.Now()
				}
				w.mu.Unlock()
			}
		}
	}
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
