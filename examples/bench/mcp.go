package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/refservertest"
)

// Row 4's fixed names. The keys exist only in this run's processes.
const (
	mcpTool      = "payments.create_charge"
	mcpAPIKey    = "ob_bench_workspace_key"
	mcpAdminKey  = "ob_bench_approver_key"
	vendorSecret = "sk_bench_vendor_secret"
	vendorEnv    = "OBOL_BENCH_VENDOR_KEY"
	vendorPath   = "/v1/charges"
)

// refserverConfig is refserver's configuration for row 4: one native tool
// with a header binding on the local vendor, production environment.
const refserverConfig = `{
  "key_prefix": "obol:", "retention": "24h", "lease": "30s", "environment": "production",
  "workspaces": [{"id": "ws_bench", "api_keys": ["` + mcpAPIKey + `"]}],
  "approver_keys": [{"name": "bench", "key": "` + mcpAdminKey + `"}],
  "connections": [{"id": "conn_pay", "provider": "benchpay", "base_url": "{{VENDOR}}", "secret_env": "` + vendorEnv + `"}],
  "tools": [{"connection": "conn_pay", "method": "POST", "path": "` + vendorPath + `",
    "spec": {"tool": "` + mcpTool + `", "effect": "write", "route": "native",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"},
      "status": {"accepted": [200, 201], "definitely_rejected": [400, 402, 404, 422], "retryable": [429, 503], "in_use": [409]}}}]
}`

// vendor is the local vendor both servers call: it checks the secret,
// counts requests and answers 201 with a small JSON charge.
type vendor struct {
	url      string
	srv      *http.Server
	requests atomic.Int64
}

func startVendor() (*vendor, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	v := &vendor{url: "http://" + ln.Addr().String()}
	v.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != vendorPath || r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+vendorSecret {
			http.Error(w, `{"error":"bad request"}`, http.StatusBadRequest)
			return
		}
		io.Copy(io.Discard, r.Body)
		n := v.requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req_"+strconv.FormatInt(n, 10))
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"ch_%d","object":"charge","amount":1200,"currency":"usd","status":"succeeded"}`, n)
	}), ReadHeaderTimeout: 10 * time.Second}
	go v.srv.Serve(ln)
	return v, nil
}

func (v *vendor) close() { v.srv.Close() }

// child is a server process of row 4, its stderr in a file of the run's
// directory.
type child struct {
	name string
	base string // http://host:port
	srv  *refservertest.Server
	log  *os.File
}

// startChild runs o.Bin with o's arguments and environment and waits for
// its "listening on http://..." line.
func startChild(ctx context.Context, name string, o refservertest.Options, dir string) (*child, error) {
	c := &child{name: name}
	var err error
	if c.log, err = os.CreateTemp(dir, strings.ReplaceAll(name, " ", "-")+"-*.log"); err != nil {
		return nil, err
	}
	o.Log, o.Ready = c.log, 30*time.Second
	if c.srv, err = refservertest.Launch(ctx, o); err != nil {
		c.log.Close()
		return nil, fmt.Errorf("%s: %w: %s", name, err, c.logTail())
	}
	c.base = c.srv.Base
	return c, nil
}

func (c *child) logTail() string {
	b, _ := os.ReadFile(c.log.Name())
	b = bytes.TrimSpace(b)
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	return string(b)
}

// stop ends the child with SIGTERM first: refserver writes its profiles as
// it shuts down.
func (c *child) stop() {
	c.srv.Stop(10 * time.Second)
	c.log.Close()
}

// refserver returns the -refserver binary, or builds ./refserver once per
// run into o.tmp (rows 4 and 7 share it).
func (o *options) refserver(ctx context.Context) (string, error) {
	if o.refserverBin != "" {
		return o.refserverBin, nil
	}
	fmt.Fprintln(o.progress, "building refserver ...")
	bin := filepath.Join(o.tmp, "refserver")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./refserver")
	cmd.Dir = o.moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./refserver: %w: %s", err, bytes.TrimSpace(out))
	}
	o.refserverBin = bin
	return bin, nil
}

// callResult is one measurement of tools/call round trips.
type callResult struct {
	perSec   float64
	p50, p99 time.Duration
	calls    int
	// cpu and redis are the CPU time per call of the server process and of
	// Redis (user plus system); zero when unknown.
	cpu, redis time.Duration
}

func (r callResult) String() string {
	return fmt.Sprintf("%s p50 %s p99 %s", rate(r.perSec), dur(r.p50), dur(r.p99))
}

// load is what a row's clients call: the tool, its arguments (a format
// whose one verb is the client's number) and the count of the requests its
// vendor received.
type load struct {
	tool string
	args string
	seen func() int64
}

// vendorLoad is row 4's load on v.
func vendorLoad(v *vendor) load {
	return load{tool: mcpTool, args: `{"amount":1200,"currency":"usd","customer":"cus_%d"}`, seen: v.requests.Load}
}

// loadCalls runs c clients, each sending tools/call with a fresh
// Idempotency-Key back to back for d, and checks that every call succeeded
// and that the vendor saw exactly one request per call.
func loadCalls(ctx context.Context, base string, l load, c int, d time.Duration) (callResult, error) {
	tr := &http.Transport{MaxIdleConnsPerHost: c, MaxIdleConns: c, DisableCompression: true}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	var (
		stop atomic.Bool
		wg   sync.WaitGroup
		mu   sync.Mutex
		lat  []time.Duration
		fail error
	)
	before := l.seen()
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for i := range c {
		wg.Go(func() {
			var mine []time.Duration
			for n := 0; !stop.Load() && ctx.Err() == nil; n++ {
				body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":`+l.args+`}}`, n, l.tool, i)
				t0 := time.Now()
				if err := callOnce(ctx, hc, base, body); err != nil {
					mu.Lock()
					fail = errors.Join(fail, err)
					mu.Unlock()
					stop.Store(true)
					break
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if fail != nil {
		return callResult{}, fail
	}
	if len(lat) == 0 {
		return callResult{}, errors.New("no call completed")
	}
	if seen := l.seen() - before; seen != int64(len(lat)) {
		return callResult{}, fmt.Errorf("the vendor saw %d requests for %d calls", seen, len(lat))
	}
	slices.Sort(lat)
	return callResult{
		calls:  len(lat),
		perSec: float64(len(lat)) / elapsed.Seconds(),
		p50:    lat[len(lat)*50/100],
		p99:    lat[min(len(lat)-1, len(lat)*99/100)],
	}, nil
}

