package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
)

const (
	floodKeyFlood = "ob_flood_workspace_flood"
	floodKeyCalm  = "ob_flood_workspace_calm"
	// floodMaxMemory is the Redis the flood runs against: small, never
	// evicting.
	floodMaxMemory = 8 << 20
	// The flooding workspace's quota: a rate whose records would fill
	// floodMaxMemory in a few seconds, and a stored-bytes share far
	// below it.
	floodRate   = 40
	floodBurst  = 40
	floodStored = 1 << 20
	// floodBody is the size of an accepted flood call's vendor answer:
	// random, so it does not compress, and within what the store keeps.
	floodBody = 48 << 10
)

// floodConfig: ws_flood limited, ws_calm with room for its steady calls.
const floodConfig = `{
  "key_prefix": "flood:", "lease": "5s", "environment": "development",
  "default_quota": {"calls_per_second": 200, "burst": 200, "in_flight": 32},
  "workspaces": [
    {"id": "ws_flood", "api_keys": ["` + floodKeyFlood + `"],
     "quota": {"calls_per_second": {{RATE}}, "burst": {{BURST}}, "stored_bytes": {{STORED}}, "in_flight": 8}},
    {"id": "ws_calm", "api_keys": ["` + floodKeyCalm + `"]}
  ],
  "approver_keys": [{"name": "ops-flood", "key": "ob_flood_approver"}],
  "connections": [{"id": "conn_v", "provider": "floodvendor", "base_url": "{{VENDOR}}", "secret_env": "E2E_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "path": "/big", "spec": {"tool": "flood.big",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/hangup", "spec": {"tool": "flood.hangup", "timeout": "2s",
      "idempotency": {"binding": "unsupported"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/ping", "spec": {"tool": "calm.ping",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}}
  ]
}`

// floodVendor answers /big with floodBody random bytes (base64), /ping
// with a few bytes, and hangs up on /hangup after reading the request, so
// that call's outcome is unknown.
func floodVendor(t *testing.T) *refservertest.HangUpVendor {
	return refservertest.StartHangUpVendor(t, "/hangup", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			raw := make([]byte, floodBody*3/4)
			rand.Read(raw)
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"blob":%q}`, base64.StdEncoding.EncodeToString(raw))
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"ok":true}`))
	}))
}

// floodTally is what a flood run saw.
type floodTally struct {
	floodNew      atomic.Int64 // flood calls that made a record (accepted or unknown)
	floodQuota    atomic.Int64 // quota_exceeded with retry_after_ms and Retry-After
	floodFull     atomic.Int64 // store_full
	floodOther    atomic.Int64
	calmOK        atomic.Int64
	calmFailed    atomic.Int64
	mu            sync.Mutex
	calmFailures  []string
	floodOddities []string
}

func (ft *floodTally) note(list *[]string, s string) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if len(*list) < 5 {
		*list = append(*list, s)
	}
}

var retryAfterMS = regexp.MustCompile(`"retry_after_ms":([0-9]+)`)

// TestFloodFairShare runs the built gateway against a real Redis with a
// small maxmemory (noeviction): one workspace floods it (8 clients, big
// incompressible answers and calls that end unknown) while the other calls
// at a steady rate, on one gateway and then on two sharing the budget. The
// flooder is refused quota_exceeded with retry_after_ms and Retry-After,
// Redis never refuses a write for memory (no OOM in its error stats, its
// used memory below maxmemory at every reading, no out_of_memory answer),
// at least 99% of the calm workspace's calls are accepted, and the fleet
// admits no more flood records than one bucket allows.
func TestFloodFairShare(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	vendor := floodVendor(t)
	for _, gateways := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d gateways", gateways), func(t *testing.T) {
			r := redistest.Start(t, "--maxmemory", strconv.Itoa(floodMaxMemory), "--maxmemory-policy", "noeviction")
			cfg := strings.NewReplacer("{{VENDOR}}", vendor.URL, "{{RATE}}", strconv.Itoa(floodRate),
				"{{BURST}}", strconv.Itoa(floodBurst), "{{STORED}}", strconv.Itoa(floodStored)).Replace(floodConfig)
			path := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			var procs []*proc
			for range gateways {
				procs = append(procs, startRefserver(t, "-config", path, "-redis", "redis://"+r.Addr()))
			}
			runFlood(t, r, procs)
		})
	}
}

// floodFor is how long the flood lasts.
const floodFor = 4 * time.Second

