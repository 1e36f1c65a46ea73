package mcpgo_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/nearmisstest"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/mcpgo"
	"github.com/obol-gateway/obol/retry"
)

// notesServer serves an idempotent notes.create on a miniredis store; notes
// returns the raw arguments of every note made.
func notesServer(t *testing.T) (url string, notes func() []string) {
	t.Helper()
	store, closeStore := exampleStore()
	t.Cleanup(closeStore)
	var mu sync.Mutex
	var made []string
	s := server.NewMCPServer("notes", "1.0.0")
	s.AddTool(mcp.NewTool("notes.create"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		a, ok := mcpgo.Attempt(ctx)
		if !ok {
			t.Error("no attempt in the handler's context")
		}
		mu.Lock()
		defer mu.Unlock()
		made = append(made, string(a.Arguments))
		return mcp.NewToolResultText("saved"), nil
	})
	s.AddTool(mcp.NewTool("notes.count"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("plain"), nil
	})
	spec, err := effectspec.Parse([]byte(`{"tool": "notes.create", "effect": "write", "idempotency": {"binding": "in_process"}}`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := mcpgo.New(s, mcpgo.Config{Specs: []effectspec.Spec{spec},
		Orchestrator: &retry.Orchestrator{Store: store, Policy: effectspec.Policy{Environment: effectspec.Development}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), made...)
	}
}

// connect is mcp-go's streamable HTTP client, initialized, sending header.
func connect(t *testing.T, url string, header map[string]string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(header))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Initialize(context.Background(), mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	return c
}

// callTool calls name with args (raw JSON) and _meta members meta.
func callTool(c *client.Client, name, args string, meta map[string]any) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = json.RawMessage(args)
	if meta != nil {
		req.Params.Meta = &mcp.Meta{AdditionalFields: meta}
	}
	return c.CallTool(context.Background(), req)
}

// receiptOf is the result's receipt and key.
func receiptOf(t *testing.T, res *mcp.CallToolResult) (map[string]any, string) {
	t.Helper()
	if res.Meta == nil {
		t.Fatal("result without _meta")
	}
	rc, ok := res.Meta.AdditionalFields[mcpgateway.MetaReceipt].(map[string]any)
	key, _ := res.Meta.AdditionalFields[mcpgateway.MetaKey].(string)
	if !ok {
		t.Fatalf("result _meta without a receipt: %+v", res.Meta.AdditionalFields)
	}
	return rc, key
}

func TestOneKeyOneNote(t *testing.T) {
	url, notes := notesServer(t)
	c := connect(t, url, nil)
	key := idempotency.NewKey().String()
	var receipts []map[string]any
	for range 2 {
		res, err := callTool(c, "notes.create", `{"text":"buy milk"}`, map[string]any{mcpgateway.MetaKey: key})
		if err != nil {
			t.Fatal(err)
		}
		rc, k := receiptOf(t, res)
		if k != key || res.IsError {
			t.Fatalf("key %q, isError %v", k, res.IsError)
		}
		receipts = append(receipts, rc)
	}
	if n := len(notes()); n != 1 {
		t.Fatalf("%d notes, want 1", n)
	}
	first, second := receipts[0], receipts[1]
	if first["replayed"] != false || second["replayed"] != true {
		t.Errorf("replayed %v then %v", first["replayed"], second["replayed"])
	}
	for _, f := range []string{"idempotency_key", "request_hash", "outcome", "attempt_count", "created_at", "binding"} {
		if first[f] != second[f] {
			t.Errorf("receipt %s: %v then %v", f, first[f], second[f])
		}
	}
	// The same key in the header: the same call.
	hc := connect(t, url, map[string]string{mcpgateway.HeaderKey: key})
	res, err := callTool(hc, "notes.create", `{"text":"buy milk"}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rc, _ := receiptOf(t, res); rc["replayed"] != true || len(notes()) != 1 {
		t.Errorf("header key: replayed %v, %d notes", rc["replayed"], len(notes()))
	}
}

// The two integers are one float64 apart from none: mcp-go decodes both
// to 9007199254740992, the raw arguments keep them two requests.
func TestLargeIntegersAreTwoRequests(t *testing.T) {
	url, notes := notesServer(t)
	c := connect(t, url, nil)
	hashes := map[string]bool{}
	for _, n := range []string{"9007199254740993", "9007199254740992"} {
		res, err := callTool(c, "notes.create", `{"n":`+n+`}`, map[string]any{mcpgateway.MetaKey: idempotency.NewKey().String()})
		if err != nil {
			t.Fatal(err)
		}
		rc, _ := receiptOf(t, res)
		hashes[rc["request_hash"].(string)] = true
	}
	got := notes()
	if len(hashes) != 2 || len(got) != 2 || got[0] != `{"n":9007199254740993}` || got[1] != `{"n":9007199254740992}` {
		t.Fatalf("hashes %v, notes %q", hashes, got)
	}
	// One key for both: the second is another request.
	key := idempotency.NewKey().String()
	if _, err := callTool(c, "notes.create", `{"n":9007199254740993}`, map[string]any{mcpgateway.MetaKey: key}); err != nil {
		t.Fatal(err)
	}
	_, err := callTool(c, "notes.create", `{"n":9007199254740992}`, map[string]any{mcpgateway.MetaKey: key})
	if err == nil || !strings.Contains(err.Error(), "request_mismatch") {
		t.Fatalf("err %v, want request_mismatch", err)
	}
	if n := len(notes()); n != 3 {
		t.Errorf("%d notes, want 3", n)
	}
}

// post sends body to url as an MCP client would, and returns the status,
// the Idempotency-Key header and error.data of a refusal.
func post(t *testing.T, url, body string, header http.Header) (int, string, mcpgateway.ErrorData) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var msg struct {
		Error *struct {
			Data mcpgateway.ErrorData `json:"data"`
		} `json:"error"`
	}
	json.Unmarshal(b, &msg)
	var d mcpgateway.ErrorData
	if msg.Error != nil {
		d = msg.Error.Data
	}
	return resp.StatusCode, resp.Header.Get(mcpgateway.HeaderKey), d
}

func TestDuplicateMembersRefused(t *testing.T) {
	url, notes := notesServer(t)
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notes.create","arguments":{"n":1,"n":2}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notes.create","arguments":{"a":{"n":1,"\u006e":2}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"notes.create","name":"notes.count","arguments":{}}}`,
	} {
		code, key, d := post(t, url, body, nil)
		if code != http.StatusBadRequest || d.Reason != "invalid_request" || key != "" {
			t.Errorf("%s: %d %q %+v", body, code, key, d)
		}
	}
	if n := len(notes()); n != 0 {
		t.Errorf("%d notes, want 0", n)
	}
}

func TestNearMissRefused(t *testing.T) {
	url, notes := notesServer(t)
	key := idempotency.NewKey().String()
	for _, name := range []string{"Idempotency_Key", "idempotencyKey", "idempotency-key", "dev.obol/Idempotency-Key"} {
		c := connect(t, url, nil)
		_, err := callTool(c, "notes.create", `{}`, map[string]any{name: key})
		if err == nil || !strings.Contains(err.Error(), "malformed_key") {
			t.Errorf("_meta %q: %v, want malformed_key", name, err)
		}
	}
	// A near-miss header is refused on every POST, initialize included.
	c, err := client.NewStreamableHttpClient(url, transport.WithHTTPHeaders(map[string]string{"X-Idempotency-Key": key}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Initialize(context.Background(), mcp.InitializeRequest{}); err == nil {
		t.Error("header X-Idempotency-Key: accepted")
	}
	if n := len(notes()); n != 0 {
		t.Errorf("%d notes, want 0", n)
	}
}

// TestNearMissVectors runs the vectors DESIGN publishes through the front:
// the verdicts of mcpgateway's front.
func TestNearMissVectors(t *testing.T) {
	url, _ := notesServer(t)
	key := idempotency.NewKey().String()
	for _, v := range nearmisstest.Vectors(t, filepath.Join("..", "docs", "DESIGN.md")) {
		if v.Name == mcpgateway.MetaTicket {
			continue // a ticket needs a held call
		}
		h := http.Header{}
		if v.Where == "header" {
			h.Add(v.Name, key)
		}
		code, _, d := post(t, url, nearmisstest.Body(v, "notes.create", key, "", mcpgateway.MetaKey, mcpgateway.MetaTicket), h)
		if refused := code == http.StatusBadRequest && d.Reason == "malformed_key"; refused != v.Refused || !refused && code != http.StatusOK {
			t.Errorf("%s %q: HTTP %d %+v, want refused %v", v.Where, v.Name, code, d, v.Refused)
		}
	}
}

func TestMintedKeyEchoed(t *testing.T) {
	url, notes := notesServer(t)
	c := connect(t, url, nil)
	res, err := callTool(c, "notes.create", `{"text":"x"}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc, key := receiptOf(t, res)
	if !strings.HasPrefix(key, "idt_") || rc["idempotency_key"] != key || rc["key_source"] != "minted" {
		t.Errorf("key %q, receipt %v", key, rc)
	}
	code, header, _ := post(t, url, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notes.create","arguments":{}}}`, nil)
	if code != http.StatusOK || !strings.HasPrefix(header, "idt_") || header == key {
		t.Errorf("raw call: HTTP %d, Idempotency-Key %q", code, header)
	}
	if n := len(notes()); n != 2 {
		t.Errorf("%d notes, want 2", n)
	}
	// A tool without a spec is mcp-go's as before: no key, no receipt.
	res, err = callTool(c, "notes.count", `{}`, nil)
	if err != nil || res.Meta != nil && res.Meta.AdditionalFields[mcpgateway.MetaReceipt] != nil {
		t.Errorf("plain tool: %v, _meta %+v", err, res.Meta)
	}
}

// A handler's rejection is definitely_rejected and replayed; the
// production policy refuses an in_process write before it runs.
func TestRejectAndPolicy(t *testing.T) {
	store, closeStore := exampleStore()
	t.Cleanup(closeStore)
	runs := 0
	s := server.NewMCPServer("notes", "1.0.0")
	s.AddTool(mcp.NewTool("notes.create"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		runs++
		return nil, mcpgateway.Reject(errors.New("notebook full"))
	})
	spec, err := effectspec.Parse([]byte(`{"tool": "notes.create", "effect": "write", "idempotency": {"binding": "in_process"}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, env := range []effectspec.Environment{effectspec.Development, effectspec.Production} {
		h, err := mcpgo.New(s, mcpgo.Config{Specs: []effectspec.Spec{spec},
			Orchestrator: &retry.Orchestrator{Store: store, Policy: effectspec.Policy{Environment: env}}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		c := connect(t, srv.URL, nil)
		key := idempotency.NewKey().String()
		for i := range 2 {
			res, err := callTool(c, "notes.create", `{}`, map[string]any{mcpgateway.MetaKey: key})
			if env == effectspec.Production {
				if err == nil || !strings.Contains(err.Error(), effectspec.ReasonPolicyDenied) {
					t.Fatalf("production: %v, want %s", err, effectspec.ReasonPolicyDenied)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			rc, _ := receiptOf(t, res)
			if !res.IsError || rc["outcome"] != "definitely_rejected" || rc["replayed"] != (i == 1) ||
				!strings.Contains(res.Content[0].(mcp.TextContent).Text, "notebook full") {
				t.Errorf("call %d: isError %v, receipt %v, content %v", i, res.IsError, rc, res.Content)
			}
		}
		// New wraps the handler it finds: serve a fresh server next.
		s = server.NewMCPServer("notes", "1.0.0")
		s.AddTool(mcp.NewTool("notes.create"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			runs++
			return mcp.NewToolResultText("saved"), nil
		})
	}
	if runs != 1 {
		t.Errorf("%d runs, want 1", runs)
	}
}

// A resume that sends only its approval ticket runs under the ticket's key,
// which its answer names (as mcpgateway's front does): the held call runs
// once, and the minted key the front would otherwise use appears nowhere.
func TestTicketOnlyResume(t *testing.T) {
	store, closeStore := exampleStore()
	t.Cleanup(closeStore)
	var runs int
	var mu sync.Mutex
	s := server.NewMCPServer("notes", "1.0.0")
	s.AddTool(mcp.NewTool("notes.create"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		runs++
		return mcp.NewToolResultText("saved"), nil
	})
	spec, err := effectspec.Parse([]byte(`{"tool": "notes.create", "effect": "write", "idempotency": {"binding": "in_process"}, "approval": "required"}`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := mcpgo.New(s, mcpgo.Config{Specs: []effectspec.Spec{spec},
		Orchestrator: &retry.Orchestrator{Store: store, Policy: effectspec.Policy{Environment: effectspec.Development}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)

	key := idempotency.NewKey().String()
	res, err := callTool(connect(t, srv.URL, nil), "notes.create", `{"text":"x"}`, map[string]any{mcpgateway.MetaKey: key})
	if err != nil {
		t.Fatal(err)
	}
	var ticket string
	if rc, _ := receiptOf(t, res); rc["outcome"] == "held" && len(res.Content) == 1 {
		text, _ := res.Content[0].(mcp.TextContent)
		ticket = strings.TrimSuffix(strings.Fields(text.Text)[4], ";")
	}
	if !idempotency.ValidTicketID(ticket) {
		t.Fatalf("not held: %+v", res)
	}
	if _, err := store.Decide(context.Background(), idempotency.DecideRequest{Ticket: ticket, Approve: true, OpID: idempotency.NewOpID()}); err != nil {
		t.Fatal(err)
	}
	resume := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"notes.create","arguments":{"text":"x"},"_meta":{"` +
		mcpgateway.MetaTicket + `":"` + ticket + `"}}}`
	for i := range 2 {
		code, header, d := post(t, srv.URL, resume, nil)
		if code != http.StatusOK || header != key {
			t.Errorf("resume %d: HTTP %d (%s), Idempotency-Key %q, want %q", i, code, d.Reason, header, key)
		}
	}
	if runs != 1 {
		t.Errorf("the held call ran %d times, want 1", runs)
	}
	// An unknown ticket is the core's refusal, under the minted key.
	_, header, _ := post(t, srv.URL, strings.Replace(resume, ticket, "apt_"+strings.Repeat("0", len(ticket)-4), 1), nil)
	if !strings.HasPrefix(header, "idt_") || header == key || runs != 1 {
		t.Errorf("unknown ticket: Idempotency-Key %q, %d runs", header, runs)
	}
}
