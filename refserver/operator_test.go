package main

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"sort"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/retry"
)

// operatorGateway serves the e2e configuration on mr with the operator's
// endpoints, from this process.
func operatorGateway(t *testing.T, mr *miniredis.Miniredis, vendorURL string) (*proc, *server) {
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
	st, err := redisstore.New(context.Background(), client, redisstore.Options{Prefix: cfg.Prefix, Lease: cfg.Lease,
		ReadTimeout: storeReadTimeout, SkipEvictionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(cfg, st, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := s.seedPins(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.withOperator(s.handler()))
	t.Cleanup(srv.Close)
	return &proc{base: srv.URL}, s
}

// TestFleetUnknownListing: without ?workspace= the listing covers every
// configured workspace; paged two at a time it returns each unknown call
// once, and a malformed fleet cursor is refused.
func TestFleetUnknownListing(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newTestVendor(t)
	p, _ := operatorGateway(t, mr, vendor.URL)
	fail := map[string]any{"to": "x", "answer": 500}
	want := map[string]string{}
	for i, apiKey := range []string{e2eKeyOne, e2eKeyOne, e2eKeyOne, e2eKeyTwo, e2eKeyTwo} {
		k := idempotency.NewKey().String()
		call(t, newSession(t, p.base, apiKey, k), "mail.a", fail, "").wantOutcome(t, "unknown", false)
		want[k] = map[bool]string{true: "ws_one", false: "ws_two"}[i < 3]
	}
	got := map[string]string{}
	var order []string
	cursor, pages := "", 0
	for {
		code, m := p.post(t, "GET", "/v1/unknown?limit=2&cursor="+url.QueryEscape(cursor), e2eKeyAdmin, "")
		if code != 200 {
			t.Fatalf("page %d: %d %v", pages, code, m)
		}
		pages++
		items := m["unknown"].([]any)
		if len(items) > 2 {
			t.Fatalf("page of %d with limit 2", len(items))
		}
		for _, it := range items {
			rc := it.(map[string]any)
			k := rc["idempotency_key"].(string)
			if _, dup := got[k]; dup {
				t.Fatalf("%s listed twice", k)
			}
			got[k] = rc["workspace"].(string)
			order = append(order, got[k])
		}
		cursor = m["cursor"].(string)
		if cursor == "" {
			break
		}
		if !strings.HasPrefix(cursor, "f") || pages > 10 {
			t.Fatalf("cursor %q after %d pages", cursor, pages)
		}
	}
	if len(got) != len(want) || pages < 3 || !sort.StringsAreSorted(order) {
		t.Fatalf("listed %v in %d pages (order %v), want %v", got, pages, order, want)
	}
	for k, ws := range want {
		if got[k] != ws {
			t.Errorf("%s: workspace %q, want %q", k, got[k], ws)
		}
	}
	for _, bad := range []string{"x", "f9:", "f01:", "f-1:", "0:abc"} {
		if code, m := p.post(t, "GET", "/v1/unknown?cursor="+url.QueryEscape(bad), e2eKeyAdmin, ""); code != 400 || m["message"] != "malformed cursor" {
			t.Errorf("cursor %q: %d %v", bad, code, m)
		}
	}
	if code, m := p.post(t, "GET", "/v1/unknown", e2eKeyOne, ""); code != 403 {
		t.Errorf("a workspace key lists the fleet: %d %v", code, m)
	}
}
