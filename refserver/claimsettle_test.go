package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

// TestClaimSettledAfterRedisStall: Redis stalls (SIGSTOP) while a call of
// an unsupported tool is claiming; the call answers store_unavailable.
// Redis resumes and runs the queued claim, which reserves attempt 1 that
// nobody sends. The gateway settles the claim in the background and gives
// the attempt back, so the retry with the same key dispatches exactly
// once and ends accepted (attempt_count 2: one given back; the vendor saw
// one request), instead of answering outcome_unknown for the whole
// unknown retention.
func TestClaimSettledAfterRedisStall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	vendor := newTestVendor(t)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	// Development: an unsupported write is allowed there.
	conf := strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendor.URL)
	conf = strings.Replace(conf, `"environment": "production"`, `"environment": "development"`, 1)
	if err := os.WriteFile(cfgPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())
	key := idempotency.NewKey().String()
	s := p.session(t, e2eKeyOne, key)
	args := map[string]any{"text": "hello"}

	redis.Pause()
	paused := true
	t.Cleanup(func() {
		if paused {
			redis.Resume()
		}
	})
	start := time.Now()
	first := call(t, s, "chat.post", args, "")
	waited := time.Since(start)
	first.wantRefusal(t, "store_unavailable", 503)
	t.Logf("store_unavailable after %v", waited.Round(10*time.Millisecond))
	redis.Resume()
	paused = false

	// The first claim's lease (10s) may hold the slot until the claim is
	// settled; a client retries while it is in progress.
	deadline := time.Now().Add(15 * time.Second)
	for {
		again := call(t, s, "chat.post", args, "")
		if again.err != nil && again.refusal.Reason == "in_progress" && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		again.wantOutcome(t, "accepted", false)
		if again.rc.AttemptCount != 2 || again.key != key {
			t.Errorf("the retry's receipt: attempt_count %d, key %s; want 2 (one given back), %s", again.rc.AttemptCount, again.key, key)
		}
		break
	}
	if n := vendor.count("/chat", ""); n != 1 {
		t.Fatalf("the vendor saw %d requests, want 1", n)
	}
	// The re-sender reports after its give-back returned, which may be a
	// moment after the retry saw the slot open.
	wants := []string{`obol_claim_recoveries_total{result="started"} 1`, `obol_claim_recoveries_total{result="given_back"} 1`,
		"obol_claim_recoveries_running 0"}
	for end := time.Now().Add(5 * time.Second); ; {
		resp, err := http.Get(p.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		missing := ""
		for _, want := range wants {
			if !strings.Contains(string(metrics), want) {
				missing = want
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("/metrics lacks %s", missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
	replay := call(t, s, "chat.post", args, "")
	replay.wantOutcome(t, "accepted", true)
	if n := vendor.count("/chat", ""); n != 1 {
		t.Fatalf("after the replay the vendor saw %d requests, want 1", n)
	}
}
