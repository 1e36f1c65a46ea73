package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/internal/refservertest"
	"github.com/obol-gateway/obol/internal/secrettest"
	"github.com/obol-gateway/obol/mcpgateway/gatewayconfig"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// The route secrets of secretsConfig. Each has characters that JSON writes
// escaped, so the echo holds them in more than one form.
var routeSecrets = map[string]string{
	"ECHO_SECRET":      "sk_echo_9f/8e<7d>&c+Q",
	"NANGO_SECRET_KEY": "nango_sk/4a<b>&c_7e21",
	"COMPOSIO_API_KEY": "ak_comp/5d<e>&f_0c93",
}

const secretsAPIKey = "ob_secrets_ws_one"

// secretsConfig routes one tool natively and one through each broker, all to
// the echoing vendor ({{V}}).
const secretsConfig = `{
  "environment": "production", "allow_unsupported_writes": true,
  "workspaces": [{"id": "ws_one", "api_keys": ["` + secretsAPIKey + `"]}],
  "connections": [{"id": "conn_echo", "provider": "echo", "base_url": "{{V}}", "secret_env": "ECHO_SECRET"}],
  "brokers": [
    {"id": "nango_main", "kind": "nango", "base_url": "{{V}}", "secret_env": "NANGO_SECRET_KEY"},
    {"id": "composio_main", "kind": "composio", "base_url": "{{V}}", "secret_env": "COMPOSIO_API_KEY"}
  ],
  "tools": [
    {"connection": "conn_echo", "path": "/echo", "spec": {"tool": "echo.native",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}},
    {"connection": "conn_echo", "path": "/echo-500", "spec": {"tool": "echo.unknown",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}},
    {"broker": "nango_main", "connection_id": "user-1", "provider_config_key": "github", "path": "/echo",
     "spec": {"tool": "echo.nango", "route": "federated", "status": {"accepted": [201]}}},
    {"broker": "composio_main", "tool_slug": "ECHO_TOOL", "connected_account_id": "ca_1",
     "spec": {"tool": "echo.composio", "route": "federated", "status": {"accepted": [200]}}}
  ]
}`

// echoAll answers as a vendor (and a broker) that echoes every request
// header and the body into its JSON answer and the credential into the
// kept Request-Id header. It counts the requests that carried a secret.
type echoAll struct {
	*httptest.Server
	mu      sync.Mutex
	carried map[string]int // env name -> requests that carried its secret
}

func newEchoAll(t *testing.T) *echoAll {
	e := &echoAll{carried: map[string]int{}}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		for name, s := range routeSecrets {
			if strings.Contains(r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"), s) {
				e.carried[name]++
			}
		}
		e.mu.Unlock()
		echo, _ := json.Marshal(map[string]any{"path": r.URL.Path, "headers": r.Header, "body": string(body)})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Request-Id", "req "+r.Header.Get("Authorization")+r.Header.Get("X-Api-Key"))
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/v3/tools/execute/"):
			fmt.Fprintf(w, `{"successful":true,"data":%s,"error":null}`, echo)
		case strings.HasSuffix(r.URL.Path, "/echo-500"):
			w.WriteHeader(http.StatusInternalServerError)
			w.Write(echo)
		default:
			w.WriteHeader(http.StatusCreated)
			w.Write(echo)
		}
	}))
	t.Cleanup(e.Close)
	return e
}

func secretsEnv(name string) (string, bool) {
	s, ok := routeSecrets[name]
	return s, ok
}

// mcpCall posts one tools/call and returns the raw HTTP answer.
func mcpCall(t *testing.T, base, tool, key string) (int, []byte) {
	t.Helper()
	c := refservertest.Client{Base: base, APIKey: secretsAPIKey}
	r := c.CallTool(context.Background(), refservertest.Request{Tool: tool, Key: key, Args: map[string]string{"note": "hi"}})
	if r.HTTPStatus == 0 {
		t.Fatal(r.Err)
	}
	return r.HTTPStatus, r.Body
}

