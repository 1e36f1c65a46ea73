package main

import (
	"context"
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
	st, err := redisstore.New(context.Background(), client, redisstore.Options{Prefix: cfg.Prefix, Lease: cfg.Lease, ReadTimeout: storeReadTimeout})
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
// call with its key replays the settled outcome with the resolution; the
// vendor saw one request. Workspace keys can neither list nor settle, bad
// bodies change nothing, and a final call cannot be settled.
func TestSettleUnknownCall(t *testing.T) {
	rs := redistest.Start(t)
	vendor := newTestVendor(t)
	p := settleGateway(t, rs.Addr(), vendor.URL)
	k := idempotency.NewKey().String()
	args := map[string]any{"text": "hello", "answer": 500}
	call(t, newSession(t, p.base, e2eKeyOne, k), "chat.post", args, "").wantOutcome(t, "unknown", false)
	call(t, newSession(t, p.base, e2eKeyOne, k), "chat.post", args, "").wantRefusal(t, "outcome_unknown", 409)

	list := func(bearer, ws string) (int, map[string]any) {
		t.Helper()
		return p.post(t, "GET", "/v1/unknown?workspace="+ws, bearer, "")
	}
	listed := func(ws string) []string {
		t.Helper()
		code, m := list(e2eKeyAdmin, ws)
		if code != 200 {
			t.Fatalf("list %s: %d %v", ws, code, m)
		}
		var keys []string
		for _, u := range m["unknown"].([]any) {
			rc := u.(map[string]any)
			if rc["outcome"] != "unknown" || rc["workspace"] != ws {
				t.Fatalf("listed receipt %v", rc)
			}
			keys = append(keys, rc["idempotency_key"].(string)+"/"+rc["tool"].(string))
		}
		return keys
	}

	// Only an approver key lists.
	for _, c := range []struct {
		bearer string
		code   int
	}{{e2eKeyOne, 403}, {e2eKeyTwo, 403}, {"", 401}, {"ob_not_a_key_at_all", 401}} {
		if code, m := list(c.bearer, "ws_one"); code != c.code {
			t.Errorf("list with %q: %d %v, want %d", c.bearer, code, m, c.code)
		}
	}
	for _, ws := range []string{"", "ws_nope", "ws_one:x"} {
		if code, m := list(e2eKeyAdmin, ws); code != 400 || m["reason"] != "invalid_request" {
			t.Errorf("list of workspace %q: %d %v", ws, code, m)
		}
	}
	if code, m := p.post(t, "GET", "/v1/unknown?workspace=ws_one&cursor=zz", e2eKeyAdmin, ""); code != 400 {
		t.Errorf("list with a malformed cursor: %d %v", code, m)
	}
	if got := listed("ws_one"); len(got) != 1 || got[0] != k+"/chat.post" {
		t.Fatalf("listed %v, want the unknown call", got)
	}
	if got := listed("ws_two"); len(got) != 0 {
		t.Fatalf("ws_two lists %v", got)
	}

	resolve := "/v1/receipts/" + k + "/resolve?tool=chat.post&workspace=ws_one"
	const note = "checked with the vendor: message m_1 was posted"
	for _, bearer := range []string{e2eKeyOne, e2eKeyTwo, ""} {
		if code, m := p.post(t, "POST", resolve, bearer, `{"outcome":"accepted","note":"x"}`); code != 401 && code != 403 {
			t.Errorf("settle with %q: %d %v", bearer, code, m)
		}
	}
	for _, body := range []string{
		`{"outcome":"accepted","outcome":"definitely_rejected"}`,
		`{"outcome":"accepted","Outcome":"accepted"}`,
		`{"outcome":"accepted","note":"n","by":"sk_live_4242"}`,
		`{"outcome":"accepted"} {}`,
		`{"outcome":"unknown","note":"sk_live_4242"}`,
		`{"outcome":"in_progress"}`,
		`{"note":"sk_live_4242"}`,
		`{"outcome":"accepted","note":"sk_live_4242\u0000"}`,
		`{"outcome":"accepted","note":"sk_live_4242\nforged"}`,
		`{"outcome":"accepted","note":"` + strings.Repeat("n", idempotency.MaxNoteBytes+1) + `"}`,
		`{"outcome":"accepted","attempt_count":0}`,
		`{"outcome":"accepted","note":"sk_live_4242"}`, // no attempt_count
		`{"outcome":"accepted","attempt_count":null}`,
		`{"outcome":"accepted","attempt_count":1,"note":"paid \u202egnp.exe"}`,
		`{"outcome":"accepted","attempt_count":1,"note":"paid\u2028forged line"}`,
		`{"outcome":"accepted","attempt_count":1,"note":"paid\u200b4242"}`,
		`{"outcome":"accepted","attempt_count":1,"note":"paid\ufeff"}`,
		``,
	} {
		code, m := p.post(t, "POST", resolve, e2eKeyAdmin, body)
		if code != 400 || m["reason"] != "invalid_request" {
			t.Errorf("%.60s: %d %v", body, code, m)
		}
		if msg, _ := m["message"].(string); strings.Contains(msg, "4242") {
			t.Errorf("%.60s: the refusal quotes a value: %q", body, msg)
		}
	}
	if code, m := p.post(t, "POST", resolve, e2eKeyAdmin, `{"outcome":"accepted","attempt_count":2}`); code != 409 || m["reason"] != "stale" {
		t.Errorf("settle with a stale attempt count: %d %v", code, m)
	}
	if got := listed("ws_one"); len(got) != 1 {
		t.Fatalf("after refused settles, listed %v", got)
	}

	code, m := p.post(t, "POST", resolve, e2eKeyAdmin, `{"outcome":"accepted","note":"`+note+`","attempt_count":1}`)
	if code != 200 || m["outcome"] != "accepted" {
		t.Fatalf("settle: %d %v", code, m)
	}
	res, _ := m["resolution"].(map[string]any)
	if by, _ := res["by"].(string); res["outcome"] != "accepted" || res["note"] != note || by != "ops-e2e" || res["at"] == "" {
		t.Fatalf("settle answer's resolution %v", res)
	}
	if strings.Contains(by(res), e2eKeyAdmin) {
		t.Fatal("the resolution names the approver key")
	}
	if got := listed("ws_one"); len(got) != 0 {
		t.Fatalf("after the settle, listed %v", got)
	}

	again := call(t, newSession(t, p.base, e2eKeyOne, k), "chat.post", args, "")
	again.wantOutcome(t, "accepted", true)
	if r := again.rc.Resolution; r == nil || r.Outcome != "accepted" || r.Note != note || r.By != by(res) || r.At.IsZero() {
		t.Fatalf("replayed receipt's resolution %+v", r)
	}
	if again.res.IsError {
		t.Error("a call settled accepted replays as an error")
	}
	if n := vendor.count("/chat", ""); n != 1 {
		t.Errorf("vendor saw %d requests, want 1", n)
	}
	if code, m := p.post(t, "GET", "/v1/receipts/"+k+"?tool=chat.post", e2eKeyOne, ""); code != 200 || m["resolution"] == nil {
		t.Errorf("receipt after settle: %d %v", code, m)
	}

	// Settled or accepted, a call is final: it cannot be settled.
	if code, m := p.post(t, "POST", resolve, e2eKeyAdmin, `{"outcome":"definitely_rejected","attempt_count":1}`); code != 409 || m["reason"] != "not_unknown" {
		t.Errorf("second settle: %d %v", code, m)
	}
	paid := idempotency.NewKey().String()
	call(t, newSession(t, p.base, e2eKeyOne, paid), "pay.charge", map[string]any{"amount": 1}, "").wantOutcome(t, "accepted", false)
	if code, m := p.post(t, "POST", "/v1/receipts/"+paid+"/resolve?tool=pay.charge&workspace=ws_one", e2eKeyAdmin,
		`{"outcome":"definitely_rejected","note":"wrong","attempt_count":1}`); code != 409 || m["reason"] != "not_unknown" {
		t.Errorf("settle of an accepted call: %d %v", code, m)
	}
	// Another workspace's call under the same key is not there.
	if code, m := p.post(t, "POST", "/v1/receipts/"+k+"/resolve?tool=chat.post&workspace=ws_two", e2eKeyAdmin,
		`{"outcome":"accepted","attempt_count":1}`); code != 404 {
		t.Errorf("settle in another workspace: %d %v", code, m)
	}
	if code, m := p.post(t, "POST", "/v1/receipts/"+k+"/resolve?tool=nope&workspace=ws_one", e2eKeyAdmin,
		`{"outcome":"accepted"}`); code != 404 || m["reason"] != "unknown_tool" {
		t.Errorf("settle of an unknown tool: %d %v", code, m)
	}
}

func by(res map[string]any) string { s, _ := res["by"].(string); return s }