func runFlood(t *testing.T, r *redistest.Server, procs []*proc) {
	var ft floodTally
	var maxUsed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Redis's memory, every 50 ms.
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if used := redisInfoInt(t, r, "memory", "used_memory"); used > maxUsed.Load() {
				maxUsed.Store(used)
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	var seq atomic.Int64
	newKey := func() string { return fmt.Sprintf("idt_%032x", seq.Add(1)) }
	callBody := func(tool string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
	}
	start := time.Now()
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := procs[i%len(procs)]
			tool := "flood.big"
			if i%2 == 1 {
				tool = "flood.hangup"
			}
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				resp, b := rawPost(t, p.base, http.MethodPost, floodKeyFlood, newKey(), callBody(tool))
				s := string(b)
				switch {
				case strings.Contains(s, `"reason":"quota_exceeded"`):
					m := retryAfterMS.FindStringSubmatch(s)
					ra := resp.Header.Get("Retry-After")
					if m == nil || m[1] == "0" || ra == "" || !strings.Contains(s, `"safe_new_key":false`) {
						ft.floodOther.Add(1)
						ft.note(&ft.floodOddities, fmt.Sprintf("Retry-After %q: %.300s", ra, s))
						continue
					}
					ft.floodQuota.Add(1)
				case strings.Contains(s, `"reason":"store_full"`):
					ft.floodFull.Add(1)
				case strings.Contains(s, `"outcome":"accepted"`) || strings.Contains(s, `"outcome":"unknown"`):
					ft.floodNew.Add(1)
				default:
					ft.floodOther.Add(1)
					ft.note(&ft.floodOddities, fmt.Sprintf("status %d: %.300s", resp.StatusCode, s))
				}
			}
		}()
	}
	// The calm workspace: a new call every 25 ms, alternating gateways.
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			p := procs[n%len(procs)]
			resp, b := rawPost(t, p.base, http.MethodPost, floodKeyCalm, newKey(), callBody("calm.ping"))
			if resp.StatusCode == 200 && strings.Contains(string(b), `"outcome":"accepted"`) {
				ft.calmOK.Add(1)
				continue
			}
			ft.calmFailed.Add(1)
			ft.note(&ft.calmFailures, fmt.Sprintf("status %d: %.300s", resp.StatusCode, b))
		}
	}()
	time.Sleep(floodFor)
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)

	calm := ft.calmOK.Load() + ft.calmFailed.Load()
	t.Logf("%d gateway(s), %s: flood %d records, %d quota_exceeded, %d store_full, %d other; calm %d/%d accepted; Redis peak used_memory %d KiB of %d KiB",
		len(procs), elapsed.Round(time.Millisecond), ft.floodNew.Load(), ft.floodQuota.Load(), ft.floodFull.Load(), ft.floodOther.Load(),
		ft.calmOK.Load(), calm, maxUsed.Load()>>10, floodMaxMemory>>10)
	if ft.floodQuota.Load() == 0 {
		t.Error("the flooding workspace was never refused quota_exceeded")
	}
	if ft.floodOther.Load() > 0 {
		t.Errorf("flood answers that are neither a record nor a quota refusal: %q", ft.floodOddities)
	}
	if calm < 20 || ft.calmOK.Load()*100 < calm*99 {
		t.Errorf("calm workspace: %d of %d calls accepted, want 99%%: %q", ft.calmOK.Load(), calm, ft.calmFailures)
	}
	// One bucket for the fleet: burst, the rate over the run, and one
	// lease (a tenth of a second of the rate) unspent per gateway, plus a
	// first call on credit.
	if bound := int64(floodBurst + floodRate*elapsed.Seconds() + float64(len(procs))*(floodRate/10+1)); ft.floodNew.Load() > bound {
		t.Errorf("the fleet admitted %d flood records, the bucket allows %d", ft.floodNew.Load(), bound)
	}
	if oom := redisInfoInt(t, r, "errorstats", "errorstat_OOM"); oom != 0 {
		t.Errorf("Redis refused %d commands for memory", oom)
	}
	if maxUsed.Load() >= floodMaxMemory {
		t.Errorf("Redis used_memory reached %d of maxmemory %d", maxUsed.Load(), floodMaxMemory)
	}
	var refused float64
	for _, p := range procs {
		if strings.Contains(p.Log(), "OOM") || strings.Contains(p.Log(), "out_of_memory") {
			t.Errorf("the gateway logged an OOM:\n%.2000s", p.Log())
		}
		refused += quotaRefusalsMetric(t, p, "ws_flood")
		if n := quotaRefusalsMetric(t, p, "ws_calm"); n != 0 {
			t.Errorf("obol_quota_refusals_total{workspace=\"ws_calm\"} %v", n)
		}
	}
	if refused != float64(ft.floodQuota.Load()) {
		t.Errorf("obol_quota_refusals_total{workspace=\"ws_flood\"} sums to %v over the gateways, the clients saw %d", refused, ft.floodQuota.Load())
	}
}

// redisInfoInt reads one integer field of an INFO section; 0 when absent.
func redisInfoInt(t *testing.T, r *redistest.Server, section, field string) int64 {
	v, err := r.Do("INFO", section)
	if err != nil {
		t.Errorf("INFO %s: %v", section, err)
		return 0
	}
	s, _ := v.(string)
	for _, l := range strings.Split(s, "\n") {
		val, ok := strings.CutPrefix(strings.TrimSpace(l), field+":")
		if !ok {
			continue
		}
		if section == "errorstats" { // errorstat_OOM:count=3
			val = strings.TrimPrefix(val, "count=")
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			t.Errorf("INFO %s %s: %q", section, field, val)
		}
		return n
	}
	return 0
}

// quotaRefusalsMetric reads obol_quota_refusals_total of a workspace from
// the gateway's /metrics.
func quotaRefusalsMetric(t *testing.T, p *proc, ws string) float64 {
	resp, err := http.Get(p.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	prefix := `obol_quota_refusals_total{workspace="` + ws + `"} `
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s in /metrics", prefix)
	return 0
}
