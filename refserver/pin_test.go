package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/retry"
)

// gateway starts one in-process refserver on mr with the e2e configuration,
// seeding its pins as main does, and returns it as a proc for post.
func gateway(t *testing.T, mr *miniredis.Miniredis, vendorURL string) *proc {
	t.Helper()
	return gatewayWith(t, mr, e2eConfig, vendorURL)
}

// gatewayWith is gateway serving config, whose {{VENDOR}} is vendorURL.
func gatewayWith(t *testing.T, mr *miniredis.Miniredis, config, vendorURL string) *proc {
	t.Helper()
	env := func(string) (string, bool) { return e2eSecret, true }
	cfg, err := loadConfig([]byte(strings.ReplaceAll(config, "{{VENDOR}}", vendorURL)), env, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	st, err := redisstore.New(context.Background(), client, redisstore.Options{Prefix: cfg.Store.Prefix, Lease: cfg.Store.Lease, ReadTimeout: storeReadTimeout, SkipEvictionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(cfg, st, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := s.seedPins(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.handler())
	t.Cleanup(srv.Close)
	return &proc{base: srv.URL}
}

// TestPinSharedBetweenGateways: a pin posted to one gateway routes new keys
// through another; a completed key replays on both, with its route; a
// restarted gateway keeps the stored pin rather than its configured one.
func TestPinSharedBetweenGateways(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newTestVendor(t)
	a, b := gateway(t, mr, vendor.URL), gateway(t, mr, vendor.URL)
	mail := map[string]any{"to": "ada@example.com"}

	k := idempotency.NewKey().String()
	call(t, newSession(t, b.base, e2eKeyOne, k), "cap.mail", mail, "").wantOutcome(t, "accepted", false)
	if n := b.sent(t, vendor, "cap.mail", "/mail-a", k); n != 1 {
		t.Fatalf("configured provider saw %d requests, want 1", n)
	}
	if v, _ := mr.Get("e2e:pin:cap.mail"); v != "mail.a" {
		t.Fatalf("seeded pin %q, want mail.a", v)
	}

	code, m := a.post(t, "POST", "/v1/capabilities/cap.mail/pin", e2eKeyAdmin, `{"provider": "mail.b"}`)
	if code != 200 || m["pin"] != "mail.b" || m["previous"] != "mail.a" {
		t.Fatalf("pin through A: %d %v", code, m)
	}
	if v, _ := mr.Get("e2e:pin:cap.mail"); v != "mail.b" {
		t.Fatalf("stored pin %q, want mail.b", v)
	}

	k2 := idempotency.NewKey().String()
	call(t, newSession(t, b.base, e2eKeyOne, k2), "cap.mail", mail, "").wantOutcome(t, "accepted", false)
	if na, nb := b.sent(t, vendor, "cap.mail", "/mail-a", k2), b.sent(t, vendor, "cap.mail", "/mail-b", k2); na != 0 || nb != 1 {
		t.Errorf("a new key through B: mail.a saw %d, mail.b saw %d; want 0 and 1", na, nb)
	}
	for _, g := range []*proc{a, b} {
		if a := call(t, newSession(t, g.base, e2eKeyOne, k), "cap.mail", mail, ""); a.err != nil || !a.rc.Replayed || a.rc.Route.Tool != "mail.a" {
			t.Errorf("the completed key after the pin change: %+v %v, want a replay through mail.a", a.rc, a.err)
		}
	}
	if n := b.sent(t, vendor, "cap.mail", "/mail-b", k); n != 0 || b.sent(t, vendor, "cap.mail", "/mail-a", k) != 1 {
		t.Errorf("the existing key was dispatched again (mail.b %d, mail.a %d)", n, b.sent(t, vendor, "cap.mail", "/mail-a", k))
	}

	// A restart: a new gateway with the same configuration (pin mail.a).
	c := gateway(t, mr, vendor.URL)
	if v, _ := mr.Get("e2e:pin:cap.mail"); v != "mail.b" {
		t.Fatalf("a restart overwrote the stored pin with %q", v)
	}
	k3 := idempotency.NewKey().String()
	call(t, newSession(t, c.base, e2eKeyOne, k3), "cap.mail", mail, "").wantOutcome(t, "accepted", false)
	if n := b.sent(t, vendor, "cap.mail", "/mail-b", k3); n != 1 {
		t.Errorf("restarted gateway: mail.b saw %d requests, want 1", n)
	}
	// Its receipt of the first key still names the provider that served it.
	if code, m := c.post(t, "GET", "/v1/receipts/"+k+"?tool=cap.mail", e2eKeyOne, ""); code != 200 || m["propagation"] != "header" {
		t.Errorf("receipt of the first key: %d %v", code, m)
	}
}

// TestPinFailsClosed: an unreadable pin refuses the call before any claim or
// dispatch, and a pin that cannot be stored is refused and not applied.
func TestPinFailsClosed(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newTestVendor(t)
	g := gateway(t, mr, vendor.URL)
	mail := map[string]any{"to": "bob@example.com"}

	k := idempotency.NewKey().String()
	// LOADING makes the client re-send the GET until its context ends: the
	// read is bounded and fails closed.
	mr.SetError("LOADING Redis is loading the dataset in memory")
	call(t, newSession(t, g.base, e2eKeyOne, k), "cap.mail", mail, "").wantRefusal(t, "store_unavailable", 503)
	mr.SetError("ERR injected failure")
	call(t, newSession(t, g.base, e2eKeyOne, k), "cap.mail", mail, "").wantRefusal(t, "store_unavailable", 503)
	code, m := g.post(t, "POST", "/v1/capabilities/cap.mail/pin", e2eKeyAdmin, `{"provider": "mail.b"}`)
	if code != 503 || m["reason"] != "store_unavailable" {
		t.Errorf("pin with the store failing: %d %v", code, m)
	}
	mr.SetError("")
	if v, _ := mr.Get("e2e:pin:cap.mail"); v != "mail.a" {
		t.Errorf("stored pin %q after a failed pin, want mail.a", v)
	}
	if n := vendor.count("/mail-a", "") + vendor.count("/mail-b", ""); n != 0 {
		t.Errorf("vendor saw %d requests while the pin was unreadable", n)
	}
	if code, _ := g.post(t, "GET", "/v1/receipts/"+k+"?tool=cap.mail", e2eKeyOne, ""); code != 404 {
		t.Errorf("a refused call left a record: %d", code)
	}

	// A stored pin that is no provider of cap.mail here is refused too.
	mr.Set("e2e:pin:cap.mail", "pay.charge")
	call(t, newSession(t, g.base, e2eKeyOne, k), "cap.mail", mail, "").wantRefusal(t, "internal", 500)
	if n := vendor.count("/charge", "") + vendor.count("/mail-a", "") + vendor.count("/mail-b", ""); n != 0 {
		t.Errorf("vendor saw %d requests for a pin outside the providers", n)
	}
	// Pinning again repairs it.
	if code, m := g.post(t, "POST", "/v1/capabilities/cap.mail/pin", e2eKeyAdmin, `{"provider": "mail.a"}`); code != 200 || m["previous"] != "pay.charge" {
		t.Fatalf("re-pin: %d %v", code, m)
	}
	call(t, newSession(t, g.base, e2eKeyOne, k), "cap.mail", mail, "").wantOutcome(t, "accepted", false)

	// No stored pin (deleted by an operator) means the configured one.
	mr.Del("e2e:pin:cap.mail")
	k2 := idempotency.NewKey().String()
	call(t, newSession(t, g.base, e2eKeyOne, k2), "cap.mail", mail, "").wantOutcome(t, "accepted", false)
	if n := g.sent(t, vendor, "cap.mail", "/mail-a", k2); n != 1 {
		t.Errorf("without a stored pin: mail.a saw %d requests, want the configured pin", n)
	}
}
