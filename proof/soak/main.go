// Command soak is the chaos soak of the idempotency core: several
// reference-server processes on a 3-master + 3-replica Redis Cluster and on
// one Redis with AOF, many clients calling every kind of tool, and every
// fault at once (kill -9 of gateways, Redis master kills and failovers,
// Cluster slots resharded between masters and a master added and removed,
// dropped script replies, cut connections, vendors that hang up, answer 503
// or stall, capability pin changes, and the gateways' store restored from
// an older snapshot and emptied, on the Cluster master by master, each
// acknowledged through the operator CLI once a gateway reports it: see
// storeloss.go and keyspace.go), with an operator settling
// unknown calls by the vendor's truth. The invariants of the contract are
// checked every progress tick and at the end; any violation exits 1 with
// the seed and the history of the offending key.
//
// The fault schedule and the workload are drawn from -seed (math/rand/v2
// PCG streams): the same seed injects the same faults in the same order,
// and each client makes the same new calls (tenant, tool, key, arguments)
// in the same order. The timing of processes on a busy machine does not
// repeat, so the instants differ, and with them which call meets which
// fault and which earlier calls a client retries (it retries calls whose
// answer was lost or unknown).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/obol-gateway/obol/proof/internal/lincheck"
)

type options struct {
	duration time.Duration
	seed     int64
	gateways int
	clients  int
	topology string
	verbose  bool
	broken   string
}

// logger writes progress lines; verbose ones only with -v.
type logger struct {
	mu      sync.Mutex
	w       io.Writer
	start   time.Time
	verbose bool
}

func (l *logger) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "[%6.1fs] %s\n", time.Since(l.start).Seconds(), fmt.Sprintf(format, args...))
}

// dump prints a title line, then what write writes, unprefixed.
func (l *logger) dump(title string, write func(io.Writer) error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "[%6.1fs] %s\n", time.Since(l.start).Seconds(), title)
	if err := write(l.w); err != nil {
		fmt.Fprintf(l.w, "(the dump failed: %v)\n", err)
	}
}