func callOnce(ctx context.Context, hc *http.Client, base, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+mcpAPIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Idempotency-Key", idempotency.NewKey().String())
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(out, []byte(`"result"`)) || bytes.Contains(out, []byte(`"isError":true`)) {
		if len(out) > 300 {
			out = out[:300]
		}
		return fmt.Errorf("tools/call answered %d: %s", resp.StatusCode, out)
	}
	return nil
}

// mcpRows measures row 4: refserver (claim, one vendor request, finalize,
// receipt) against the bare server (the same SDK server forwarding with
// retry.Executor, no idempotency), each in its own process, alternating.
func mcpRows(ctx context.Context, o *options, e *env, t *table) error {
	dir, err := os.MkdirTemp("", "obol-bench-mcp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	v, err := startVendor()
	if err != nil {
		return err
	}
	defer v.close()

	bin, err := o.refserver(ctx)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "refserver.json")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(refserverConfig, "{{VENDOR}}", v.url)), 0o600); err != nil {
		return err
	}
	// A production gateway: the fleet's deployment id (the one the
	// harness's store already made) and its store initialised, as an
	// operator does before the first start (refserver store init).
	env := []string{vendorEnv + "=" + vendorSecret, "OBOL_DEPLOYMENT_ID=" + e.store.Deployment()}
	initCmd := exec.CommandContext(ctx, bin, "store", "init", "-config", cfgPath, "-redis", o.redisURL)
	initCmd.Env = append(os.Environ(), env...)
	if out, err := initCmd.CombinedOutput(); err != nil {
		return fmt.Errorf("refserver store init: %w: %s", err, bytes.TrimSpace(out))
	}
	rc := refservertest.Options{Bin: bin, Args: []string{"-config", cfgPath, "-redis", o.redisURL}, Env: env}
	if o.serverProfile != "" {
		if err := os.MkdirAll(o.serverProfile, 0o755); err != nil {
			return err
		}
		rc.Args = append(rc.Args, "-cpuprofile", filepath.Join(o.serverProfile, "refserver.cpu.pprof"))
		if o.serverTrace {
			rc.Args = append(rc.Args, "-exectrace", filepath.Join(o.serverProfile, "refserver.trace"))
		}
	}
	ref, err := startChild(ctx, "refserver", rc, dir)
	if err != nil {
		return err
	}
	defer ref.stop()

	self, err := os.Executable()
	if err != nil {
		return err
	}
	// With -refserver-profile, the bare and limit servers profile too, so
	// that the profiles can be compared call for call.
	profile := func(name string) []string {
		if o.serverProfile == "" {
			return nil
		}
		args := []string{"-cpuprofile", filepath.Join(o.serverProfile, name+".cpu.pprof")}
		if o.serverTrace {
			args = append(args, "-exectrace", filepath.Join(o.serverProfile, name+".trace"))
		}
		return args
	}
	bare, err := startChild(ctx, "bare server", refservertest.Options{Bin: self, Args: append([]string{"-vendor", v.url + vendorPath}, profile("bare")...),
		Env: []string{roleEnv + "=bare", vendorEnv + "=" + vendorSecret}}, dir)
	if err != nil {
		return err
	}
	defer bare.stop()
	lim, err := startChild(ctx, "limit server", refservertest.Options{Bin: self, Args: append([]string{"-vendor", v.url + vendorPath, "-redis", o.redisURL}, profile("limit")...),
		Env: []string{roleEnv + "=limit", vendorEnv + "=" + vendorSecret}}, dir)
	if err != nil {
		return err
	}
	defer lim.stop()

	// Warm them up: connections, pools, first-call allocations.
	warm := min(o.duration/2, time.Second)
	for _, base := range []string{ref.base, bare.base, lim.base} {
		if _, err := loadCalls(ctx, base, vendorLoad(v), slices.Max(o.mcpClients), warm); err != nil {
			return err
		}
	}
	for _, clients := range o.mcpClients {
		if err := mcpRow(ctx, o, e, t, v, ref, bare, lim, clients); err != nil {
			return err
		}
	}
	return e.flush(ctx)
}

