package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

// TestCompletedCallReplaysAfterBaseURLEdit: a native tool's completed call
// replays with its original route after the gateway restarts with another
// base_url host for the connection (the host is in the fingerprint, but a
// final record is never compared: nothing would be dispatched). Black-box:
// the built refserver on a real Redis.
func TestCompletedCallReplaysAfterBaseURLEdit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	vendor := newTestVendor(t)
	dir := t.TempDir()
	start := func(vendorURL string) *proc {
		cfgPath := filepath.Join(dir, "config.json")
		if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendorURL)), 0o600); err != nil {
			t.Fatal(err)
		}
		return startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())
	}
	// The same vendor under another host name.
	other := strings.Replace(vendor.URL, "127.0.0.1", "localhost", 1)
	if other == vendor.URL {
		t.Fatalf("vendor URL %s has no 127.0.0.1 to rename", vendor.URL)
	}

	p := start(vendor.URL)
	k := idempotency.NewKey().String()
	charge := map[string]any{"amount": 700, "currency": "eur"}
	first := call(t, p.session(t, e2eKeyOne, k), "pay.charge", charge, "")
	first.wantOutcome(t, "accepted", false)
	p.stop(t)

	q := start(other)
	again := call(t, q.session(t, e2eKeyOne, k), "pay.charge", charge, "")
	again.wantOutcome(t, "accepted", true)
	if again.text != first.text || again.rc.Route != first.rc.Route || !strings.HasPrefix(first.rc.Route.Host, "127.0.0.1:") {
		t.Errorf("replay route %+v, want the original %+v", again.rc.Route, first.rc.Route)
	}
	if n := q.sent(t, vendor, "pay.charge", "/charge", k); n != 1 {
		t.Errorf("vendor saw %d requests for the key, want 1", n)
	}
	// A new key goes to the new host.
	k2 := idempotency.NewKey().String()
	fresh := call(t, q.session(t, e2eKeyOne, k2), "pay.charge", charge, "")
	fresh.wantOutcome(t, "accepted", false)
	if !strings.HasPrefix(fresh.rc.Route.Host, "localhost:") {
		t.Errorf("a new call's route %+v, want the edited host", fresh.rc.Route)
	}
}
