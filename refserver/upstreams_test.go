package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/retry"
)

// testUpstream is an upstream MCP server (the go-sdk's) with one tool,
// create_payment, that takes an idempotency_key argument and counts its
// runs per key. While down, every request is answered 503.
type testUpstream struct {
	*httptest.Server
	down atomic.Bool
	mu   sync.Mutex
	runs map[string]int
}

func newTestUpstream(t *testing.T) *testUpstream {
	u := &testUpstream{runs: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "payco", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "create_payment", Description: "Creates a payment.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Payment"},
		InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"},` +
			`"idempotency_key":{"type":"string","description":"unique for every request"}},"required":["amount","idempotency_key"]}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				Key string `json:"idempotency_key"`
			}
			json.Unmarshal(req.Params.Arguments, &args)
			u.mu.Lock()
			u.runs[args.Key]++
			u.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}},
				StructuredContent: map[string]any{"id": "p_1"},
				Meta:              mcp.Meta{"dev.obol/receipt": "forged", "payco/trace": "t1"}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "refund", InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"}}}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key, _ := req.Params.Meta["dev.obol/idempotency-key"].(string)
			u.mu.Lock()
			u.runs["meta:"+key]++
			u.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.down.Load() {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *testUpstream) ran(key string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.runs[key]
}

const upstreamConfig = `{
  "environment": "development",
  "workspaces": [{"id": "ws_one", "api_keys": ["` + e2eKeyOne + `"]}],
  "approver_keys": [{"name": "ops-e2e", "key": "` + e2eKeyAdmin + `"}],
  "connections": [{"id": "conn_pay", "provider": "payco", "protocol": "mcp", "base_url": "{{UPSTREAM}}/mcp"}],
  "tools": [{"connection": "conn_pay", "upstream_tool": "create_payment",
             "spec": {"tool": "pay.create", "effect": "write", "idempotency": {"binding": "body_pointer", "pointer": "/idempotency_key"}}}]
}`

// TestUpstreamDownAtStartThenUp: an upstream that cannot be listed at
// start leaves its tool listed with any object as its schema and every
// call refused vendor_unreachable, nothing sent; the background import
// reads it once it is up, and then the tool is listed as the upstream
// lists it, without the argument its binding writes, and its calls run
// once per key. POST /v1/tools/import reads it again for an approver, and
// says vendor_unreachable while it is down, changing nothing.
func TestUpstreamDownAtStartThenUp(t *testing.T) {
	up := newTestUpstream(t)
	up.down.Store(true)
	srv, done := upstreamGateway(t, strings.ReplaceAll(upstreamConfig, "{{UPSTREAM}}", up.URL))

	key := idempotency.NewKey().String()
	sess := newSession(t, srv.URL, e2eKeyOne, key)
	listed := func() *mcp.Tool {
		t.Helper()
		res, err := sess.ListTools(context.Background(), nil)
		if err != nil || len(res.Tools) != 1 {
			t.Fatalf("tools/list: %v", err)
		}
		return res.Tools[0]
	}
	if got := compactJSON(t, listed().InputSchema); got != `{"type":"object"}` {
		t.Errorf("schema while down %s", got)
	}
	call(t, sess, "pay.create", map[string]any{"amount": 5}, "").wantRefusal(t, "vendor_unreachable", http.StatusServiceUnavailable)
	if code := importStatus(t, srv.URL, e2eKeyAdmin); code != http.StatusBadGateway {
		t.Errorf("import while down: %d", code)
	}
	if code := importStatus(t, srv.URL, e2eKeyOne); code != http.StatusUnauthorized {
		t.Errorf("import with a workspace key: %d", code)
	}

	up.down.Store(false)
	<-done // the background import read the upstream
	def := listed()
	if got := compactJSON(t, def.InputSchema); got != `{"properties":{"amount":{"type":"integer"}},"required":["amount"],"type":"object"}` {
		t.Errorf("imported schema %s", got)
	}
	if !strings.HasPrefix(def.Description, "Creates a payment. Retry:") || def.Annotations == nil || def.Annotations.ReadOnlyHint ||
		!def.Annotations.IdempotentHint || def.Annotations.Title != "Payment" {
		t.Errorf("description %q annotations %+v", def.Description, def.Annotations)
	}
	for _, replayed := range []bool{false, true} {
		a := call(t, sess, "pay.create", map[string]any{"amount": 5}, "")
		a.wantOutcome(t, "accepted", replayed)
		if a.text != "paid" || a.res.Meta["payco/trace"] != "t1" || a.res.Meta["dev.obol/receipt"] == "forged" {
			t.Errorf("text %q meta %v", a.text, a.res.Meta)
		}
		if n := up.ran(a.rc.VendorKey); n != 1 || a.rc.VendorKey == "" || up.ran(key) != 0 {
			t.Errorf("the upstream ran %d times under the vendor key %q", n, a.rc.VendorKey)
		}
	}
	if code := importStatus(t, srv.URL, e2eKeyAdmin); code != http.StatusOK {
		t.Errorf("import: %d", code)
	}
	// A failed import keeps what the last one read.
	up.down.Store(true)
	if code := importStatus(t, srv.URL, e2eKeyAdmin); code != http.StatusBadGateway {
		t.Errorf("import while down: %d", code)
	}
	if got := compactJSON(t, listed().InputSchema); !strings.Contains(got, "amount") {
		t.Errorf("schema after a failed import %s", got)
	}
}

// upstreamGateway serves config on the embedded store and starts its
// import as a start does; done is closed once no import runs.
func upstreamGateway(t *testing.T, config string) (srv *httptest.Server, done <-chan struct{}) {
	t.Helper()
	cfg, err := loadConfig([]byte(config), testEnv, &retry.Executor{})
	if err != nil {
		t.Fatal(err)
	}
	st, closeStore, err := embedded.New(context.Background(), redisstore.Options{ReadTimeout: storeReadTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	s := newServer(cfg, st, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv = httptest.NewServer(s.handler())
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done = s.startImport(ctx)
	t.Cleanup(func() { cancel(); <-done })
	return srv, done
}

func importStatus(t *testing.T, base, bearer string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/tools/import", nil)
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func compactJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m any
	json.Unmarshal(b, &m)
	b, _ = json.Marshal(m)
	return string(b)
}

// TestUpstreamMetaBinding: a tool of binding meta gets the slot's vendor
// key in params._meta, never the client's key; the receipt names the
// upstream tool; the same key again is a replay, run once upstream.
func TestUpstreamMetaBinding(t *testing.T) {
	up := newTestUpstream(t)
	config := strings.ReplaceAll(upstreamConfig, "{{UPSTREAM}}", up.URL)
	config = strings.Replace(config, `"tools": [`, `"tools": [{"connection": "conn_pay", "upstream_tool": "refund",
             "spec": {"tool": "pay.refund", "effect": "write", "idempotency": {"binding": "meta"}}}, `, 1)
	srv, done := upstreamGateway(t, config)
	<-done // the upstream is up: read at start
	base := srv.URL
	key := idempotency.NewKey().String()
	sess := newSession(t, base, e2eKeyOne, key)
	var vendorKey string
	for _, replayed := range []bool{false, true} {
		a := call(t, sess, "pay.refund", map[string]any{"amount": 5}, "")
		a.wantOutcome(t, "accepted", replayed)
		if a.text != "refunded" || a.rc.Binding != "meta" || a.rc.Propagation != "meta" || a.rc.VendorKey == "" || a.rc.VendorKey == key ||
			a.rc.Route.UpstreamTool != "refund" {
			t.Errorf("text %q receipt %+v", a.text, a.rc)
		}
		vendorKey = a.rc.VendorKey
	}
	if n := up.ran("meta:" + vendorKey); n != 1 || up.ran("meta:"+key) != 0 {
		t.Errorf("the upstream ran %d times under the vendor key", n)
	}
}
