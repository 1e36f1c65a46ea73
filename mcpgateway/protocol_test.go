package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// testedVersions are the protocol versions the gateway serves: every one
// the go-sdk speaks, the stateless 2026-07-28 first.
var testedVersions = []string{"2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// stateless reports whether protocol version v has no handshake.
func stateless(v string) bool { return v >= "2026-07-28" }

// bodyRecorder keeps the JSON-RPC method and params._meta of every POST a
// client sends.
type bodyRecorder struct {
	mu   sync.Mutex
	sent []gjson.Result
}

func (br *bodyRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		br.mu.Lock()
		br.sent = append(br.sent, gjson.ParseBytes(b))
		br.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (br *bodyRecorder) methods() []string {
	br.mu.Lock()
	defer br.mu.Unlock()
	var ms []string
	for _, m := range br.sent {
		ms = append(ms, m.Get("method").Str)
	}
	return ms
}

// TestProtocolVersions: the official go-sdk client, configured for each
// protocol version it speaks, negotiates exactly that version, lists the
// tools, and calls a tool twice with the same key in _meta: the second
// call is the replay, the handler ran once. Under 2026-07-28 the client
// never sends initialize (server/discover, then stateless calls), and
// every request carries the io.modelcontextprotocol/* _meta members next
// to dev.obol/idempotency-key.
func TestProtocolVersions(t *testing.T) {
	if got := mcp.SupportedProtocolVersions(); !slices.Equal(got, testedVersions) {
		t.Fatalf("the SDK speaks %v; DESIGN and this test list %v", got, testedVersions)
	}
	for _, v := range testedVersions {
		t.Run(v, func(t *testing.T) {
			var runs atomic.Int32
			srv := inProcessGateway(t, effectspec.BindingInProcess, "", func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
				runs.Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
			})
			br := &bodyRecorder{}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "protocol-test", Version: "1"}, nil)
			cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL,
				HTTPClient: &http.Client{Transport: br}, DisableStandaloneSSE: true, MaxRetries: -1},
				&mcp.ClientSessionOptions{ProtocolVersion: v})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != v {
				t.Fatalf("negotiated %s, want %s (sent %v)", got, v, br.methods())
			}
			tools, err := cs.ListTools(ctx, nil)
			if err != nil || len(tools.Tools) != 1 || tools.Tools[0].Name != "t.run" {
				t.Fatalf("tools/list: %v %+v", err, tools)
			}
			key := idempotency.NewKey().String()
			var rcs []receipt.Receipt
			for range 2 {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t.run", Arguments: map[string]any{"x": 1},
					Meta: mcp.Meta{MetaKey: key}})
				if err != nil || res.IsError {
					t.Fatalf("tools/call: %v %+v", err, res)
				}
				var rc receipt.Receipt
				b, _ := json.Marshal(res.Meta[MetaReceipt])
				if err := json.Unmarshal(b, &rc); err != nil || rc.IdempotencyKey != key {
					t.Fatalf("receipt %s: %v", b, err)
				}
				rcs = append(rcs, rc)
			}
			if rcs[0].Replayed || rcs[0].Outcome != effectspec.Accepted || !rcs[1].Replayed || rcs[1].Outcome != effectspec.Accepted || runs.Load() != 1 {
				t.Errorf("first %+v, again %+v, %d runs: want one run and its replay", rcs[0], rcs[1], runs.Load())
			}
			// ping: removed by 2026-07-28, where the SDK's client sends it
			// without the reserved members (invalid_request); served before.
			var we *jsonrpc.Error
			if err := cs.Ping(ctx, nil); stateless(v) != (errors.As(err, &we) && gjson.GetBytes(we.Data, "reason").Str == "invalid_request") {
				t.Errorf("ping under %s: %v", v, err)
			}
			ms := br.methods()
			if slices.Contains(ms, "initialize") == stateless(v) || slices.Contains(ms, "server/discover") != stateless(v) {
				t.Errorf("%s sent %v", v, ms)
			}
			br.mu.Lock()
			defer br.mu.Unlock()
			for _, m := range br.sent {
				if !stateless(v) || !m.Get("id").Exists() || m.Get("method").Str == "ping" {
					continue
				}
				meta := m.Get("params._meta")
				if meta.Get(`io\.modelcontextprotocol/protocolVersion`).Str != v {
					t.Errorf("%s carried _meta %s, want the protocol version in it", m.Get("method").Str, meta.Raw)
				}
				if m.Get("method").Str == "tools/call" && meta.Get(`dev\.obol/idempotency-key`).Str != key {
					t.Errorf("tools/call carried _meta %s, want the key next to the reserved members", meta.Raw)
				}
			}
		})
	}
}