func (l *logger) verboseLine(format string, args ...any) {
	if l.verbose {
		l.printf(format, args...)
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole soak; it returns the exit status: 0 clean, 1 a
// violation, 2 the soak itself could not run.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.DurationVar(&o.duration, "duration", time.Minute, "how long the storm lasts (split between topologies with -topology both)")
	fs.Int64Var(&o.seed, "seed", 0, "seed of the fault schedule and the workload (default: from the clock, always printed)")
	fs.IntVar(&o.gateways, "gateways", 3, "refserver processes")
	fs.IntVar(&o.clients, "clients", 16, "concurrent clients")
	fs.StringVar(&o.topology, "topology", "both", "cluster, single or both")
	fs.BoolVar(&o.verbose, "v", false, "print every fault as it is injected")
	fs.StringVar(&o.broken, "broken", "", "build refserver with -tags obolmutant and break its store this way (forget-records, blind-to-loss): the soak must fail")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !flagSet(fs, "seed") {
		o.seed = time.Now().UnixNano()
	}
	var topologies []string
	switch o.topology {
	case "both":
		topologies = []string{"cluster", "single"}
	case "cluster", "single":
		topologies = []string{o.topology}
	default:
		fmt.Fprintf(stderr, "soak: -topology %q: want cluster, single or both\n", o.topology)
		return 2
	}
	if o.gateways < 1 || o.clients < 1 || o.duration <= 0 {
		fmt.Fprintln(stderr, "soak: -gateways, -clients and -duration must be positive")
		return 2
	}
	out := &logger{w: stdout, start: time.Now(), verbose: o.verbose}
	out.printf("soak: seed %d (repeat with: go run ./proof/soak -seed %d -duration %v -gateways %d -clients %d -topology %s%s)",
		o.seed, o.seed, o.duration, o.gateways, o.clients, o.topology, brokenFlag(o.broken))

	dir, err := os.MkdirTemp("", "obol-soak-")
	if err != nil {
		fmt.Fprintln(stderr, "soak:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	bin, err := buildRefserver(ctx, dir, o.broken != "")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	creds := newCredentials(rand.New(rand.NewPCG(uint64(o.seed), 1)))

	total := newCounts()
	var worlds []*world
	status := 0
	for _, topo := range topologies {
		phaseDir, err := os.MkdirTemp(dir, topo+"-")
		if err != nil {
			fmt.Fprintln(stderr, "soak:", err)
			return 2
		}
		w := &world{opt: o, topology: topo, dir: phaseDir, out: out, creds: creds, start: time.Now(),
			slots: map[string]*slot{}, obs: map[string]*observation{}, history: map[string][]event{}, c: newCounts()}
		worlds = append(worlds, w)
		out.printf("phase %s: starting Redis, vendors and %d gateways", topo, o.gateways)
		err = w.setup(ctx, bin)
		if err == nil {
			err = w.runPhase(ctx, o.duration/time.Duration(len(topologies)))
		}
		w.teardown()
		w.mu.Lock()
		merge(&total, w.c)
		w.mu.Unlock()
		if err != nil {
			fmt.Fprintf(stderr, "soak: phase %s: %v\n", topo, err)
			status = 2
			break
		}
		if w.violations() > 0 {
			break // the first failing phase is enough to show
		}
	}
	printTable(stdout, o, total)
	if n := violations(total); n > 0 {
		fmt.Fprintf(stdout, "\nFAIL: %d invariant violations; seed %d\n", n, o.seed)
		for _, w := range worlds {
			w.printHistories(stdout, 3)
		}
		return 1
	}
	if status == 0 {
		fmt.Fprintf(stdout, "\nPASS: no invariant violated; seed %d\n", o.seed)
	}
	return status
}

func brokenFlag(b string) string {
	if b == "" {
		return ""
	}
	return " -broken " + b
}

func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// runPhase runs the storm for d, then quiesces and checks everything.
func (w *world) runPhase(ctx context.Context, d time.Duration) error {
	rng := rand.New(rand.NewPCG(uint64(w.opt.seed), 2))
	shared := make([]string, 16)
	for i := range shared {
		shared[i] = newKey(rng)
	}
	storm, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	w.mu.Lock()
	w.stormEnd = time.Now().Add(d)
	w.mu.Unlock()
	var wg, lasting sync.WaitGroup
	for i := range w.opt.clients {
		wg.Go(func() { w.client(storm, i, shared) })
	}
	wg.Go(func() { w.operator(storm) })
	wg.Go(func() { w.faults(storm, &lasting) })
	wg.Go(func() { w.mcpFaults(storm, &lasting) })
	if w.cluster != nil {
		wg.Go(func() { w.reshard(storm, d) })
	}
	ln, err := newLane(ctx, w)
	if err != nil {
		return err
	}
	defer ln.close()
	laneDone := make(chan struct{})
	go func() {
		defer close(laneDone)
		if err := ln.run(storm); err != nil {
			w.fault("harness_error", "linearizability lane: %v", err)
		}
	}()
	reported := map[string]bool{}
	checkRng := rand.New(rand.NewPCG(uint64(w.opt.seed), 5))
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for ticks := 1; storm.Err() == nil; ticks++ {
		select {
		case <-storm.Done():
		case <-tick.C:
			w.reportVendorTruth(reported)
			w.checkReceipts(storm, checkRng, 30, reported)
			if ticks%4 == 0 {
				// The lane checks keys it retires as it goes; this looks
				// at the ones still in use too.
				w.laneVerdict(ln.check(10 * time.Second))
			}
			w.progress()
			if w.violations() > 0 {
				w.out.printf("phase %s: a violation was found; stopping the storm early", w.topology)
				cancel()
			}
		}
	}
	w.out.printf("phase %s: storm over; waiting for calls in flight", w.topology)
	drained := make(chan struct{})
	go func() {
		wg.Wait()
		lasting.Wait()
		<-laneDone
		close(drained)
	}()
	if err := w.await(drained, inFlightBound, "calls in flight"); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	// Each step says it starts: a step that hangs is named by the last line.
	stop := w.watch(checksBound, "the checks after the storm")
	w.out.printf("phase %s: quiescing (Redis healthy, every gateway running)", w.topology)
	w.quiesce(ctx)
	// Let every lease lapse and every stalled attempt end, then settle what
	// is left unknown, and check everything once more.
	time.Sleep(5 * time.Second)
	w.out.printf("phase %s: settling what is left unknown, checking every receipt", w.topology)
	w.settleRound(ctx, checkRng)
	w.reportVendorTruth(reported)
	w.checkReceipts(ctx, checkRng, 0, reported)
	replayed := w.checkSettledReplay(checkRng)
	w.out.printf("phase %s: scanning Redis and the logs for secrets", w.topology)
	keys, err := w.scanRedis(ctx)
	if err != nil {
		w.fault("harness_error", "scan Redis: %v", err)
	}
	w.scanLogs()
	if w.cluster != nil {
		w.countMigrationErrors()
	}
	figures := w.vend.mcpFigures() // not under w.mu: the vendors log under theirs
	w.mu.Lock()
	for k, n := range figures {
		w.c.notes[k] += n
	}
	w.mu.Unlock()
	badAuth, brokerRetries := w.vend.counters()
	if brokerRetries > 0 {
		w.violation("broker_retries_enabled", "", "%d broker requests allowed the broker to retry", brokerRetries)
	}
	if badAuth > 0 {
		w.note("vendor_requests_without_secret")
	}
	w.out.printf("phase %s: checking the linearizability lane", w.topology)
	res := ln.check(2 * time.Minute)
	w.laneVerdict(res)
	w.mu.Lock()
	w.c.notes["lin_ops"] += res.Ops
	w.c.notes["lin_keys"] += res.Keys
	w.c.notes["lin_ambiguous"] += res.Ambiguous
	w.c.notes["lin_undecided"] += res.Undecided
	w.mu.Unlock()
	w.summarizeLosses()
	w.mu.Lock()
	for _, by := range w.redispatched {
		w.c.notes["redispatched_after_acknowledged_loss"] += by[afterAcknowledgement]
		w.c.notes["redispatched_before_loss_reached_gateway"] += by[beforeMarkerReached]
	}
	w.c.notes["settled_replays_checked"] += replayed
	w.c.notes["redis_keys_scanned"] += keys
	w.c.notes["slots"] += len(w.slots)
	w.mu.Unlock()
	w.progress()
	if stop() {
		return fmt.Errorf("the checks after the storm took more than %v (every goroutine's stack is above)", checksBound)
	}
	return nil
}

// inFlightBound bounds the wait for the storm's goroutines after it ends: a
// client's last call (80s at most, callTool), a fault that lasts, a
// topology change under way, the lane's last operations. Past it something
// waits for what never comes.
const inFlightBound = 2 * time.Minute

// await waits until done is closed. Past bound it prints the stack of
// every goroutine (what each one waits for), counts a harness error and
// returns an error: the phase cannot be checked while its calls may still
// change what the checks read.
func (w *world) await(done <-chan struct{}, bound time.Duration, what string) error {
	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	}
	w.stalled(what, bound)
	return fmt.Errorf("still waiting for %s after %v (every goroutine's stack is above)", what, bound)
}

// stalled counts a harness error and prints every goroutine's stack.
func (w *world) stalled(what string, after time.Duration) {
	w.fault("harness_error", "still waiting for %s after %v", what, after)
	w.out.dump(fmt.Sprintf("phase %s: still waiting for %s after %v; every goroutine:", w.topology, what, after),
		func(out io.Writer) error { return pprof.Lookup("goroutine").WriteTo(out, 2) })
}

// checksBound bounds the steps after the wait for calls in flight (quiesce,
// the final checks, the lane's check): minutes for a long soak on a busy
// machine, never ten.
const checksBound = 10 * time.Minute

// watch is await for work the calling goroutine does itself, which cannot
// be abandoned: past bound it prints every goroutine once, while the work
// goes on. The returned stop reports whether that happened.
func (w *world) watch(bound time.Duration, what string) (stop func() (stalled bool)) {
	t := time.AfterFunc(bound, func() { w.stalled(what, bound) })
	// Stop is false once the timer has expired: the dump was printed or is
	// being printed.
	return func() bool { return !t.Stop() }
}

// laneVerdict reports the lane's violations not reported yet. On a Cluster
// that failed over, a violation may be the contract's own allowance (a
// finalize or renewal is not WAITed, so a failover may roll it back): it is
// counted apart, and only the single Redis (appendfsync always, which loses
// nothing acknowledged) and a Cluster that never failed over count as
// linearizability violations.
func (w *world) laneVerdict(res lincheck.Result) {
	w.mu.Lock()
	fresh := res.Violations - w.laneReported
	w.laneReported = max(w.laneReported, res.Violations)
	failedOver := len(w.failovers) > 0
	w.mu.Unlock()
	if fresh <= 0 {
		return
	}
	if failedOver {
		w.mu.Lock()
		w.c.notes["lin_violations_after_failover"] += fresh
		w.mu.Unlock()
		w.out.printf("phase %s: %d keys of the linearizability lane not linearizable after a failover (unWAITed writes may roll back):\n%s",
			w.topology, fresh, firstLines(res.Report, 40))
		return
	}
	w.mu.Lock()
	w.laneReport = res.Report
	w.mu.Unlock()
	w.violation("linearizability", "", "%d keys of the lane not linearizable", fresh)
}

func (w *world) progress() {
	w.mu.Lock()
	defer w.mu.Unlock()
	faults := 0
	for _, n := range w.c.faults {
		faults += n
	}
	up := 0
	for _, g := range w.gws {
		if g.running() {
			up++
		}
	}
	var inv []string
	for _, k := range invariants {
		inv = append(inv, fmt.Sprintf("%s=%d", k, w.c.violated[k]))
	}
	w.out.printf("phase %s: calls=%d slots=%d faults=%d gateways_up=%d/%d settled=%d | %s",
		w.topology, w.callsN.Load(), len(w.slots), faults, up, len(w.gws), w.c.settled["accepted"]+w.c.settled["definitely_rejected"], strings.Join(inv, " "))
}

func violationsLocked(c counts) int {
	n := 0
	for _, v := range c.violated {
		n += v
	}
	return n
}

func violations(c counts) int { return violationsLocked(c) }

// violations counts w's violations so far; clients may be adding to them.
func (w *world) violations() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return violationsLocked(w.c)
}

func merge(dst *counts, src counts) {
	for _, p := range []struct{ d, s map[string]int }{
		{dst.calls, src.calls}, {dst.byTool, src.byTool}, {dst.faults, src.faults}, {dst.settled, src.settled}, {dst.notes, src.notes}, {dst.violated, src.violated},
	} {
		for k, v := range p.s {
			if k == "store_loss_recovery_ms_max" {
				p.d[k] = max(p.d[k], v)
				continue
			}
			p.d[k] += v
		}
	}
	dst.lossLines = append(dst.lossLines, src.lossLines...)
}

func printTable(w io.Writer, o options, c counts) {
	fmt.Fprintf(w, "\n==== soak summary: seed %d, %v, %d gateways, %d clients, topology %s%s ====\n",
		o.seed, o.duration, o.gateways, o.clients, o.topology, brokenFlag(o.broken))
	section := func(title string, m map[string]int) {
		total := 0
		for _, v := range m {
			total += v
		}
		fmt.Fprintf(w, "%s (total %d)\n", title, total)
		for _, k := range sortedKeys(m) {
			fmt.Fprintf(w, "  %-40s %8d\n", k, m[k])
		}
	}
	section("calls by outcome", c.calls)
	fmt.Fprintln(w, "calls by tool (answered accepted / all)")
	for _, t := range tools {
		fmt.Fprintf(w, "  %-40s %8s\n", t.name, fmt.Sprintf("%d/%d", c.byTool[t.name+" accepted"], c.byTool[t.name+" calls"]))
	}
	section("faults injected by kind", c.faults)
	section("unknown calls settled by the operator", c.settled)
	section("other figures", c.notes)
	fmt.Fprintf(w, "store losses, acknowledged through the CLI (%d)\n", len(c.lossLines))
	for _, l := range c.lossLines {
		fmt.Fprintf(w, "  %s\n", l)
	}
	fmt.Fprintln(w, "invariants (violations)")
	for _, inv := range invariants {
		v := fmt.Sprint(c.violated[inv])
		fmt.Fprintf(w, "  %-40s %8s\n", inv, v)
	}
}

// printHistories prints the history of offending slots: every call,
// reply, receipt, vendor request and operator step, and the faults during
// its life. The first slot of each violated invariant comes first (in the
// table's order), so that every kind of violation shows one history, and
// the others as found, up to n in all when the kinds take fewer.
func (w *world) printHistories(out io.Writer, n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.laneReport != "" {
		fmt.Fprintf(out, "\n---- linearizability lane, phase %s, seed %d: the first key no order explains ----\n%s\n",
			w.topology, w.opt.seed, firstLines(w.laneReport, 200))
	}
	var order []string
	for _, inv := range invariants {
		if id := w.firstOf[inv]; id != "" && !slices.Contains(order, id) {
			order = append(order, id)
		}
	}
	n = max(n, len(order))
	for _, id := range w.offending {
		if !slices.Contains(order, id) {
			order = append(order, id)
		}
	}
	for i, id := range order {
		if i == n {
			fmt.Fprintf(out, "(%d more offending keys not shown)\n", len(order)-n)
			break
		}
		s := w.slots[id]
		fmt.Fprintf(out, "\n---- history of key %s (tool %s, workspace %s, phase %s, seed %d) ----\n",
			s.key, s.tool.name, s.tenant.id, w.topology, w.opt.seed)
		evs := append([]event(nil), w.history[id]...)
		first, last := s.created, time.Now()
		if len(evs) > 0 {
			last = evs[len(evs)-1].at
		}
		for _, f := range w.faultLog {
			if !f.at.Before(first.Add(-2*time.Second)) && !f.at.After(last) {
				evs = append(evs, event{f.at, "FAULT " + f.text})
			}
		}
		sortEvents(evs)
		for _, e := range evs {
			fmt.Fprintf(out, "  %s  %s\n", e.at.Format("15:04:05.000"), strings.TrimSpace(e.text))
		}
	}
}

func sortEvents(evs []event) {
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].at.Before(evs[j-1].at); j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
}
