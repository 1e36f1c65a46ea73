package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/retry"
)

// operatorGatewayLog serves the e2e configuration on mr from this
// process, logging to logw.
func operatorGatewayLog(t *testing.T, mr *miniredis.Miniredis, vendorURL string, logw io.Writer) (*proc, *server) {
	t.Helper()
	env := func(string) (string, bool) { return e2eSecret, true }
	cfg, err := loadConfig([]byte(strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendorURL)), env, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	st, err := redisstore.New(context.Background(), client, redisstore.Options{Prefix: cfg.Store.Prefix, Lease: cfg.Store.Lease,
		ReadTimeout: storeReadTimeout, SkipEvictionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(cfg, st, st, slog.New(slog.NewTextHandler(logw, nil)))
	if err := s.seedPins(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.operatorMetrics()
	srv := httptest.NewServer(s.handler())
	t.Cleanup(srv.Close)
	return &proc{base: srv.URL}, s
}

// TestOperatorMetrics: /metrics has the outstanding unknown calls per
// workspace, settlements by outcome, quota refusals at zero for every
// workspace and the store-data-lost state as its function says; GET and
// DELETE on /mcp count as probes, not refusals; front-door refusals are
// logged once per reason per interval.
func TestOperatorMetrics(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newTestVendor(t)
	var logs syncBuffer
	p, s := operatorGatewayLog(t, mr, vendor.URL, &logs)
	fail := map[string]any{"to": "x", "answer": 500}
	var keys []string
	for i := 0; i < 2; i++ {
		k := idempotency.NewKey().String()
		call(t, newSession(t, p.base, e2eKeyOne, k), "mail.a", fail, "").wantOutcome(t, "unknown", false)
		keys = append(keys, k)
	}
	if code, m := p.post(t, "POST", "/v1/receipts/"+keys[0]+"/resolve?tool=mail.a&workspace=ws_one", e2eKeyAdmin,
		`{"outcome": "accepted", "attempt_count": 1, "note": "seen at the vendor"}`); code != 200 {
		t.Fatalf("settle: %d %v", code, m)
	}
	for _, method := range []string{"GET", "DELETE", "GET", "PUT"} {
		resp, _ := rawPost(t, p.base, method, e2eKeyOne, "", "")
		if resp.StatusCode != 405 {
			t.Fatalf("%s /mcp: %d", method, resp.StatusCode)
		}
	}
	for i := 0; i < 5; i++ {
		resp, _ := rawPost(t, p.base, "POST", "ob_nobody", "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		if resp.StatusCode != 401 {
			t.Fatalf("unknown key: %d", resp.StatusCode)
		}
	}
	lost := false
	var mu sync.Mutex
	s.metrics.setDataLost(func() bool { mu.Lock(); defer mu.Unlock(); return lost })
	scrape := func() string {
		t.Helper()
		r, err := http.Get(p.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		return string(b)
	}
	// The first scrape starts the reading of obol_unknown_calls.
	text := scrape()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(text, "obol_unknown_calls{") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		text = scrape()
	}
	for _, want := range []string{
		`obol_unknown_calls{workspace="ws_one"} 1` + "\n",
		`obol_unknown_calls{workspace="ws_two"} 0` + "\n",
		`obol_settlements_total{outcome="accepted"} 1` + "\n",
		`obol_settlements_total{outcome="definitely_rejected"} 0` + "\n",
		`obol_quota_refusals_total{workspace="ws_one"} 0` + "\n",
		`obol_quota_refusals_total{workspace="ws_two"} 0` + "\n",
		`obol_store_data_lost 0` + "\n",
		`obol_mcp_probes_total 3` + "\n",
		`obol_refusals_total{reason="method_not_allowed"} 1` + "\n",
		`obol_refusals_total{reason="unauthorized"} 5` + "\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	mu.Lock()
	lost = true
	mu.Unlock()
	if text := scrape(); !strings.Contains(text, "obol_store_data_lost 1\n") {
		t.Error("obol_store_data_lost does not follow its function")
	}
	out := logs.String()
	if n := strings.Count(out, `msg="request refused at the front door" reason=unauthorized status=401`); n != 1 {
		t.Errorf("%d log lines of the unauthorized refusals, want 1 (rate-limited):\n%s", n, out)
	}
	if strings.Contains(out, "ob_nobody") {
		t.Errorf("front-door log holds the key:\n%s", out)
	}
	// The PUT only: GET and DELETE probes are not refusals.
	if n := strings.Count(out, `reason=method_not_allowed`); n != 1 {
		t.Errorf("%d log lines of method_not_allowed, want 1 (the PUT):\n%s", n, out)
	}
}

// TestStartupStoreLine: a gateway names its store on start, in one line:
// the address without the URL's password, the Redis version, the topology,
// the prefix, the environment and the number of tools.
func TestStartupStoreLine(t *testing.T) {
	rs := redistest.Start(t)
	if _, err := rs.Do("CONFIG", "SET", "requirepass", "pw-never-logged-7f3a"); err != nil {
		t.Fatal(err)
	}
	base, _, stderr, _ := runServer(t, "-redis", "redis://:pw-never-logged-7f3a@"+rs.Addr())
	if base == "" {
		t.Fatalf("did not start:\n%s", stderr.String())
	}
	line := regexp.MustCompile(`msg=store address=` + regexp.QuoteMeta(rs.Addr()) +
		` redis_version=7\.[0-9.]+ topology=standalone prefix=obol: environment=\S+ tools=\d+\n`)
	if out := stderr.String(); !line.MatchString(out) || strings.Contains(out, "pw-never-logged-7f3a") {
		t.Errorf("startup line missing, or the password logged:\n%s", out)
	}
	base, _, stderr, _ = runServer(t)
	if base == "" || !strings.Contains(stderr.String(), `msg=store address="embedded (127.0.0.1:`) {
		t.Errorf("embedded store line:\n%s", stderr.String())
	}
}
