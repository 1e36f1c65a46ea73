package mcpgateway

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/retry"
)

// TestHeadroomFlood: two gateways, each with its own store on one real
// Redis (a small maxmemory, noeviction), flood a workspace without a
// stored_bytes limit with new calls whose answers are 60 KB of random
// bytes (stored as sent). Between two reads of used_memory each gateway
// refuses on its estimate, which adds what its own store wrote since: Redis
// refuses no write (no OOM error, INFO errorstats), and every call that is
// not accepted is refused store_full, nothing sent for it.
func TestHeadroomFlood(t *testing.T) {
	const (
		maxMemory = 24 << 20
		answer    = 60 << 10
		workers   = 6   // per gateway
		calls     = 120 // per worker: 2 x 6 x 120 x 60 KB = 84 MB, 3.5 x maxmemory
	)
	srv := redistest.Start(t, "--maxmemory", strconv.Itoa(maxMemory), "--maxmemory-policy", "noeviction")
	var sent atomic.Int64
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, answer)
		crand.Read(b)
		sent.Add(1)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	}))
	t.Cleanup(vendor.Close)
	sp, err := effectspec.Parse([]byte(`{"tool": "t.run", "effect": "write", "idempotency": {"binding": "header", "header": "Idempotency-Key"},
		"status": {"accepted": [200], "definitely_rejected": [400], "retryable": [503]}}`))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := idempotency.NewRoute(sp, idempotency.RouteTarget{Connection: "conn_t", Provider: "t", URL: vendor.URL + "/run", Credential: idempotency.NoCredential})
	if err != nil {
		t.Fatal(err)
	}
	var gateways []*httptest.Server
	var client rueidis.Client
	for range 2 {
		c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}, DisableCache: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		client = c
		st, err := redisstore.New(context.Background(), c, redisstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		gw, err := New(Config{Orchestrator: &retry.Orchestrator{Store: st}, QuotaStore: st,
			DefaultQuota: WorkspaceQuota{InFlight: workers},
			Tools:        []Tool{{Spec: sp, Connection: rt.Connection, Route: rt, Target: &retry.HTTPTarget{URL: vendor.URL + "/run"}}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(gw.Close)
		hs := httptest.NewServer(gw)
		t.Cleanup(hs.Close)
		gateways = append(gateways, hs)
	}
	var accepted, full atomic.Int64
	var mu sync.Mutex
	var other []string
	var wg sync.WaitGroup
	for g, hs := range gateways {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range calls {
					_, b := rawCall(t, hs, fmt.Sprintf("idt_%032x", (g*workers+w)*calls+i+1))
					switch {
					case bytes.Contains(b, []byte(`"outcome":"accepted"`)):
						accepted.Add(1)
					case bytes.Contains(b, []byte(`"reason":"store_full"`)):
						full.Add(1)
					default:
						mu.Lock()
						other = append(other, string(b[:min(len(b), 300)]))
						mu.Unlock()
					}
				}
			}()
		}
	}
	wg.Wait()
	stats, err := client.Do(t.Context(), client.B().Info().Section("errorstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	oom := 0
	for _, l := range strings.Split(stats, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "errorstat_OOM:count="); ok {
			oom, _ = strconv.Atoi(v)
		}
	}
	t.Logf("%d accepted, %d store_full, %d other; vendor saw %d; Redis answered %d OOM errors", accepted.Load(), full.Load(), len(other), sent.Load(), oom)
	if oom != 0 || len(other) != 0 || accepted.Load() == 0 || full.Load() == 0 || sent.Load() != accepted.Load() {
		t.Fatalf("%d OOM errors from Redis, %d answers neither accepted nor store_full (first: %q); %d accepted, %d store_full, vendor saw %d",
			oom, len(other), append(other, "")[0], accepted.Load(), full.Load(), sent.Load())
	}
}