func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestVendorEchoesNoSecret: a vendor, Nango and Composio that echo their
// requests never get a route secret back to the client, into a receipt, into
// the store or into a log line.
func TestVendorEchoesNoSecret(t *testing.T) {
	vendor := newEchoAll(t)
	cfg, err := loadConfig([]byte(strings.ReplaceAll(secretsConfig, "{{V}}", vendor.URL)), secretsEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	mr := miniredis.RunT(t)
	st, closeStore, err := embedded.On(context.Background(), mr, redisstore.Options{Prefix: cfg.Store.Prefix,
		Lease: cfg.Store.Lease, ReadTimeout: storeReadTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(newServer(cfg, st, st, log).handler())
	t.Cleanup(srv.Close)

	secrets := make([]string, 0, len(routeSecrets))
	for _, s := range routeSecrets {
		secrets = append(secrets, s)
	}
	collected := map[string][]byte{}
	for _, tc := range []struct {
		tool, outcome string
		replays       bool // else the second call is a new attempt
	}{
		{"echo.native", "accepted", true},
		{"echo.unknown", "unknown", false}, // a vendor binding: unknown is attempted again
		{"echo.nango", "accepted", true},
		{"echo.composio", "accepted", true},
	} {
		key := idempotency.NewKey().String()
		for _, round := range []string{"first", "replay"} {
			code, body := mcpCall(t, srv.URL, tc.tool, key)
			var reply struct {
				Result struct {
					IsError           bool `json:"isError"`
					Content           []struct{ Text string }
					StructuredContent json.RawMessage `json:"structuredContent"`
					Meta              struct {
						Receipt receipt.Receipt `json:"dev.obol/receipt"`
					} `json:"_meta"`
				}
			}
			if err := json.Unmarshal(body, &reply); code != http.StatusOK || err != nil {
				t.Fatalf("%s %s: %d %v", tc.tool, round, code, err)
			}
			rc := reply.Result.Meta.Receipt
			if string(rc.Outcome) != tc.outcome || rc.Replayed != (round == "replay" && tc.replays) {
				t.Fatalf("%s %s: receipt %+v", tc.tool, round, rc)
			}
			// The echo is there, scrubbed, and still JSON.
			if len(reply.Result.Content) != 1 || !strings.Contains(reply.Result.Content[0].Text, receipt.Redacted) ||
				!strings.Contains(string(reply.Result.StructuredContent), receipt.Redacted) {
				t.Errorf("%s %s: the echo is not in the reply, or not scrubbed: %s", tc.tool, round, body)
			}
			collected["MCP reply, "+round+", "+tc.tool] = body
		}
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/receipts/"+key+"?tool="+tc.tool, nil)
		req.Header.Set("Authorization", "Bearer "+secretsAPIKey)
		code, rb := do(t, req)
		if code != http.StatusOK || !strings.Contains(string(rb), key) {
			t.Fatalf("receipt of %s: %d %s", tc.tool, code, rb)
		}
		collected["receipt "+tc.tool] = rb
	}
	collected["redis"] = secrettest.DumpRedis(t, mr)
	// Every call's line (written once its answer has left): 4 tools, 2 rounds.
	collected["log"] = []byte(logs.Wait("msg=tools/call ", 8, 10*time.Second))

	vendor.mu.Lock()
	carried := fmt.Sprint(vendor.carried)
	vendor.mu.Unlock()
	// Native: echo.native once and echo.unknown twice; each broker once.
	if carried != "map[COMPOSIO_API_KEY:1 ECHO_SECRET:3 NANGO_SECRET_KEY:1]" {
		t.Fatalf("requests that carried each secret: %s", carried)
	}
	if !strings.Contains(logs.String(), "attempt") {
		t.Fatalf("no log line captured: %q", logs.String())
	}
	for what, b := range collected {
		if l := secrettest.Leak(b, secrets...); l != "" {
			t.Errorf("%s holds a route secret (%s): %s", what, l, b)
		}
	}
}

// A secret shorter than receipt.MinSecretLen is a configuration error that
// names the variable, never the value.
func TestShortSecretIsConfigError(t *testing.T) {
	for _, env := range []string{"ECHO_SECRET", "NANGO_SECRET_KEY", "COMPOSIO_API_KEY"} {
		getenv := func(name string) (string, bool) {
			if name == env {
				return "s3cr3t7", true
			}
			return secretsEnv(name)
		}
		_, err := loadConfig([]byte(strings.ReplaceAll(secretsConfig, "{{V}}", "http://127.0.0.1:1")), getenv, &retry.Executor{})
		if !errors.Is(err, gatewayconfig.ErrInvalidConfig) || !strings.Contains(err.Error(), env) || !strings.Contains(err.Error(), "fewer than 8 bytes") ||
			strings.Contains(err.Error(), "s3cr3t7") {
			t.Errorf("%s: %v", env, err)
		}
	}
}
