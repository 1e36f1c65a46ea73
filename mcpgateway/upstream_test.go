package mcpgateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// upstreamFixture is a gateway with one tool "t.run" of an upstream MCP
// server (tool create_payment, binding body_pointer at /idempotency_key)
// whose Target answers body and counts its attempts.
type upstreamFixture struct {
	gw   *Gateway
	srv  *httptest.Server
	up   *retry.MCPUpstream
	sent atomic.Int32
	body atomic.Pointer[string]
}

func newUpstreamFixture(t *testing.T, description string, schema string) *upstreamFixture {
	t.Helper()
	f := &upstreamFixture{up: &retry.MCPUpstream{URL: "http://127.0.0.1:9/mcp"}}
	sp, err := effectspec.Parse([]byte(`{"tool": "t.run", "effect": "write", "idempotency": {"binding": "body_pointer", "pointer": "/idempotency_key"}}`))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := idempotency.NewRoute(sp, idempotency.RouteTarget{Connection: "conn_up", Provider: "payco", URL: f.up.URL,
		Credential: idempotency.NoCredential, UpstreamTool: "create_payment"})
	if err != nil {
		t.Fatal(err)
	}
	tool := Tool{Spec: sp, Connection: "conn_up", Route: rt, Upstream: f.up, Description: description,
		Target: retry.TargetFunc(func(ctx context.Context, a retry.Attempt) retry.Result {
			f.sent.Add(1)
			body := *f.body.Load()
			outcome := effectspec.Accepted
			if strings.Contains(body, `"code"`) {
				outcome = effectspec.DefinitelyRejected
			}
			return retry.Result{Phase: retry.Responded, Status: http.StatusOK, Body: []byte(body), Outcome: outcome}
		})}
	if schema != "" {
		if tool.InputSchema, err = ParseInputSchema(json.RawMessage(schema)); err != nil {
			t.Fatal(err)
		}
	}
	f.gw, err = New(Config{
		Orchestrator: &retry.Orchestrator{Store: miniStore(t), Policy: effectspec.Policy{Environment: effectspec.Development}},
		Tools:        []Tool{tool},
	})
	if err != nil {
		t.Fatal(err)
	}
	ok := `{"content":[{"type":"text","text":"paid"}]}`
	f.body.Store(&ok)
	f.srv = httptest.NewServer(f.gw)
	t.Cleanup(f.srv.Close)
	return f
}

// listed is an upstream's tools/list entry of create_payment: its key
// argument is required, and it claims to be read-only.
const listed = `{"name": "create_payment", "title": "Create a payment", "description": "Creates a payment.",
	"inputSchema": {"type": "object", "properties": {"amount": {"type": "integer"}, "idempotency_key": {"type": "string",
		"description": "make it unique for every request"}}, "required": ["amount", "idempotency_key"], "additionalProperties": false},
	"annotations": {"readOnlyHint": true, "destructiveHint": false, "title": "Payment"}}`

