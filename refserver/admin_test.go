package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/mcpgateway/admin"
	"github.com/obol-gateway/obol/retry"
)

// TestAdminEndpointsBoundedWhenRedisIsDown stops a real redis-server and
// calls every admin endpoint: each answers 503 store_unavailable, within the
// configured store timeout (the client re-sends read-only commands until its
// context ends, so an unbounded request waited for minutes).
func TestAdminEndpointsBoundedWhenRedisIsDown(t *testing.T) {
	rs := redistest.Start(t)
	vendor := newGateVendor(t)
	p := gatewayAt(t, rs.Addr(), vendor.URL, 300*time.Millisecond)

	// A held call for a ticket, and a finished one for a receipt.
	held := call(t, newSession(t, p.base, e2eKeyOne, ""), "pay.refund", map[string]any{"amount": 1}, "")
	if held.ticket == "" {
		t.Fatalf("no ticket: %+v", held)
	}
	k := idempotency.NewKey().String()
	call(t, newSession(t, p.base, e2eKeyOne, k), "pay.charge", map[string]any{"amount": 1}, "").wantOutcome(t, "accepted", false)
	if code, _ := p.post(t, "GET", "/v1/receipts/"+k+"?tool=pay.charge", e2eKeyOne, ""); code != 200 {
		t.Fatalf("receipt with Redis up: %d", code)
	}

	rs.Kill()
	for _, ep := range []struct{ method, path, bearer, body string }{
		{"POST", "/v1/approvals/" + held.ticket + "/approve", e2eKeyAdmin, ""},
		{"POST", "/v1/approvals/" + held.ticket + "/deny", e2eKeyAdmin, ""},
		{"GET", "/v1/receipts/" + k + "?tool=pay.charge", e2eKeyOne, ""},
		{"GET", "/v1/receipts/" + k + "?tool=cap.mail", e2eKeyOne, ""},
		{"POST", "/v1/capabilities/cap.mail/pin", e2eKeyAdmin, `{"provider": "mail.b"}`},
		{"GET", "/v1/unknown?workspace=ws_one", e2eKeyAdmin, ""},
		{"POST", "/v1/receipts/" + k + "/resolve?tool=pay.charge&workspace=ws_one", e2eKeyAdmin, `{"outcome": "accepted", "attempt_count": 1}`},
		{"GET", "/healthz", "", ""},
	} {
		t.Run(ep.method+" "+ep.path, func(t *testing.T) {
			req, _ := http.NewRequest(ep.method, p.base+ep.path, strings.NewReader(ep.body))
			if ep.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+ep.bearer)
			}
			// A safety net only: a request that hung would otherwise hold
			// the test until its global timeout.
			hc := &http.Client{Timeout: time.Minute}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			defer resp.Body.Close()
			var m map[string]any
			json.NewDecoder(resp.Body).Decode(&m)
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("%d %v", resp.StatusCode, m)
			}
			if ep.path != "/healthz" && m["reason"] != "store_unavailable" {
				t.Errorf("reason %v", m["reason"])
			}
			// The key's record may exist unread: never safe to use a new one.
			if ep.path != "/healthz" && m["safe_new_key"] != false {
				t.Errorf("safe_new_key %v, want false", m["safe_new_key"])
			}
		})
	}
}

// TestPinBodyStrict: the pin body is read by the strict decoder: a repeated
// or case-variant member, an unknown field, trailing data are refused, and
// the refusal names the field but never a value; nothing is pinned.
func TestPinBodyStrict(t *testing.T) {
	rs := redistest.Start(t)
	vendor := newGateVendor(t)
	p := gatewayAt(t, rs.Addr(), vendor.URL, storeReadTimeout)
	for _, body := range []string{
		`{"provider":"mail.b","provider":"mail.a"}`,
		`{"provider":"mail.a","prov\u0069der":"mail.b"}`,
		`{"provider":"mail.b","Provider":"mail.a"}`,
		`{"Provider":"mail.b"}`,
		`{"provider":"mail.b","owner":1}`,
		`{"provider":"mail.b"} {}`,
		`{"provider":4242424242424242}`,
		``,
	} {
		code, m := p.post(t, "POST", "/v1/capabilities/cap.mail/pin", e2eKeyAdmin, body)
		if code != 400 || m["reason"] != "invalid_request" {
			t.Errorf("%s: %d %v", body, code, m)
		}
		if msg, _ := m["message"].(string); strings.Contains(msg, "4242") || strings.Contains(msg, "mail.") {
			t.Errorf("%s: the refusal quotes a value: %q", body, msg)
		}
	}
	if v, _ := rs.Do("GET", "e2e:pin:cap.mail"); v != "mail.a" {
		t.Errorf("stored pin %v, want mail.a", v)
	}
	if code, m := p.post(t, "POST", "/v1/capabilities/cap.mail/pin", e2eKeyAdmin, `{"provider":"mail.b"}`); code != 200 || m["pin"] != "mail.b" {
		t.Errorf("a plain pin: %d %v", code, m)
	}
}

// ticketView is the answer of a decision, as the black-box tests read it.
type ticketView = admin.Ticket

// gatewayAt serves the e2e configuration from this process on the Redis at
// addr with the given store timeout, seeding its pins as main does.
func gatewayAt(t *testing.T, addr, vendorURL string, bound time.Duration) *proc {
	t.Helper()
	env := func(string) (string, bool) { return e2eSecret, true }
	cfg, err := loadConfig([]byte(strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendorURL)), env, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	st, err := redisstore.New(context.Background(), client, redisstore.Options{Prefix: cfg.Store.Prefix, Lease: cfg.Store.Lease, ReadTimeout: bound})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(cfg, st, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.storeTimeout = bound
	if err := s.seedPins(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.handler())
	t.Cleanup(srv.Close)
	return &proc{base: srv.URL}
}
