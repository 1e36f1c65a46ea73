package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
)

// retryLoopConfig has one header-bound tool whose vendor hangs up after
// reading (every attempt is unknown), with max_attempts 3, under a 1s
// lease.
const retryLoopConfig = `{
  "key_prefix": "loop:", "lease": "1s", "environment": "production",
  "workspaces": [{"id": "ws_one", "api_keys": ["` + e2eKeyOne + `"]}],
  "approver_keys": [{"name": "ops-e2e", "key": "` + e2eKeyAdmin + `"}],
  "connections": [{"id": "conn_v", "provider": "testvendor", "base_url": "{{VENDOR}}", "secret_env": "E2E_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "path": "/charge", "spec": {"tool": "pay.loop", "max_attempts": 3,
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}}
  ]
}`

// TestRetryLoopReachesVendorAtMostMaxAttempts: a client retrying one
// unknown call in a loop reaches the vendor at most max_attempts times:
// the first redispatch at once, the next after a backoff that the refusal
// names in retry_after_ms, then outcome_unknown without it for good; the
// record stays listed for the operator.
func TestRetryLoopReachesVendorAtMostMaxAttempts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	vendor := refservertest.StartHangUpVendor(t, "", nil)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(retryLoopConfig, "{{VENDOR}}", vendor.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	gw := startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())
	k := idempotency.NewKey().String()
	s := gw.session(t, e2eKeyOne, k)
	args := map[string]any{"amount": 7}

	call(t, s, "pay.loop", args, "").wantOutcome(t, "unknown", false)
	call(t, s, "pay.loop", args, "").wantOutcome(t, "unknown", false) // the first redispatch does not wait
	waited := false
	for i := 0; i < 50; i++ {
		a := call(t, s, "pay.loop", args, "")
		if a.err == nil {
			if a.rc.Outcome != "unknown" {
				t.Fatalf("call %d: outcome %s, want unknown", i, a.rc.Outcome)
			}
			continue
		}
		a.wantRefusal(t, "outcome_unknown", 409)
		if a.refusal.RetryAfterMS == nil {
			break // max_attempts: nothing more is sent
		}
		ms := *a.refusal.RetryAfterMS
		if ms <= 0 || ms > 2000 {
			t.Fatalf("backoff retry_after_ms %d, want up to 2 leases", ms)
		}
		waited = true
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
	if !waited {
		t.Fatal("no refusal carried a backoff's retry_after_ms")
	}
	if n := vendor.HungUp(); n != 3 {
		t.Fatalf("the vendor saw %d requests, want max_attempts 3", n)
	}
	code, m := gw.post(t, "GET", "/v1/unknown?workspace=ws_one", e2eKeyAdmin, "")
	if code != 200 {
		t.Fatalf("list: %d %v", code, m)
	}
	listed := false
	for _, u := range m["unknown"].([]any) {
		listed = listed || u.(map[string]any)["idempotency_key"] == k
	}
	if !listed {
		t.Fatalf("the call past max_attempts is not listed: %v", m)
	}
}