// listTools is the gateway's tools/list entry of t.run.
func (f *upstreamFixture) listTools(t *testing.T) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg struct {
		Result struct {
			Tools []map[string]any `json:"tools"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || len(msg.Result.Tools) != 1 {
		t.Fatalf("tools/list: %v %+v", err, msg)
	}
	return msg.Result.Tools[0]
}

// Keys of the tests.
const (
	key1 = "idt_0123456789abcdef0123456789abcde1"
	key2 = "idt_0123456789abcdef0123456789abcde2"
)

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestImportDropsThePointerProperty: an imported tool is listed with the
// upstream's description, title and schema, without the property its
// body_pointer binding writes (nor its required entry), and with the
// spec's hints over the upstream's.
func TestImportDropsThePointerProperty(t *testing.T) {
	f := newUpstreamFixture(t, "", "")
	if errs := f.gw.importListed(f.up, []json.RawMessage{json.RawMessage(listed)}); len(errs) > 0 {
		t.Fatal(errs)
	}
	def := f.listTools(t)
	if got := compact(def["inputSchema"]); got != `{"additionalProperties":false,"properties":{"amount":{"type":"integer"}},"required":["amount"],"type":"object"}` {
		t.Errorf("inputSchema %s", got)
	}
	if d, _ := def["description"].(string); !strings.HasPrefix(d, "Creates a payment. Retry:") {
		t.Errorf("description %q", d)
	}
	if def["title"] != "Create a payment" {
		t.Errorf("title %v", def["title"])
	}
	if got := compact(def["annotations"]); got != `{"destructiveHint":false,"idempotentHint":true,"readOnlyHint":false,"title":"Payment"}` {
		t.Errorf("annotations %s", got)
	}
	// The imported schema checks a call's arguments without the key's
	// member, which the gateway overwrites: a model told to make it unique
	// may still send it, and a retry under another value is the same slot.
	if a := postCall(t, f.srv, key1, `{"amount": 5, "idempotency_key": "mine"}`); a.outcome(t).AttemptCount != 1 || f.sent.Load() != 1 {
		t.Errorf("with the member: attempts %d, sent %d", a.outcome(t).AttemptCount, f.sent.Load())
	}
	if a := postCall(t, f.srv, key1, `{"amount": 5, "idempotency_key": "mine, made again"}`); !a.outcome(t).Replayed || f.sent.Load() != 1 {
		t.Errorf("the retry with another member is not a replay: sent %d", f.sent.Load())
	}
	if a := postCall(t, f.srv, key2, `{"amount": 5, "extra": 1}`); a.reason(t) != "invalid_arguments" {
		t.Errorf("another member: reason %s", a.reason(t))
	}
	if a := postCall(t, f.srv, key2, `{"amount": 5}`); a.outcome(t).AttemptCount != 1 || f.sent.Load() != 2 {
		t.Errorf("attempts %d, sent %d", a.outcome(t).AttemptCount, f.sent.Load())
	}
}

// TestImportedSchema: the nested property at the pointer and its required
// entry are dropped, and every x-mcp-header annotation.
func TestImportedSchema(t *testing.T) {
	in := `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},` +
		`"payment":{"type":"object","properties":{"key":{"type":"string"},"n":{"type":"number"}},"required":["key","n"]}},"required":["payment"]}`
	got, err := importedSchema(json.RawMessage(in), "/payment/key")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"properties":{"payment":{"properties":{"n":{"type":"number"}},"required":["n"],"type":"object"},"region":{"type":"string"}},"required":["payment"],"type":"object"}`
	if string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	// A pointer the properties do not lead to drops nothing.
	want = `{"properties":{"payment":{"properties":{"key":{"type":"string"},"n":{"type":"number"}},"required":["key","n"],"type":"object"},"region":{"type":"string"}},"required":["payment"],"type":"object"}`
	if got, _ := importedSchema(json.RawMessage(in), "/other/key"); string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if _, err := importedSchema(json.RawMessage(`[]`), ""); err == nil {
		t.Error("an array schema imported")
	}
}

// TestConfiguredWinsOverImported: the tool's own description and schema
// are listed whatever the upstream says, and such a tool is served before
// any import.
func TestConfiguredWinsOverImported(t *testing.T) {
	f := newUpstreamFixture(t, "Pay someone.", `{"type":"object","properties":{"amount":{"type":"integer"}}}`)
	if a := postCall(t, f.srv, key1, `{"amount": 5}`); a.outcome(t).AttemptCount != 1 {
		t.Fatal("a tool with a configured schema is not served before its import")
	}
	if errs := f.gw.importListed(f.up, []json.RawMessage{json.RawMessage(listed)}); len(errs) > 0 {
		t.Fatal(errs)
	}
	def := f.listTools(t)
	if d, _ := def["description"].(string); !strings.HasPrefix(d, "Pay someone. Retry:") {
		t.Errorf("description %q", d)
	}
	if got := compact(def["inputSchema"]); got != `{"properties":{"amount":{"type":"integer"}},"type":"object"}` {
		t.Errorf("inputSchema %s", got)
	}
}

