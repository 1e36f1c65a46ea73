package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/retry"
)

// settleGateway serves the e2e configuration, with unsupported writes
// allowed, from this process on the Redis at addr.
func settleGateway(t *testing.T, addr, vendorURL string) *proc {
	t.Helper()
	raw := strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendorURL)
	raw = strings.Replace(raw, `"environment": "production",`, `"environment": "production", "allow_unsupported_writes": true,`, 1)
	env := func(string) (string, bool) { return e2eSecret, true }
	cfg, err := loadConfig([]byte(raw), env, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	st, err := redisstore.New(context.Background(), client, redisstore.Options{Prefix: cfg.Store.Prefix, Lease: cfg.Store.Lease, ReadTimeout: storeReadTimeout})
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

// TestSettleUnknownCall: an unsupported call that ends unknown (the vendor
// answers 500) is listed for an approver, settled accepted, and the next
// call with its key replays the settled outcome with the resolution, whose
// "by" is the approver's configured name; the vendor saw one request. A
// workspace key can neither list nor settle. (The admin API's refusals of
// bad requests are tested in mcpgateway/admin.)
func TestSettleUnknownCall(t *testing.T) {
	rs := redistest.Start(t)
	vendor := newTestVendor(t)
	p := settleGateway(t, rs.Addr(), vendor.URL)
	k := idempotency.NewKey().String()
	args := map[string]any{"text": "hello", "answer": 500}
	call(t, newSession(t, p.base, e2eKeyOne, k), "chat.post", args, "").wantOutcome(t, "unknown", false)
	call(t, newSession(t, p.base, e2eKeyOne, k), "chat.post", args, "").wantRefusal(t, "outcome_unknown", 409)

	listed := func() []string {
		t.Helper()
		code, m := p.post(t, "GET", "/v1/unknown?workspace=ws_one", e2eKeyAdmin, "")
		if code != 200 {
			t.Fatalf("list: %d %v", code, m)
		}
		var keys []string
		for _, u := range m["unknown"].([]any) {
			rc := u.(map[string]any)
			keys = append(keys, rc["idempotency_key"].(string)+"/"+rc["tool"].(string))
		}
		return keys
	}
	if code, m := p.post(t, "GET", "/v1/unknown?workspace=ws_one", e2eKeyOne, ""); code != 403 {
		t.Errorf("list with a workspace key: %d %v", code, m)
	}
	if got := listed(); len(got) != 1 || got[0] != k+"/chat.post" {
		t.Fatalf("listed %v, want the unknown call", got)
	}
	resolve := "/v1/receipts/" + k + "/resolve?tool=chat.post&workspace=ws_one"
	if code, m := p.post(t, "POST", resolve, e2eKeyOne, `{"outcome":"accepted","attempt_count":1}`); code != 403 {
		t.Errorf("settle with a workspace key: %d %v", code, m)
	}
	// The note is scrubbed of every configured secret.
	const note = "checked with the vendor: message m_1 was posted"
	code, m := p.post(t, "POST", resolve, e2eKeyAdmin, `{"outcome":"accepted","note":"`+note+` `+e2eSecret+`","attempt_count":1}`)
	if code != 200 || m["outcome"] != "accepted" {
		t.Fatalf("settle: %d %v", code, m)
	}
	res, _ := m["resolution"].(map[string]any)
	if by(res) != "ops-e2e" || res["at"] == "" || strings.Contains(fmt.Sprint(res["note"]), e2eSecret) || !strings.HasPrefix(fmt.Sprint(res["note"]), note) {
		t.Fatalf("settle answer's resolution %v", res)
	}
	if got := listed(); len(got) != 0 {
		t.Fatalf("after the settle, listed %v", got)
	}
	again := call(t, newSession(t, p.base, e2eKeyOne, k), "chat.post", args, "")
	again.wantOutcome(t, "accepted", true)
	if r := again.rc.Resolution; r == nil || r.Outcome != "accepted" || r.By != "ops-e2e" || r.At.IsZero() {
		t.Fatalf("replayed receipt's resolution %+v", r)
	}
	if again.res.IsError {
		t.Error("a call settled accepted replays as an error")
	}
	if n := vendor.count("/chat", ""); n != 1 {
		t.Errorf("vendor saw %d requests, want 1", n)
	}
	if code, m := p.post(t, "POST", resolve, e2eKeyAdmin, `{"outcome":"definitely_rejected","attempt_count":1}`); code != 409 || m["reason"] != "not_unknown" {
		t.Errorf("second settle: %d %v", code, m)
	}
}

func by(res map[string]any) string { s, _ := res["by"].(string); return s }
