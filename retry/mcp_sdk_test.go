package retry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// recorded is one request to a go-sdk server, as it arrived.
type recorded struct {
	header http.Header
	body   map[string]any
}

// sdkUpstream is the go-sdk's own server with a tool "create" (its region
// argument annotated x-mcp-header), behind a handler that records each
// tools/call. It counts the tool's runs per _meta key.
func sdkUpstream(t *testing.T, stateless bool) (url string, calls func() []recorded, runs func() map[string]int) {
	s := mcp.NewServer(&mcp.Implementation{Name: "up", Version: "1"}, &mcp.ServerOptions{Logger: slog.New(slog.DiscardHandler)})
	var mu sync.Mutex
	ran := map[string]int{}
	s.AddTool(&mcp.Tool{Name: "create", InputSchema: map[string]any{"type": "object",
		"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}}}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			key, _ := req.Params.Meta[effectspec.DefaultMetaName].(string)
			mu.Lock()
			ran[key]++
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "created"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: stateless, Logger: slog.New(slog.DiscardHandler)})
	var got []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m map[string]any
		if json.Unmarshal(body, &m) == nil && m["method"] == "tools/call" {
			mu.Lock()
			got = append(got, recorded{r.Header.Clone(), m})
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []recorded {
			mu.Lock()
			defer mu.Unlock()
			return append([]recorded(nil), got...)
		}, func() map[string]int {
			mu.Lock()
			defer mu.Unlock()
			out := map[string]int{}
			for k, v := range ran {
				out[k] = v
			}
			return out
		}
}

// TestMCPUpstreamSendsAsTheSDKClient: MCPUpstream's tools/call carries the
// headers and the body the go-sdk client sends for it (ids aside), and the
// go-sdk server runs it.
func TestMCPUpstreamSendsAsTheSDKClient(t *testing.T) {
	ctx := context.Background()
	url, calls, runs := sdkUpstream(t, true)
	key := idempotency.NewKey()

	c := mcp.NewClient(&mcp.Implementation{Name: "obol-gateway", Version: "0.1.0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create", Arguments: map[string]any{"region": "eu"},
		Meta: mcp.Meta{effectspec.DefaultMetaName: key.String()}}); err != nil {
		t.Fatal(err)
	}

	u := &retry.MCPUpstream{URL: url}
	res := u.Target("create").Send(ctx, retry.Attempt{Key: key, Number: 1, Arguments: []byte(`{"region":"eu"}`),
		Spec: mcpSpec(effectspec.BindingMeta, "")})
	if res.Phase != retry.Responded || res.Outcome != effectspec.Accepted {
		t.Fatalf("phase %s outcome %s err %v status %d body %s", res.Phase, res.Outcome, res.Err, res.Status, res.Body)
	}
	got := calls()
	if len(got) != 2 {
		t.Fatalf("%d tools/call recorded, want 2", len(got))
	}
	sdk, ours := got[0], got[1]
	delete(sdk.body, "id")
	delete(ours.body, "id")
	if !reflect.DeepEqual(sdk.body, ours.body) {
		t.Errorf("body:\n go-sdk %v\n ours   %v", sdk.body, ours.body)
	}
	// What the go-sdk's http.Client adds on its own is not the protocol's.
	for _, h := range []http.Header{sdk.header, ours.header} {
		for _, k := range []string{"Accept-Encoding", "Content-Length", "User-Agent"} {
			h.Del(k)
		}
	}
	if !reflect.DeepEqual(sdk.header, ours.header) {
		t.Errorf("header:\n go-sdk %v\n ours   %v", sdk.header, ours.header)
	}
	if n := runs()[key.String()]; n != 2 {
		t.Errorf("the tool ran %d times under the key, want 2", n)
	}
}

// TestMCPUpstreamSDKServers: the go-sdk server, stateless 2026-07-28 and
// with 2025-11-25 sessions, runs the call once per attempt.
func TestMCPUpstreamSDKServers(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		url, calls, runs := sdkUpstream(t, stateless)
		u := &retry.MCPUpstream{URL: url}
		for range 2 {
			res, key := sendMCP(u, mcpSpec(effectspec.BindingMeta, ""), `{"region":"eu"}`)
			if res.Phase != retry.Responded || res.Outcome != effectspec.Accepted || runs()[key.String()] != 1 {
				t.Fatalf("stateless=%v: phase %s outcome %s err %v runs %v", stateless, res.Phase, res.Outcome, res.Err, runs())
			}
		}
		got := calls()
		version := got[1].header.Get("Mcp-Protocol-Version")
		session := got[1].header.Get("Mcp-Session-Id")
		if stateless && (version != "2026-07-28" || session != "") || !stateless && (version != "2025-11-25" || session == "") {
			t.Fatalf("stateless=%v: version %q session %q", stateless, version, session)
		}
	}
}