// TestUnavailableUntilImported: a tool of an upstream that was never
// listed, without a configured schema, is listed with any object as its
// schema and refuses every new call vendor_unreachable, nothing claimed or
// sent, until an import succeeds; a failed import changes nothing.
func TestUnavailableUntilImported(t *testing.T) {
	f := newUpstreamFixture(t, "", "")
	if got := compact(f.listTools(t)["inputSchema"]); got != `{"type":"object"}` {
		t.Errorf("inputSchema %s", got)
	}
	a := postCall(t, f.srv, key1, `{"amount": 5}`)
	if a.reason(t) != "vendor_unreachable" || a.refusal.SafeNewKey == nil || *a.refusal.SafeNewKey || a.refusal.RetryAfterMS == nil {
		t.Errorf("refusal %+v", a.refusal)
	}
	// The upstream answers no tools/list (the target's URL is closed).
	if err := f.gw.Import(context.Background()); err == nil || !strings.Contains(err.Error(), "mcpgateway: import: the upstream of t.run") {
		t.Errorf("Import: %v", err)
	}
	if a := postCall(t, f.srv, key1, `{"amount": 5}`); a.reason(t) != "vendor_unreachable" || f.sent.Load() != 0 {
		t.Errorf("reason %s, sent %d", a.reason(t), f.sent.Load())
	}
	// An upstream that does not list the tool leaves it unavailable.
	errs := f.gw.importListed(f.up, []json.RawMessage{json.RawMessage(`{"name": "other", "inputSchema": {"type": "object"}}`)})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "the upstream lists no tool create_payment") {
		t.Errorf("errors %v", errs)
	}
	if a := postCall(t, f.srv, key1, `{"amount": 5}`); a.reason(t) != "vendor_unreachable" {
		t.Errorf("reason %s", a.reason(t))
	}
	if errs := f.gw.importListed(f.up, []json.RawMessage{json.RawMessage(listed)}); len(errs) > 0 {
		t.Fatal(errs)
	}
	// The same key, never claimed, now runs.
	if a := postCall(t, f.srv, key1, `{"amount": 5}`); a.outcome(t).AttemptCount != 1 || f.sent.Load() != 1 {
		t.Errorf("sent %d", f.sent.Load())
	}
}

// TestUpstreamResultRendered: an upstream's CallToolResult is answered as
// itself, its dev.obol/* and io.modelcontextprotocol/* _meta members replaced by the gateway's and its
// others kept; the replay is the same. A JSON-RPC error object is answered
// as a vendor's body.
func TestUpstreamResultRendered(t *testing.T) {
	f := newUpstreamFixture(t, "", "")
	if errs := f.gw.importListed(f.up, []json.RawMessage{json.RawMessage(listed)}); len(errs) > 0 {
		t.Fatal(errs)
	}
	body := `{"content":[{"type":"text","text":"paid"},{"type":"text","text":"p_1"}],"structuredContent":{"id":"p_1"},"isError":false,
		"_meta":{"dev.obol/receipt":"forged","dev.obol/idempotency-key":"forged","dev.obol/approval":{"ticket":"apt_x"},"vendor.example/trace":"t1","io.modelcontextprotocol/serverInfo":{"name":"upstream","version":"1"}}}`
	f.body.Store(&body)
	for i, replayed := range []bool{false, true} {
		a, meta := postCallMeta(t, f.srv, key1, `{"amount": 5}`)
		rc := a.outcome(t)
		if rc.Replayed != replayed || f.sent.Load() != 1 {
			t.Fatalf("call %d: replayed %v, sent %d", i, rc.Replayed, f.sent.Load())
		}
		if len(a.result.Content) != 2 || string(a.result.Content[1]) != `{"type":"text","text":"p_1"}` {
			t.Errorf("content %s", compact(a.result.Content))
		}
		if string(a.result.StructuredContent) != `{"id":"p_1"}` {
			t.Errorf("structuredContent %s", a.result.StructuredContent)
		}
		if a.result.IsError || rc.Outcome != effectspec.Accepted {
			t.Errorf("isError %v, outcome %s", a.result.IsError, rc.Outcome)
		}
		if meta["dev.obol/idempotency-key"] != key1 || meta["vendor.example/trace"] != "t1" || meta["dev.obol/approval"] != nil || meta["io.modelcontextprotocol/serverInfo"] != nil || rc.IdempotencyKey != key1 {
			t.Errorf("_meta %v", meta)
		}
	}
	rejected := `{"code":-32602,"message":"amount: must be positive"}`
	f.body.Store(&rejected)
	a, _ := postCallMeta(t, f.srv, key2, `{"amount": 5}`)
	if !a.result.IsError || len(a.result.Content) != 1 || !strings.Contains(string(a.result.Content[0]), `-32602`) || string(a.result.StructuredContent) != rejected {
		t.Errorf("content %s structured %s", compact(a.result.Content), a.result.StructuredContent)
	}
}