// limitTarget is row 4's target against the limit server, at any number of
// clients: the limit pays the two round trips of the contract and nothing
// else, and 5% of it is the budget for all the CPU work of the layer.
const limitTarget = 0.95

// mcpRounds is how many rounds row 4 measures: the -rounds flag, but at
// least 5 in a full run, each of them alternating the three servers.
func mcpRounds(o *options) int {
	if o.quick {
		return o.rounds
	}
	return max(o.rounds, 5)
}

// mcpRow measures one count of clients of row 4 against each server,
// rotating which goes first over the rounds.
func mcpRow(ctx context.Context, o *options, e *env, t *table, v *vendor, ref, bare, lim *child, clients int) error {
	who := fmt.Sprintf("%d clients", clients)
	if clients == 1 {
		who = "1 client"
	}
	var ours, ref0, limits []callResult
	var inside []map[string]time.Duration
	sides := []func() error{
		func() error {
			if err := e.flush(ctx); err != nil {
				return err
			}
			before, err := scrapeHistograms(ctx, ref.base)
			if err != nil {
				return fmt.Errorf("refserver: %w", err)
			}
			if err := e.quiesce(ctx); err != nil {
				return err
			}
			r, err := measureCalls(ctx, e, ref, vendorLoad(v), clients, o.duration)
			if err != nil {
				return fmt.Errorf("refserver: %w", err)
			}
			after, err := scrapeHistograms(ctx, ref.base)
			if err != nil {
				return fmt.Errorf("refserver: %w", err)
			}
			// A reading this scrape started must not fall on the next
			// server's measurement either.
			if err := e.quiesce(ctx); err != nil {
				return err
			}
			m, err := insideMeans(before, after)
			if err != nil {
				return err
			}
			ours, inside = append(ours, r), append(inside, m)
			return nil
		},
		func() error {
			r, err := measureCalls(ctx, e, bare, vendorLoad(v), clients, o.duration)
			if err != nil {
				return fmt.Errorf("bare server: %w", err)
			}
			ref0 = append(ref0, r)
			return nil
		},
		func() error {
			if err := e.flush(ctx); err != nil {
				return err
			}
			r, err := measureCalls(ctx, e, lim, vendorLoad(v), clients, o.duration)
			if err != nil {
				return fmt.Errorf("limit server: %w", err)
			}
			limits = append(limits, r)
			return nil
		},
	}
	for round := range mcpRounds(o) {
		for j := range sides {
			if err := sides[(round+j)%len(sides)](); err != nil {
				return err
			}
		}
		lo, ll, lb := ours[len(ours)-1], limits[len(limits)-1], ref0[len(ref0)-1]
		fmt.Fprintf(o.progress, "tools/call, %s, round %d: refserver %v (CPU %s, Redis %s), limit %v (CPU %s, Redis %s), bare %v (CPU %s)\n", who, round+1,
			lo, dur(lo.cpu), dur(lo.redis), ll, dur(ll.cpu), dur(ll.redis), lb, dur(lb.cpu))
	}
	mo, ml, mb := medianCalls(ours), medianCalls(limits), medianCalls(ref0)
	r := mo.perSec / ml.perSec
	t.add(row{"4", fmt.Sprintf("tools/call, %s: refserver vs the limit server (the same SDK server running claim and finalize scripts)", who),
		mo.String() + spread(ours), ml.String() + spread(limits), fmt.Sprintf("%.2f", r), fmt.Sprintf(">= %.2f", limitTarget), verdict(r >= limitTarget)})
	t.add(row{"4", fmt.Sprintf("tools/call, %s: refserver vs same SDK server without idempotency", who),
		mo.String(), mb.String() + spread(ref0), fmt.Sprintf("%.2f", mo.perSec/mb.perSec), "-", info})
	cpuRatio := "-"
	if c, l := medianCPU(ours), medianCPU(limits); c > 0 && l > 0 {
		cpuRatio = fmt.Sprintf("%.2f", float64(c)/float64(l))
	}
	t.add(row{"4", fmt.Sprintf("tools/call, %s: CPU time per call, the server's process and Redis (ratio: refserver's process over the limit's)", who),
		cpuText(ours), cpuText(limits), cpuRatio, "-", info})
	parts := make([]string, 0, len(insideSeries))
	for _, s := range insideSeries {
		var ds []float64
		for _, m := range inside {
			ds = append(ds, float64(m[s.label]))
		}
		parts = append(parts, s.label+" "+dur(time.Duration(median(ds))))
	}
	ref1 := "-"
	if clients == 1 {
		// At one client every process waits idle between the hops of a
		// call; a round trip then costs what this machine takes to wake
		// Redis and the caller, not what Redis takes to answer.
		idle, err := idleRoundTrip(ctx, e, 500*time.Microsecond, 2000)
		if err != nil {
			return err
		}
		hot, err := idleRoundTrip(ctx, e, 0, 2000)
		if err != nil {
			return err
		}
		ref1 = fmt.Sprintf("PING p50 %s after 0.5ms idle, %s back to back", dur(idle), dur(hot))
	}
	t.add(row{"4", fmt.Sprintf("tools/call, %s, inside refserver per call, means (/metrics)", who),
		strings.Join(parts, ", "), ref1, "-", "-", info})
	return nil
}

