package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/retry"
)

// inProcess serves configJSON from this process on miniredis.
func inProcess(t *testing.T, configJSON string, env func(string) (string, bool)) string {
	t.Helper()
	return inProcessLog(t, configJSON, env, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// inProcessLog is inProcess writing its log to log.
func inProcessLog(t *testing.T, configJSON string, env func(string) (string, bool), log *slog.Logger) string {
	t.Helper()
	cfg, err := loadConfig([]byte(configJSON), env, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	st, closeStore, err := embedded.New(context.Background(), redisstore.Options{Prefix: cfg.Store.Prefix, Lease: cfg.Store.Lease, ReadTimeout: storeReadTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	srv := httptest.NewServer(newServer(cfg, st, st, log).handler())
	t.Cleanup(srv.Close)
	return srv.URL
}

// fakeNango answers the Nango proxy: 201 for /proxy/ok, a dropped
// connection after reading the request for /proxy/drop, 500 for /proxy/500.
type fakeNango struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newFakeNango(t *testing.T) *fakeNango {
	n := &fakeNango{}
	n.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		n.mu.Lock()
		n.reqs = append(n.reqs, r)
		n.mu.Unlock()
		switch r.URL.Path {
		case "/proxy/drop":
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		case "/proxy/500":
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusCreated)
			io.WriteString(w, `{"number": 7}`)
		}
	}))
	t.Cleanup(n.Close)
	return n
}

func (n *fakeNango) requests() []*http.Request {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*http.Request(nil), n.reqs...)
}

const federatedConfig = `{
  "environment": "production", "allow_unsupported_writes": true,
  "workspaces": [{"id": "ws_one", "api_keys": ["` + e2eKeyOne + `"]}],
  "brokers": [{"id": "nango_main", "kind": "nango", "base_url": "{{NANGO}}", "secret_env": "NANGO_SECRET_KEY"}],
  "tools": [
    {"broker": "nango_main", "connection_id": "user-1", "provider_config_key": "github", "path": "/ok",
     "spec": {"tool": "gh.create_issue", "route": "federated", "status": {"accepted": [201]}}},
    {"broker": "nango_main", "connection_id": "user-1", "provider_config_key": "github", "path": "/drop",
     "spec": {"tool": "gh.drop", "route": "federated", "status": {"accepted": [201]}}},
    {"broker": "nango_main", "connection_id": "user-1", "provider_config_key": "github", "path": "/500",
     "spec": {"tool": "gh.500", "route": "federated", "status": {"accepted": [201], "retryable": [500]}}}
  ]
}`

func TestFederatedCalls(t *testing.T) {
	nango := newFakeNango(t)
	base := inProcess(t, strings.ReplaceAll(federatedConfig, "{{NANGO}}", nango.URL), testEnv)

	k := idempotency.NewKey().String()
	s := newSession(t, base, e2eKeyOne, k)
	a := call(t, s, "gh.create_issue", map[string]any{"title": "x"}, "")
	a.wantOutcome(t, "accepted", false)
	if a.rc.Binding != "unsupported" || a.rc.Propagation != "none" || a.rc.Route.Connection != "user-1" || a.rc.AttemptCount != 1 {
		t.Errorf("receipt %+v", a.rc)
	}
	reqs := nango.requests()
	if len(reqs) != 1 {
		t.Fatalf("nango saw %d requests", len(reqs))
	}
	r := reqs[0]
	if r.URL.Path != "/proxy/ok" || r.Header.Get("Retries") != "0" || r.Header.Get("Retry-On") != "" ||
		r.Header.Get("Connection-Id") != "user-1" || r.Header.Get("Provider-Config-Key") != "github" ||
		r.Header.Get("Authorization") != "Bearer "+testSecret+"_NANGO_SECRET_KEY" || r.Header.Get("Idempotency-Key") != "" {
		t.Errorf("nango request %s %v", r.URL.Path, r.Header)
	}
	call(t, s, "gh.create_issue", map[string]any{"title": "x"}, "").wantOutcome(t, "accepted", true)
	if n := len(nango.requests()); n != 1 {
		t.Errorf("replay reached nango: %d requests", n)
	}

	// A dropped connection after the request was sent: unknown, isError,
	// and the same key is never sent again (no vendor binding).
	k2 := idempotency.NewKey().String()
	s2 := newSession(t, base, e2eKeyOne, k2)
	u := call(t, s2, "gh.drop", map[string]any{}, "")
	if u.err != nil || !u.res.IsError || u.rc.Outcome != "unknown" || u.rc.AttemptCount != 1 || u.text == "" {
		t.Fatalf("dropped: err %v isError %v receipt %+v text %q", u.err, u.res != nil && u.res.IsError, u.rc, u.text)
	}
	call(t, s2, "gh.drop", map[string]any{}, "").wantRefusal(t, "outcome_unknown", 409)

	// An unlisted status is unknown too, with the vendor's status on the
	// receipt; retryable is inert without a vendor binding (one attempt).
	v := call(t, newSession(t, base, e2eKeyOne, ""), "gh.500", map[string]any{}, "")
	if v.err != nil || !v.res.IsError || v.rc.Outcome != "unknown" || v.rc.Status != 500 || v.rc.AttemptCount != 1 {
		t.Errorf("500: err %v receipt %+v", v.err, v.rc)
	}
	drops, fives := 0, 0
	for _, r := range nango.requests() {
		switch r.URL.Path {
		case "/proxy/drop":
			drops++
		case "/proxy/500":
			fives++
		}
	}
	if drops != 1 || fives != 1 {
		t.Errorf("nango saw %d drop and %d 500 requests, want 1 and 1", drops, fives)
	}
}