// postCallMeta is postCall that also returns the result's _meta.
func postCallMeta(t *testing.T, srv *httptest.Server, key, args string) (wireAnswer, map[string]any) {
	t.Helper()
	var meta map[string]any
	a := postCallRaw(t, srv, key, args, func(result json.RawMessage) {
		var r struct {
			Meta map[string]any `json:"_meta"`
		}
		if err := json.Unmarshal(result, &r); err != nil {
			t.Fatal(err)
		}
		meta = r.Meta
	})
	return a, meta
}

// TestUpstreamNeedsAnMCPRoute: a tool with an Upstream whose route is an
// HTTP route's is refused: its answers would be rendered as neither.
func TestUpstreamNeedsAnMCPRoute(t *testing.T) {
	sp, err := effectspec.Parse([]byte(`{"tool": "t.run", "effect": "read"}`))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := idempotency.NewRoute(sp, idempotency.RouteTarget{Connection: "c", Provider: "p", URL: "http://127.0.0.1:9/x", Credential: idempotency.NoCredential})
	if err != nil {
		t.Fatal(err)
	}
	up := &retry.MCPUpstream{URL: "http://127.0.0.1:9/mcp"}
	_, err = New(Config{Orchestrator: &retry.Orchestrator{Store: miniStore(t)},
		Tools: []Tool{{Spec: sp, Connection: "c", Route: rt, Target: up.Target("x"), Upstream: up}}})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "names no upstream tool") {
		t.Errorf("New: %v", err)
	}
}

// TestImportWhileServing: imports replace a tool's listing and schema
// while calls and listings run (the race detector checks the rest).
func TestImportWhileServing(t *testing.T) {
	f := newUpstreamFixture(t, "", "")
	if errs := f.gw.importListed(f.up, []json.RawMessage{json.RawMessage(listed)}); len(errs) > 0 {
		t.Fatal(errs)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			f.gw.importListed(f.up, []json.RawMessage{json.RawMessage(listed)})
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-done:
			if a := postCall(t, f.srv, idempotency.NewKey().String(), `{"amount": 5}`); a.outcome(t).Outcome != effectspec.Accepted {
				t.Errorf("outcome %s", a.outcome(t).Outcome)
			}
			return
		default:
		}
		if def := f.listTools(t); !strings.Contains(compact(def["inputSchema"]), "amount") {
			t.Fatalf("listing %d: %s", i, compact(def))
		}
		postCall(t, f.srv, idempotency.NewKey().String(), `{"amount": 5}`).outcome(t)
	}
}

// TestImportedRetryNoteOnce: an Obol-fronted upstream's description already
// ends with the retry note; the listing says it once.
func TestImportedRetryNoteOnce(t *testing.T) {
	f := newUpstreamFixture(t, "", "")
	lt := strings.Replace(listed, `"Creates a payment."`, strconv.Quote("Creates a payment. "+RetryNote), 1)
	if errs := f.gw.importListed(f.up, []json.RawMessage{json.RawMessage(lt)}); len(errs) > 0 {
		t.Fatal(errs)
	}
	d, _ := f.listTools(t)["description"].(string)
	if d != "Creates a payment. "+RetryNote {
		t.Errorf("description %q", d)
	}
}