// TestDiscoverRefusals: a server/discover or stateless call that the
// SDK's transport refuses under 2026-07-28 (standard headers missing or
// not the message's, a version not served) is an invalid_request with
// status 400 and a fixed message naming what to send, never "internal";
// the unsupported-version refusal keeps the list the client negotiates
// from, and no refusal quotes the request.
func TestDiscoverRefusals(t *testing.T) {
	srv := inProcessGateway(t, effectspec.BindingInProcess, "", func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	discover := func(version string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version +
			`","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
	}
	post := func(body string, h map[string]string) (int, gjson.Result) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader([]byte(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, gjson.ParseBytes(b)
	}
	// Served: the versions the gateway speaks, and the server's name.
	st, ok := post(discover("2026-07-28"), map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"})
	var sv []string
	for _, v := range ok.Get("result.supportedVersions").Array() {
		sv = append(sv, v.Str)
	}
	if st != 200 || !slices.Contains(sv, "2026-07-28") || !slices.Contains(sv, "2025-11-25") || ok.Get(`result._meta.io\.modelcontextprotocol/serverInfo.name`).Str != defaultName {
		t.Errorf("discover: %d %s", st, ok.Raw)
	}
	for name, tc := range map[string]struct {
		body    string
		h       map[string]string
		code    int64
		message string
	}{
		"no Mcp-Method": {discover("2026-07-28"), map[string]string{"Mcp-Protocol-Version": "2026-07-28"}, -32020, "Mcp-Method"},
		"Mcp-Method not the message's": {discover("2026-07-28"),
			map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/zzlist"}, -32020, "Mcp-Method"},
		"no Mcp-Protocol-Version": {discover("2026-07-28"), map[string]string{"Mcp-Method": "server/discover"}, -32020, "Mcp-Protocol-Version"},
		"version not served": {discover("2099-01-01"),
			map[string]string{"Mcp-Protocol-Version": "2099-01-01", "Mcp-Method": "server/discover"}, -32022, "supported"},
		"tools/call without Mcp-Name": {`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"t.run","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","dev.obol/idempotency-key":"` + idempotency.NewKey().String() + `"}}}`,
			map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}, -32020, "Mcp-Name"},
	} {
		st, r := post(tc.body, tc.h)
		e := r.Get("error")
		if st != http.StatusBadRequest || e.Get("code").Int() != tc.code || e.Get("data.reason").Str != "invalid_request" ||
			e.Get("data.status").Int() != 400 || !strings.Contains(e.Get("message").Str, tc.message) {
			t.Errorf("%s: %d %s", name, st, r.Raw)
		}
		if strings.Contains(r.Raw, "zzlist") || strings.Contains(r.Raw, "2099") {
			t.Errorf("%s: the refusal quotes the request: %s", name, r.Raw)
		}
		if tc.code == -32022 && !slices.Contains(stringsOf(e.Get("data.supported")), "2026-07-28") {
			t.Errorf("%s: no supported versions to negotiate from: %s", name, r.Raw)
		}
	}
}

func stringsOf(r gjson.Result) []string {
	var ss []string
	for _, v := range r.Array() {
		ss = append(ss, v.Str)
	}
	return ss
}

// TestReservedMetaNames: under 2026-07-28, through the official client, a
// tools/call whose _meta holds the key next to every member name the
// protocol reserves is served; a near miss of the key's name next to them
// (in the protocol's namespace or ours) is malformed_key, and nothing runs.
func TestReservedMetaNames(t *testing.T) {
	reserved := []string{mcp.MetaKeyProtocolVersion, mcp.MetaKeyClientInfo, mcp.MetaKeyClientCapabilities,
		mcp.MetaKeyServerInfo, metaLogLevel, mcp.MetaKeySubscriptionID, "progressToken"}
	for _, name := range reserved {
		if nearMissName([]byte(name)) {
			t.Errorf("%s is a reserved name, not a near miss", name)
		}
	}
	var runs atomic.Int32
	srv := inProcessGateway(t, effectspec.BindingInProcess, "", func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
		runs.Add(1)
		return &mcp.CallToolResult{}, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "protocol-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("negotiated %s", v)
	}
	key := idempotency.NewKey().String()
	meta := mcp.Meta{MetaKey: key, metaLogLevel: "info", mcp.MetaKeySubscriptionID: "s1", "progressToken": "p1"}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t.run", Arguments: map[string]any{}, Meta: meta}); err != nil || res.IsError {
		t.Fatalf("call with the reserved members: %v %+v", err, res)
	}
	for _, miss := range []string{"io.modelcontextprotocol/idempotency-key", "io.modelcontextprotocol/idempotencyKey", "dev.obol/idempotencyKey"} {
		m := mcp.Meta{MetaKey: key, metaLogLevel: "info", miss: idempotency.NewKey().String()}
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "t.run", Arguments: map[string]any{}, Meta: m})
		var we *jsonrpc.Error
		if !errors.As(err, &we) || gjson.GetBytes(we.Data, "reason").Str != "malformed_key" {
			t.Errorf("%s next to the reserved members: %v, want malformed_key", miss, err)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// metaLogLevel is the reserved name of the deprecated logging feature,
// which clients may still send.
const metaLogLevel = "io.modelcontextprotocol/logLevel"

// TestStatelessRawCall: under 2026-07-28 a request needs no handshake
// before it: a first-ever POST, a tools/call with the reserved _meta
// members, the standard headers and the key in _meta, runs; the same POST
// again is its replay. ping, which 2026-07-28 removed (as initialize), is
// method_not_found under it and answered under 2025-11-25.
func TestStatelessRawCall(t *testing.T) {
	var runs atomic.Int32
	srv := inProcessGateway(t, effectspec.BindingInProcess, "", func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
		runs.Add(1)
		return &mcp.CallToolResult{}, nil
	})
	const triple = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}`
	key := idempotency.NewKey().String()
	post := func(method, name, body string) (int, gjson.Result) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if strings.Contains(body, "2026-07-28") {
			req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		} else {
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.Header.Get("Mcp-Session-Id") != "" {
			t.Errorf("%s: a session %q", method, resp.Header.Get("Mcp-Session-Id"))
		}
		return resp.StatusCode, gjson.ParseBytes(b)
	}
	call := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t.run","arguments":{"x":1},"_meta":{` + triple + `,"dev.obol/idempotency-key":"` + key + `"}}}`
	st1, first := post("tools/call", "t.run", call)
	st2, again := post("tools/call", "t.run", call)
	rc := `result._meta.dev\.obol/receipt`
	if st1 != 200 || st2 != 200 || first.Get(rc+".replayed").Bool() || !again.Get(rc+".replayed").Bool() ||
		again.Get(rc+".idempotency_key").Str != key || runs.Load() != 1 {
		t.Errorf("first %d %s\nagain %d %s\n%d runs", st1, first.Raw, st2, again.Raw, runs.Load())
	}
	st, ping := post("ping", "", `{"jsonrpc":"2.0","id":2,"method":"ping","params":{"_meta":{`+triple+`}}}`)
	if st != http.StatusNotFound || ping.Get("error.data.reason").Str != "method_not_found" {
		t.Errorf("ping under 2026-07-28: %d %s", st, ping.Raw)
	}
	if st, pong := post("ping", "", `{"jsonrpc":"2.0","id":3,"method":"ping"}`); st != 200 || !pong.Get("result").IsObject() {
		t.Errorf("ping under 2025-11-25: %d %s", st, pong.Raw)
	}
}