// measureCalls is loadCalls against c, with the CPU time c's process and
// Redis spent per call. At 32 clients every process shares the two cores,
// so the rate follows total CPU per call; these say whose it is.
func measureCalls(ctx context.Context, e *env, c *child, l load, clients int, d time.Duration) (callResult, error) {
	pid := c.srv.Cmd.Process.Pid
	cpu0, cerr := procCPU(pid)
	red0, rerr := e.redisCPU(ctx)
	r, err := loadCalls(ctx, c.base, l, clients, d)
	if err != nil {
		return r, err
	}
	cpu1, cerr1 := procCPU(pid)
	red1, rerr1 := e.redisCPU(ctx)
	if cerr == nil && cerr1 == nil {
		r.cpu = (cpu1 - cpu0) / time.Duration(r.calls)
	}
	if rerr == nil && rerr1 == nil {
		r.redis = time.Duration((red1 - red0) * 1e3 / float64(r.calls))
	}
	return r, nil
}

// procCPU is the CPU time (user plus system) process pid has used, from
// /proc/PID/stat, at the kernel's tick resolution (10 ms: a measurement's
// thousands of calls make it fine enough).
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("bench: /proc stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("bench: /proc stat: too few fields")
	}
	// Fields 14 and 15 (utime, stime); f[0] is field 3.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const tick = 10 * time.Millisecond // USER_HZ, 100 on Linux
	return time.Duration(ut+st) * tick, nil
}

// medianCPU is the median process CPU per call of rs.
func medianCPU(rs []callResult) time.Duration {
	var c []float64
	for _, x := range rs {
		c = append(c, float64(x.cpu))
	}
	return time.Duration(median(c))
}

// cpuText shows the CPU per call of measurements rs (medians).
func cpuText(rs []callResult) string {
	var c, r []float64
	for _, x := range rs {
		c, r = append(c, float64(x.cpu)), append(r, float64(x.redis))
	}
	if median(c) == 0 {
		return "-"
	}
	return fmt.Sprintf("process %s, Redis %s", dur(time.Duration(median(c))), dur(time.Duration(median(r))))
}

// spread is the range of the rates of rs, to show next to their median.
func spread(rs []callResult) string {
	lo, hi := rs[0].perSec, rs[0].perSec
	for _, r := range rs {
		lo, hi = min(lo, r.perSec), max(hi, r.perSec)
	}
	return fmt.Sprintf(" (rate %s-%s)", rate(lo), rate(hi))
}

func medianCalls(rs []callResult) callResult {
	var ps, p50, p99 []float64
	for _, r := range rs {
		ps, p50, p99 = append(ps, r.perSec), append(p50, float64(r.p50)), append(p99, float64(r.p99))
	}
	return callResult{perSec: median(ps), p50: time.Duration(median(p50)), p99: time.Duration(median(p99))}
}
