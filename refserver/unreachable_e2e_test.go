package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
)

// unreachableConfig points conn_v at a vendor whose port is closed at first
// ({{VENDOR}}) and conn_h at one that reads each request and hangs up
// ({{HANGUP}}).
const unreachableConfig = `{
  "key_prefix": "unr:", "lease": "10s", "environment": "development",
  "workspaces": [{"id": "ws_one", "api_keys": ["` + e2eKeyOne + `"]}],
  "approver_keys": [{"name": "ops-e2e", "key": "` + e2eKeyAdmin + `"}],
  "connections": [
    {"id": "conn_v", "provider": "testvendor", "base_url": "{{VENDOR}}", "secret_env": "E2E_VENDOR_SECRET"},
    {"id": "conn_h", "provider": "hangup", "base_url": "{{HANGUP}}", "secret_env": "E2E_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "path": "/charge", "spec": {"tool": "pay.charge",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"},
      "status": {"accepted": [201], "definitely_rejected": [402], "retryable": [503]}}},
    {"connection": "conn_v", "path": "/chat", "spec": {"tool": "chat.post",
      "idempotency": {"binding": "unsupported"}, "status": {"accepted": [201]}}},
    {"connection": "conn_h", "path": "/charge", "spec": {"tool": "pay.hang",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}}
  ]
}`

// closedPort holds a loopback port that nothing listens on: a socket bound
// to it without listen, so a connection to it is refused and no other
// process can take the port meanwhile. open closes the socket and listens
// on the port at once.
func closedPort(t *testing.T) (addr string, open func() net.Listener) {
	t.Helper()
	// Close-on-exec, under ForkLock as package net does it: the gateway
	// this test starts must not inherit the socket, and with it the port.
	syscall.ForkLock.RLock()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		syscall.Close(fd)
		t.Fatal(err)
	}
	addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(sa.(*syscall.SockaddrInet4).Port))
	closed := false
	t.Cleanup(func() {
		if !closed {
			syscall.Close(fd)
		}
	})
	return addr, func() net.Listener {
		t.Helper()
		closed = true
		syscall.Close(fd)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on %s: %v", addr, err)
		}
		return ln
	}
}

