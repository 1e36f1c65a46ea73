package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

// runningConfig has one unsupported tool whose attempt may take 10s, under a
// 1s lease.
const runningConfig = `{
  "key_prefix": "run:", "lease": "1s", "environment": "production", "allow_unsupported_writes": true,
  "workspaces": [{"id": "ws_one", "api_keys": ["` + e2eKeyOne + `"]}],
  "approver_keys": [{"name": "ops-e2e", "key": "` + e2eKeyAdmin + `"}],
  "connections": [{"id": "conn_v", "provider": "testvendor", "base_url": "{{VENDOR}}", "secret_env": "E2E_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "path": "/held", "spec": {"tool": "pay.held", "timeout": "10s",
      "idempotency": {"binding": "unsupported"}, "status": {"accepted": [201], "definitely_rejected": [402]}}}
  ]
}`

// TestResolveWhileAttemptRuns: a gateway is paused (SIGSTOP) while its
// attempt is at the vendor, so its lease lapses. A client's retry through
// another gateway meets the lapsed lease (outcome_unknown, the record turns
// unknown), the listing shows the call with settle_after, and an operator's
// resolve answers in_progress with retry_after_ms: the vendor has not
// answered yet. Resumed, the owner's accepted finalize lands, and the call
// is accepted, never settled as rejected.
func TestResolveWhileAttemptRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"id":"ch_real"}`)
	}))
	t.Cleanup(vendor.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(runningConfig, "{{VENDOR}}", vendor.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "redis://" + redis.Addr()
	owner := startRefserver(t, "-config", cfgPath, "-redis", url)
	other := startRefserver(t, "-config", cfgPath, "-redis", url)

	k := idempotency.NewKey().String()
	args := map[string]any{"amount": 7}
	ownerSession := owner.session(t, e2eKeyOne, k)
	done := make(chan answer, 1)
	go func() { done <- call(t, ownerSession, "pay.held", args, "") }()
	select {
	case <-arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("the call never reached the vendor")
	}
	if err := owner.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			owner.Resume()
		}
	}
	t.Cleanup(resume)
	time.Sleep(2500 * time.Millisecond) // the 1s lease lapses unrenewed

	// The client's retry meets the lapsed lease of an unsupported tool.
	call(t, other.session(t, e2eKeyOne, k), "pay.held", args, "").wantRefusal(t, "outcome_unknown", 409)

	resolve := "/v1/receipts/" + k + "/resolve?tool=pay.held&workspace=ws_one"
	code, m := other.post(t, "POST", resolve, e2eKeyAdmin, `{"outcome":"definitely_rejected","attempt_count":1,"note":"the vendor has no such charge"}`)
	ms, _ := m["retry_after_ms"].(float64)
	if code != 409 || m["reason"] != "in_progress" || ms <= 0 || ms > 11000 {
		t.Fatalf("resolve while the attempt runs: %d %v; want 409 in_progress with retry_after_ms up to the attempt deadline", code, m)
	}

	code, m = other.post(t, "GET", "/v1/unknown?workspace=ws_one", e2eKeyAdmin, "")
	if code != 200 {
		t.Fatalf("list: %d %v", code, m)
	}
	listed := false
	for _, u := range m["unknown"].([]any) {
		rc := u.(map[string]any)
		if rc["idempotency_key"] == k {
			listed = true
			at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(rc["settle_after"]))
			if err != nil || !at.After(time.Now()) {
				t.Fatalf("listed with settle_after %v (%v), want a time to come", rc["settle_after"], err)
			}
		}
	}
	if !listed {
		t.Fatalf("the call is not listed: %v", m)
	}

	// The owner resumes, the vendor answers, its finalize lands.
	resume()
	close(release)
	select {
	case a := <-done:
		a.wantOutcome(t, "accepted", false)
	case <-time.After(20 * time.Second):
		t.Fatal("the owner never answered")
	}
	code, m = other.post(t, "GET", "/v1/receipts/"+k+"?tool=pay.held", e2eKeyOne, "")
	if code != 200 || m["outcome"] != "accepted" || m["resolution"] != nil {
		t.Fatalf("receipt: %d %v; want accepted, unsettled", code, m)
	}
	if code, m := other.post(t, "POST", resolve, e2eKeyAdmin, `{"outcome":"definitely_rejected","attempt_count":1}`); code != 409 || m["reason"] != "not_unknown" {
		t.Fatalf("resolve after the owner's finalize: %d %v, want 409 not_unknown", code, m)
	}
}
