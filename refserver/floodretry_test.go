package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
)

const (
	loopKey = "ob_loop_workspace_loop"
	// loopFor and aloneFor are how long the retry loops and replay floods
	// run, and how long the calm workspace is measured alone first.
	loopFor  = 20 * time.Second
	aloneFor = 5 * time.Second
)

// loopConfig: ws_loop retries and replays under a quota; ws_calm calls at
// a steady rate with room to spare.
const loopConfig = `{
  "key_prefix": "loop:", "lease": "2s", "environment": "development",
  "default_quota": {"calls_per_second": 200, "burst": 200, "in_flight": 32},
  "workspaces": [
    {"id": "ws_loop", "api_keys": ["` + loopKey + `"], "quota": {"calls_per_second": 50, "burst": 50, "in_flight": 4}},
    {"id": "ws_calm", "api_keys": ["` + floodKeyCalm + `"]}
  ],
  "approver_keys": [{"name": "ops-loop", "key": "ob_loop_approver"}],
  "connections": [{"id": "conn_v", "provider": "loopvendor", "base_url": "{{VENDOR}}", "secret_env": "E2E_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "path": "/hangup", "spec": {"tool": "loop.hangup", "timeout": "2s",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/ping", "spec": {"tool": "loop.ping",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}}
  ]
}`

// TestRetryLoopsAndReplayFloods runs two built gateways on one real Redis
// (small maxmemory, noeviction). One workspace retry-loops calls whose
// vendor hangs up after reading (unknown, redispatchable: a header-bound
// tool) and replay-floods completed calls, each client under one key and
// as fast as it is answered, for 20 s; the other calls 20 times a second
// with new keys. The calm workspace keeps at least 99% of its calls
// accepted, Redis refuses no write for memory, the looping workspace
// reaches the vendor no faster than its rate, and no slot more than its
// max_attempts times. The calm workspace's p99
// alone and beside the flood are logged (speed is measured, not
// asserted).
func TestRetryLoopsAndReplayFloods(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs for 25 s")
	}
	vendor := refservertest.StartHangUpVendor(t, "/hangup", nil)
	var mu sync.Mutex // oddities
	r := redistest.Start(t, "--maxmemory", strconv.Itoa(floodMaxMemory), "--maxmemory-policy", "noeviction")
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(loopConfig, "{{VENDOR}}", vendor.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	procs := []*proc{startRefserver(t, "-config", path, "-redis", "redis://"+r.Addr()),
		startRefserver(t, "-config", path, "-redis", "redis://"+r.Addr())}
	call := func(tool string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
	}
	var seq atomic.Int64
	newKey := func() string { return fmt.Sprintf("idt_%032x", seq.Add(1)) }

	// calm calls every 50 ms until stop, and answers its latencies and
	// failures.
	calm := func(stop <-chan struct{}) (lat []time.Duration, failed []string) {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return lat, failed
			case <-tick.C:
			}
			start := time.Now()
			resp, b := rawPost(t, procs[n%2].base, http.MethodPost, floodKeyCalm, newKey(), call("loop.ping"))
			lat = append(lat, time.Since(start))
			if resp.StatusCode != 200 || !strings.Contains(string(b), `"outcome":"accepted"`) {
				failed = append(failed, fmt.Sprintf("status %d: %.200s", resp.StatusCode, b))
			}
		}
	}
	p99 := func(lat []time.Duration) time.Duration {
		s := slices.Clone(lat)
		slices.Sort(s)
		return s[(len(s)*99+99)/100-1]
	}
	stop := make(chan struct{})
	time.AfterFunc(aloneFor, func() { close(stop) })
	alone, aloneFailed := calm(stop)
	if len(aloneFailed) > 0 {
		t.Fatalf("the calm workspace alone: %d of %d failed: %q", len(aloneFailed), len(alone), aloneFailed[:1])
	}

	// The flood: on each gateway two clients retry-loop an unknown call
	// and two replay-flood an accepted one, each under its own key.
	var loops, replays, refused, odd atomic.Int64
	var oddities []string
	stop = make(chan struct{})
	var wg sync.WaitGroup
	began := time.Now()
	for i := range 8 {
		p, tool, key := procs[i%2], "loop.hangup", newKey()
		if i%4 >= 2 {
			tool = "loop.ping"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, b := rawPost(t, p.base, http.MethodPost, loopKey, key, call(tool))
				s := string(b)
				switch {
				case strings.Contains(s, `"reason":"quota_exceeded"`):
					refused.Add(1)
				case strings.Contains(s, `"replayed":true`):
					replays.Add(1)
				case strings.Contains(s, `"outcome":"unknown"`) || strings.Contains(s, `"reason":"outcome_unknown"`) ||
					strings.Contains(s, `"reason":"in_progress"`) || strings.Contains(s, `"outcome":"accepted"`):
					loops.Add(1)
				default:
					if odd.Add(1) <= 3 {
						mu.Lock()
						oddities = append(oddities, fmt.Sprintf("%.300s", s))
						mu.Unlock()
					}
				}
			}
		}()
	}
	time.AfterFunc(loopFor, func() { close(stop) })
	beside, besideFailed := calm(stop)
	wg.Wait()
	elapsed := time.Since(began)

	// Per slot: the vendor sees the slot's vendor key (a calm call's key
	// once).
	most := vendor.MostPerKey()
	t.Logf("calm alone: %d calls, p99 %v; beside the flood: %d calls, %d failed, p99 %v (%.1fx)",
		len(alone), p99(alone), len(beside), len(besideFailed), p99(beside), float64(p99(beside))/float64(p99(alone)))
	t.Logf("ws_loop: %d answered by the store (%d replays), %d quota_exceeded, %d other; vendor saw %d requests, at most %d per looped slot",
		loops.Load()+replays.Load(), replays.Load(), refused.Load(), odd.Load(), vendor.HungUp(), most)
	if len(besideFailed)*100 > len(beside) || len(beside) < 100 {
		t.Errorf("the calm workspace beside the flood: %d of %d failed: %q", len(besideFailed), len(beside), besideFailed[:min(len(besideFailed), 3)])
	}
	if odd.Load() > 0 {
		t.Errorf("ws_loop answers of no expected kind: %q", oddities)
	}
	if refused.Load() == 0 {
		t.Error("the looping workspace was never refused quota_exceeded")
	}
	// One bucket for the fleet bounds every claim of ws_loop, so its
	// requests to the vendor too: burst, the rate over the run, one lease
	// per gateway and the first call on credit.
	if bound := int64(50 + 50*elapsed.Seconds() + 2*(5+1)); loops.Load()+replays.Load() > bound || int64(vendor.HungUp()) > bound {
		t.Errorf("ws_loop: %d claims answered, %d requests sent; the bucket allows %d", loops.Load()+replays.Load(), vendor.HungUp(), bound)
	}
	// max_attempts (the default, 10) bounds each slot over its life,
	// however fast its client retries.
	if vendor.HungUp() == 0 || most > effectspec.DefaultMaxAttempts {
		t.Errorf("the vendor saw %d requests, at most %d per looped slot; want 1 to %d each", vendor.HungUp(), most, effectspec.DefaultMaxAttempts)
	}
	if oom := redisInfoInt(t, r, "errorstats", "errorstat_OOM"); oom != 0 {
		t.Errorf("Redis refused %d commands for memory", oom)
	}
}
