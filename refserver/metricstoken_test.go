package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
)

// metricsConfig is approvalEditConfig in development with {{TOKEN}} as its
// metrics_token member (empty: none).
func metricsConfig(t *testing.T, vendorURL, token string) string {
	t.Helper()
	member := ""
	if token != "" {
		member = `"metrics_token": "` + token + `",`
	}
	raw := strings.NewReplacer("{{VENDOR}}", vendorURL, "{{APPROVAL}}", "none",
		`"environment": "production",`, `"environment": "development", `+member).Replace(approvalEditConfig)
	path := filepath.Join(t.TempDir(), "metrics.json")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestEndToEndMetricsToken: with metrics_token set, /metrics answers 401
// with a fixed text and no workspace id to a request without the token, with
// another one or with an API key, and the series to the token; the startup
// line says the token is required, and the token is in no log line. Without
// it the metrics are open and the startup line says so.
func TestEndToEndMetricsToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	const token = "ob_metrics_e2e_scraper_7d2e"
	redis := redistest.Start(t)
	vendor := refservertest.StartHangUpVendor(t, "", nil)
	vendor.HangUp.Store(false)
	get := func(t *testing.T, p *proc, auth string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", p.base+"/metrics", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, string(b)
	}

	t.Run("required", func(t *testing.T) {
		p := startRefserver(t, "-config", metricsConfig(t, vendor.URL, token), "-redis", "redis://"+redis.Addr())
		if !strings.Contains(p.Listening, "metrics_token required") || strings.Contains(p.Listening, token) {
			t.Errorf("startup line %q: want it to say the metrics token is required, without the token", p.Listening)
		}
		for _, auth := range []string{"", "Bearer ob_metrics_e2e_scraper_7d2f", "Bearer " + e2eKeyOne, "Bearer " + e2eKeyAdmin,
			"Basic " + token, "Bearer " + strings.ToUpper(token), token} {
			code, h, body := get(t, p, auth)
			if code != http.StatusUnauthorized || !strings.Contains(h.Get("WWW-Authenticate"), "Bearer") ||
				strings.Contains(body, "ws_one") || strings.Contains(body, "obol_") {
				t.Errorf("GET /metrics with %q: %d %q %q, want 401 with no series", auth, code, h.Get("WWW-Authenticate"), body)
			}
		}
		code, _, body := get(t, p, "Bearer "+token)
		if code != 200 || !strings.Contains(body, `workspace="ws_one"`) {
			t.Errorf("GET /metrics with the token: %d, want 200 with the workspace's series:\n%.500s", code, body)
		}
		// The token is a key of its own, not an API key.
		if code, _ := p.postRaw(t, "GET", "/v1/receipts/idt_0123456789abcdef0123456789abcdef?tool=pay.transfer", token, ""); code != http.StatusUnauthorized {
			t.Errorf("the metrics token read a receipt: %d", code)
		}
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("stop: %v", err)
		}
		if log := p.Log(); strings.Contains(strings.ToLower(log), strings.ToLower(token)) {
			t.Errorf("the log holds the metrics token:\n%s", log)
		}
	})

	t.Run("open", func(t *testing.T) {
		p := startRefserver(t, "-config", metricsConfig(t, vendor.URL, ""), "-redis", "redis://"+redis.Addr())
		if !strings.Contains(p.Listening, "metrics at "+p.base+"/metrics, open to any caller") {
			t.Errorf("startup line %q: want it to say the metrics are open", p.Listening)
		}
		if code, _, body := get(t, p, ""); code != 200 || !strings.Contains(body, `workspace="ws_one"`) {
			t.Errorf("GET /metrics without a token configured: %d\n%.300s", code, body)
		}
	})
}