func TestFederatedWriteDeniedInProduction(t *testing.T) {
	nango := newFakeNango(t)
	cfg := strings.Replace(strings.ReplaceAll(federatedConfig, "{{NANGO}}", nango.URL), `"allow_unsupported_writes": true`, `"allow_unsupported_writes": false`, 1)
	base := inProcess(t, cfg, testEnv)
	call(t, newSession(t, base, e2eKeyOne, ""), "gh.create_issue", map[string]any{}, "").wantRefusal(t, "policy_denied", 403)
	if n := len(nango.requests()); n != 0 {
		t.Errorf("nango saw %d requests", n)
	}
}

// TestDemoMode runs main's run with no flags but -addr: the embedded store,
// the demo config and vendor. A call replays, its receipt reads back, the
// store is announced as not durable, and cancelling stops the server.
func TestDemoMode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	stderr := &syncBuffer{}
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, []string{"-addr", "127.0.0.1:0"}, pw, stderr)
		pw.Close()
	}()
	out := &syncBuffer{}
	lines := make(chan string, 8)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := pr.Read(buf)
			out.Write(buf[:n])
			for _, l := range strings.Split(string(buf[:n]), "\n") {
				lines <- l
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	base := ""
	for l := range lines {
		if _, rest, ok := strings.Cut(l, "listening on "); ok {
			base, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	if base == "" {
		t.Fatalf("no listen address; stderr:\n%s", stderr.String())
	}
	go func() {
		for range lines {
		}
	}()
	k := idempotency.NewKey().String()
	s := newSession(t, base, demoKeyAcme, k)
	args := map[string]any{"amount": 1200, "currency": "usd"}
	call(t, s, "payments.create_charge", args, "").wantOutcome(t, "accepted", false)
	call(t, s, "payments.create_charge", args, "").wantOutcome(t, "accepted", true)
	call(t, s, "payments.create_charge", map[string]any{"amount": 1}, "").wantRefusal(t, "request_mismatch", 422)
	call(t, newSession(t, base, demoKeyAcme, ""), "chat.post_message", map[string]any{"text": "hi"}, "").wantOutcome(t, "accepted", false)

	req, _ := http.NewRequest(http.MethodGet, base+"/v1/receipts/"+k+"?tool=payments.create_charge", nil)
	req.Header.Set("Authorization", "Bearer "+demoKeyAcme)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"attempt_count":1`) {
		t.Errorf("receipt: %d %s", resp.StatusCode, body)
	}
	cancel()
	if code := <-exit; code != 0 {
		t.Errorf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "NOT DURABLE") || !strings.Contains(out.String(), demoKeyAdmin) {
		t.Errorf("stdout %q\nstderr %q", out.String(), stderr.String())
	}
}
