package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/obol-gateway/obol/internal/redistest"
)

// headroomConfig: one workspace with no stored_bytes limit and no rate
// limit, an in_flight its clients never pass, and one tool whose vendor
// answers big.
const headroomConfig = `{
  "key_prefix": "room:", "lease": "5s", "environment": "development",
  "default_quota": {"in_flight": 6},
  "workspaces": [{"id": "ws_room", "api_keys": ["` + floodKeyFlood + `"]}],
  "approver_keys": [{"name": "ops-room", "key": "ob_room_approver"}],
  "connections": [{"id": "conn_v", "provider": "roomvendor", "base_url": "{{VENDOR}}", "secret_env": "E2E_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "path": "/big", "spec": {"tool": "room.big",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}}
  ]
}`

// TestEndToEndHeadroomFlood: two built gateways on one real Redis (24 MB,
// noeviction), one workspace without a stored_bytes limit flooding new
// calls whose vendor answers are about 60 KB that do not compress (about
// twice maxmemory offered). The headroom estimate (docs/DESIGN.md section
// 6a) must hold Redis below maxmemory: no OOM error in its error stats,
// and every call not accepted refused store_full (nothing sent for it),
// never store_unavailable.
func TestEndToEndHeadroomFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	const (
		maxMemory = 24 << 20
		workers   = 6  // per gateway: the workspace's in_flight
		calls     = 60 // per worker: 2 x 6 x 60 x 60 KB = 42 MB
	)
	var sent atomic.Int64
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := make([]byte, 45<<10) // 60 KB of base64
		rand.Read(raw)
		sent.Add(1)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"blob":%q}`, base64.StdEncoding.EncodeToString(raw))
	}))
	t.Cleanup(vendor.Close)
	r := redistest.Start(t, "--maxmemory", strconv.Itoa(maxMemory), "--maxmemory-policy", "noeviction")
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(headroomConfig, "{{VENDOR}}", vendor.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	procs := []*proc{startRefserver(t, "-config", path, "-redis", "redis://"+r.Addr()),
		startRefserver(t, "-config", path, "-redis", "redis://"+r.Addr())}
	const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"room.big","arguments":{}}}`

	var accepted, full atomic.Int64
	var mu sync.Mutex
	var other []string
	var wg sync.WaitGroup
	for g, p := range procs {
		for w := range workers {
			wg.Go(func() {
				for i := range calls {
					resp, b := rawPost(t, p.base, http.MethodPost, floodKeyFlood, fmt.Sprintf("idt_%032x", (g*workers+w)*calls+i+1), body)
					s := string(b)
					switch {
					case strings.Contains(s, `"outcome":"accepted"`):
						accepted.Add(1)
					case strings.Contains(s, `"reason":"store_full"`):
						full.Add(1)
					default:
						mu.Lock()
						other = append(other, fmt.Sprintf("status %d: %.300s", resp.StatusCode, s))
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	oom := redisInfoInt(t, r, "errorstats", "errorstat_OOM")
	used := redisInfoInt(t, r, "memory", "used_memory")
	t.Logf("%d accepted, %d store_full, %d other; vendor saw %d; Redis: %d OOM errors, used_memory %d KiB of %d KiB",
		accepted.Load(), full.Load(), len(other), sent.Load(), oom, used>>10, maxMemory>>10)
	if oom != 0 {
		t.Errorf("Redis refused %d commands for memory", oom)
	}
	if len(other) != 0 {
		t.Errorf("%d answers neither accepted nor store_full, first: %s", len(other), other[0])
	}
	if accepted.Load() == 0 || full.Load() == 0 {
		t.Errorf("%d accepted, %d store_full: the flood should fill the headroom and be refused past it", accepted.Load(), full.Load())
	}
	if sent.Load() != accepted.Load() {
		t.Errorf("the vendor saw %d requests for %d accepted calls: a refused call sent something", sent.Load(), accepted.Load())
	}
	for _, p := range procs {
		if strings.Contains(p.Log(), "OOM") || strings.Contains(p.Log(), "out_of_memory") {
			t.Errorf("a gateway logged an OOM:\n%.2000s", p.Log())
		}
	}
}