// TestEndToEndVendorUnreachable, through the built binary on a real Redis:
//
//   - with the vendor's port closed, a call (header binding, and an
//     unsupported one) is refused vendor_unreachable: error.data status
//     503, retry_after_ms, safe_new_key true, a Retry-After header and a
//     text that says nothing was sent; the vendor saw nothing. Before, it
//     was the result "outcome unknown: the vendor may or may not have
//     acted", attempt_count 2.
//   - the vendor comes up: the retry with the same key is dispatched once
//     and accepted. Its receipt reads attempt_count 3: the request the
//     vendor saw plus the two reservations of the refused call, which
//     never left (docs/DESIGN.md, sections 8 and 9).
//   - an unknown slot (the vendor read the first attempt and hung up)
//     whose redispatch cannot connect stays unknown, safe_new_key false.
//   - settled definitely_rejected by an operator, it replays with who
//     settled it and when, never "rejected by the vendor (status 0)".
func TestEndToEndVendorUnreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	addr, open := closedPort(t)
	hang := refservertest.StartHangUpVendor(t, "", nil)
	cfg := strings.ReplaceAll(unreachableConfig, "{{VENDOR}}", "http://"+addr)
	cfg = strings.ReplaceAll(cfg, "{{HANGUP}}", hang.URL)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())
	post := func(key, tool string, args any) rawAnswer {
		t.Helper()
		return mcpPost(t, p.base, e2eKeyOne, key, tool, args, nil)
	}

	charge := map[string]any{"amount": 1200, "currency": "usd"}
	chat := map[string]any{"text": "hi"}
	keyCharge, keyChat := idempotency.NewKey().String(), idempotency.NewKey().String()

	// The vendor's port is closed.
	for _, c := range []struct {
		key, tool string
		args      any
	}{{keyCharge, "pay.charge", charge}, {keyChat, "chat.post", chat}} {
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call",
			"params": map[string]any{"name": c.tool, "arguments": c.args}})
		client := refservertest.Client{Base: p.base, APIKey: e2eKeyOne, HTTP: &http.Client{Timeout: time.Minute}}
		resp, raw, err := client.Post(context.Background(), strings.NewReader(string(body)), func(r *http.Request) {
			r.Header.Set("Idempotency-Key", c.key)
		})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		var env struct {
			Error *struct {
				Message string `json:"message"`
				Data    struct {
					Reason       string `json:"reason"`
					Status       int    `json:"status"`
					Key          string `json:"idempotency_key"`
					RetryAfterMS *int64 `json:"retry_after_ms"`
					SafeNewKey   *bool  `json:"safe_new_key"`
				} `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &env); err != nil || env.Error == nil {
			t.Fatalf("%s with the vendor down: %d %s; want a vendor_unreachable refusal", c.tool, resp.StatusCode, raw)
		}
		d := env.Error.Data
		if d.Reason != "vendor_unreachable" || d.Status != 503 || d.Key != c.key || d.RetryAfterMS == nil || *d.RetryAfterMS <= 0 ||
			d.SafeNewKey == nil || !*d.SafeNewKey {
			t.Errorf("%s: error.data %s; want vendor_unreachable, 503, the key, retry_after_ms, safe_new_key true", c.tool, raw)
		}
		if m := env.Error.Message; !strings.Contains(m, "nothing was sent") || !strings.Contains(m, "retry with the same key") {
			t.Errorf("%s: message %q; want it to say nothing was sent and to retry with the same key", c.tool, m)
		}
		if resp.Header.Get("Retry-After") != "1" || resp.Header.Get(headerKey) != c.key {
			t.Errorf("%s: Retry-After %q, %s %q", c.tool, resp.Header.Get("Retry-After"), headerKey, resp.Header.Get(headerKey))
		}
	}

	// The vendor comes up on the same port.
	vendor := newTestVendor(t)
	up := &http.Server{Handler: vendor.Config.Handler}
	go up.Serve(open())
	t.Cleanup(func() { up.Close() })
	if n := vendor.count("/charge", "") + vendor.count("/chat", ""); n != 0 {
		t.Fatalf("the vendor saw %d requests before it came up", n)
	}

	a := post(keyCharge, "pay.charge", charge)
	rc := a.receipt(t)
	if rc.Outcome != "accepted" || rc.Replayed || rc.AttemptCount != 3 || a.safe(t) != "false" {
		t.Fatalf("retry of the refused charge: %s; want accepted, attempt_count 3 (1 sent, 2 never sent)", a.raw)
	}
	if n := p.sent(t, vendor, "pay.charge", "/charge", keyCharge); n != 1 {
		t.Errorf("the vendor saw the charge %d times, want 1", n)
	}
	a = post(keyChat, "chat.post", chat)
	if rc := a.receipt(t); rc.Outcome != "accepted" || rc.AttemptCount != 3 {
		t.Fatalf("retry of the refused chat (unsupported binding): %s", a.raw)
	}
	if n := vendor.count("/chat", ""); n != 1 {
		t.Errorf("the vendor saw the chat %d times, want 1", n)
	}
	if rc := post(keyCharge, "pay.charge", charge).receipt(t); !rc.Replayed || rc.AttemptCount != 3 {
		t.Errorf("replay of the charge: %+v", rc)
	}

	// An unknown slot: the vendor read the first attempt and hung up.
	keyHang := idempotency.NewKey().String()
	first := post(keyHang, "pay.hang", charge)
	if rc := first.receipt(t); rc.Outcome != "unknown" || rc.AttemptCount != 1 || hang.HungUp() != 1 {
		t.Fatalf("hang-up call: %s (vendor saw %d)", first.raw, hang.HungUp())
	}
	hang.Close() // its port is closed from now on
	again := post(keyHang, "pay.hang", charge)
	rc = again.receipt(t)
	if again.reason() != "" || rc.Outcome != "unknown" || rc.AttemptCount != 3 || again.safe(t) != "false" || !again.resp.Result.IsError {
		t.Fatalf("redispatch of the unknown slot to a closed port: %d %s; want the unknown result, attempt_count 3, safe_new_key false", again.code, again.raw)
	}
	if !strings.Contains(again.text(), "outcome unknown") {
		t.Errorf("redispatch text %q", again.text())
	}

	// An operator settles it definitely_rejected: the replay names who and when.
	body, _ := json.Marshal(map[string]any{"outcome": "definitely_rejected", "attempt_count": rc.AttemptCount, "note": "the vendor has no such charge"})
	if code, m := p.post(t, "POST", "/v1/receipts/"+keyHang+"/resolve?tool=pay.hang&workspace=ws_one", e2eKeyAdmin, string(body)); code != 200 {
		t.Fatalf("settle: %d %v", code, m)
	}
	settled := post(keyHang, "pay.hang", charge)
	src := settled.receipt(t)
	if src.Outcome != "definitely_rejected" || src.Resolution == nil || !src.Replayed {
		t.Fatalf("settled replay: %s", settled.raw)
	}
	want := "definitely_rejected: settled by ops-e2e at " + src.Resolution.At.UTC().Format("2006-01-02T15:04:05.000Z07:00")
	if txt := settled.text(); !strings.HasPrefix(txt, want) || strings.Contains(txt, "status 0") {
		t.Errorf("settled replay text %q, want it to begin %q", txt, want)
	}
	if hang.HungUp() != 1 {
		t.Errorf("the hang-up vendor saw %d requests, want 1", hang.HungUp())
	}
}
