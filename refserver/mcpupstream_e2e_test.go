package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
	"github.com/obol-gateway/obol/internal/upstreamtest"
)

// mcpUpstreamConfig fronts three upstream MCP servers: conn_up speaks
// 2026-07-28 in JSON ({{UP}}), conn_sse the same in SSE ({{SSE}}), conn_old
// only 2025-11-25 ({{OLD}}). Every upstream tool is a create_ticket.
const mcpUpstreamConfig = `{
  "key_prefix": "mcpu:", "lease": "10s", "environment": "development",
  "workspaces": [{"id": "ws_one", "api_keys": ["` + e2eKeyOne + `"]}, {"id": "ws_two", "api_keys": ["` + e2eKeyTwo + `"]}],
  "approver_keys": [{"name": "ops-e2e", "key": "` + e2eKeyAdmin + `"}],
  "connections": [
    {"id": "conn_up", "provider": "acme", "protocol": "mcp", "base_url": "{{UP}}", "secret_env": "E2E_VENDOR_SECRET"},
    {"id": "conn_sse", "provider": "acme_sse", "protocol": "mcp", "base_url": "{{SSE}}", "secret_env": "E2E_VENDOR_SECRET"},
    {"id": "conn_old", "provider": "acme_old", "protocol": "mcp", "base_url": "{{OLD}}", "secret_env": "E2E_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_up", "upstream_tool": "create_ticket", "spec": {"tool": "tickets.create", "effect": "write",
      "route": "native", "idempotency": {"binding": "meta"}}},
    {"connection": "conn_up", "upstream_tool": "create_ticket_arg", "spec": {"tool": "tickets.create_arg", "effect": "write",
      "route": "native", "idempotency": {"binding": "body_pointer", "pointer": "/idempotency_key"}}},
    {"connection": "conn_up", "upstream_tool": "create_once", "spec": {"tool": "tickets.once", "effect": "write",
      "route": "native", "idempotency": {"binding": "unsupported"}}},
    {"connection": "conn_up", "upstream_tool": "create_strict", "spec": {"tool": "tickets.strict", "effect": "write",
      "route": "native", "idempotency": {"binding": "meta"}, "status": {"tool_error": "definitely_rejected"}}},
    {"connection": "conn_sse", "upstream_tool": "create_ticket", "spec": {"tool": "tickets.sse", "effect": "write",
      "route": "native", "idempotency": {"binding": "meta"}}},
    {"connection": "conn_old", "upstream_tool": "create_ticket", "spec": {"tool": "tickets.old", "effect": "write",
      "route": "native", "idempotency": {"binding": "meta"}}}
  ]
}`

// mcpUpstreamTools are the tools of conn_up: four create tools whose
// idempotency_key argument is required, as a vendor's MCP server
// declares it.
func mcpUpstreamTools() []upstreamtest.Tool {
	create := upstreamtest.DefaultTools()[0]
	var tools []upstreamtest.Tool
	for _, name := range []string{"create_ticket", "create_ticket_arg", "create_once", "create_strict"} {
		tl := create
		tl.Name = name
		tools = append(tools, tl)
	}
	return tools
}

// upstreamResultMeta is what conn_up adds to every result's _meta: members
// in the gateway's namespace, which must not reach the client, and one of
// its own.
var upstreamResultMeta = map[string]any{
	"dev.obol/receipt":         map[string]any{"outcome": "definitely_rejected", "forged": true},
	"dev.obol/idempotency-key": "idt_forged_by_the_upstream_000000",
	"dev.obol/forged":          "x",
	"acme/trace":               "tr_1",
}

// mcpGateway is a refserver in front of three upstream MCP servers.
type mcpGateway struct {
	*proc
	up, sse, old *upstreamtest.Server
}

func startMCPGateway(t *testing.T) *mcpGateway {
	t.Helper()
	redis := redistest.Start(t)
	g := &mcpGateway{
		up: upstreamtest.Start(t, upstreamtest.Options{Dedup: true, Token: e2eSecret, Tools: mcpUpstreamTools(),
			ResultMeta: upstreamResultMeta}),
		sse: upstreamtest.Start(t, upstreamtest.Options{Dedup: true, Token: e2eSecret, SSE: true}),
		old: upstreamtest.Start(t, upstreamtest.Options{Dedup: true, Token: e2eSecret, Legacy: true}),
	}
	cfg := strings.NewReplacer("{{UP}}", g.up.URL, "{{SSE}}", g.sse.URL, "{{OLD}}", g.old.URL).Replace(mcpUpstreamConfig)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	g.proc = startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())
	if log := g.WaitLog("upstream MCP tools imported", 1); !strings.Contains(log, "upstream MCP tools imported") {
		t.Fatalf("the upstreams' tools were not imported:\n%s", log)
	}
	return g
}

// call sends one tools/call under the client's key.
func (g *mcpGateway) call(t *testing.T, key, tool string, args any) rawAnswer {
	t.Helper()
	return mcpPost(t, g.base, e2eKeyOne, key, tool, args, nil)
}

// vendorKey is the key the gateway sent upstream for the client's key: the
// receipt's vendor_key, which is never the client's.
func (g *mcpGateway) vendorKey(t *testing.T, tool, key string) string {
	t.Helper()
	code, m := g.post(t, "GET", "/v1/receipts/"+key+"?tool="+tool, e2eKeyOne, "")
	vk, _ := m["vendor_key"].(string)
	if code != 200 || vk == "" || vk == key {
		t.Fatalf("receipt of %s: %d %v; want a vendor_key other than the client's key", key, code, m)
	}
	return vk
}

// want checks an answer's outcome and replayed flag; a result that is not
// accepted must be isError.
func want(t *testing.T, what string, a rawAnswer, outcome effectspec.Outcome, replayed bool) {
	t.Helper()
	if a.resp.Error != nil {
		t.Fatalf("%s: refused %d %s; want outcome %s", what, a.code, a.raw, outcome)
	}
	rc := a.receipt(t)
	if rc.Outcome != outcome || rc.Replayed != replayed || a.resp.Result.IsError != (outcome != effectspec.Accepted) {
		t.Fatalf("%s: %d %s; want outcome %s replayed %v", what, a.code, a.raw, outcome, replayed)
	}
}

// ticket is the structuredContent id of an accepted create_ticket result.
func ticket(t *testing.T, a rawAnswer) string {
	t.Helper()
	var sc struct{ ID string }
	if json.Unmarshal(a.resp.Result.StructuredContent, &sc) != nil || !strings.HasPrefix(sc.ID, "tkt_") {
		t.Fatalf("no ticket in %s", a.raw)
	}
	return sc.ID
}

// plan queues faults on up for the test, which fails if a fault was
// never taken: a call meant to meet it did not reach the upstream.
func plan(t *testing.T, up *upstreamtest.Server, f ...upstreamtest.Fault) {
	t.Helper()
	up.Plan(f...)
	t.Cleanup(func() {
		if n := up.ClearPlan(); n != 0 {
			t.Errorf("%d planned faults were not taken", n)
		}
	})
}

// wantCounts checks what an upstream received and executed under the key.
func wantCounts(t *testing.T, what string, up *upstreamtest.Server, key string, received, executed int) {
	t.Helper()
	if got := up.Key(key); got != (upstreamtest.Counts{Received: received, Executed: executed}) {
		t.Errorf("%s: the upstream received %d and executed %d calls under the key, want %d and %d",
			what, got.Received, got.Executed, received, executed)
	}
}

// TestMCPUpstreamEndToEnd: through the built refserver on a real Redis,
// in front of upstream MCP servers written in the test (raw HTTP, counting
// executions per key), every case of issue 35's "Done when" list.
func TestMCPUpstreamEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	g := startMCPGateway(t)
	args := map[string]any{"title": "printer on fire", "idempotency_key": "model-made-1"}

	// The answer to the first call is lost after the upstream executed it;
	// the client's retry with the same key is dispatched again with the
	// same vendor key, the upstream deduplicates, the client gets the
	// accepted result, and the upstream executed once.
	t.Run("lost answer, meta binding", func(t *testing.T) {
		k := idempotency.NewKey().String()
		plan(t, g.up, upstreamtest.HangUp)
		want(t, "first call", g.call(t, k, "tickets.create", args), effectspec.Unknown, false)
		vk := g.vendorKey(t, "tickets.create", k)
		again := g.call(t, k, "tickets.create", args)
		want(t, "retry", again, effectspec.Accepted, false)
		tkt := ticket(t, again)
		wantCounts(t, "meta", g.up, vk, 2, 1)
		replay := g.call(t, k, "tickets.create", args)
		want(t, "replay", replay, effectspec.Accepted, true)
		if ticket(t, replay) != tkt {
			t.Errorf("replay %s, want ticket %s", replay.raw, tkt)
		}
		wantCounts(t, "meta after the replay", g.up, vk, 2, 1)
		wantCounts(t, "meta, the client's key", g.up, k, 0, 0)
	})

	// The same with the key at /idempotency_key of the arguments; the
	// model regenerates its "unique" key on the retry, which retries the
	// same slot: the member at the pointer is not part of the request.
	t.Run("lost answer, body_pointer binding", func(t *testing.T) {
		k := idempotency.NewKey().String()
		plan(t, g.up, upstreamtest.HangUp)
		first := map[string]any{"title": "printer on fire", "idempotency_key": "model-made-bp-1"}
		want(t, "first call", g.call(t, k, "tickets.create_arg", first), effectspec.Unknown, false)
		vk := g.vendorKey(t, "tickets.create_arg", k)
		regenerated := map[string]any{"title": "printer on fire", "idempotency_key": "model-made-bp-2"}
		want(t, "retry", g.call(t, k, "tickets.create_arg", regenerated), effectspec.Accepted, false)
		wantCounts(t, "body_pointer", g.up, vk, 2, 1)
		for _, mk := range []string{"model-made-bp-1", "model-made-bp-2", k} {
			if n := g.up.Key(mk).Received; n != 0 {
				t.Errorf("the upstream received %q as the key %d times", mk, n)
			}
		}
	})

	// Two tenants on one upstream account send the same client key: the
	// vendor key is the scope's (docs/DESIGN.md, "The key on the vendor
	// hop"), so the upstream sees two keys and executes twice, and neither
	// tenant gets the other's ticket.
	t.Run("two workspaces, one client key", func(t *testing.T) {
		k := idempotency.NewKey().String()
		one := g.call(t, k, "tickets.create", args)
		two := mcpPost(t, g.base, e2eKeyTwo, k, "tickets.create", args, nil)
		want(t, "ws_one", one, effectspec.Accepted, false)
		want(t, "ws_two", two, effectspec.Accepted, false)
		if ticket(t, one) == ticket(t, two) {
			t.Errorf("both workspaces got ticket %s", ticket(t, one))
		}
		vkOne := g.vendorKey(t, "tickets.create", k)
		code, m := g.post(t, "GET", "/v1/receipts/"+k+"?tool=tickets.create", e2eKeyTwo, "")
		vkTwo, _ := m["vendor_key"].(string)
		if code != 200 || vkTwo == "" || vkTwo == vkOne || vkTwo == k {
			t.Fatalf("ws_two's receipt: %d %v; want a vendor_key of its own (ws_one's is %s)", code, m, vkOne)
		}
		wantCounts(t, "ws_one", g.up, vkOne, 1, 1)
		wantCounts(t, "ws_two", g.up, vkTwo, 1, 1)
		wantCounts(t, "the client's key", g.up, k, 0, 0)
	})

	// unsupported: the upstream cannot deduplicate, so the unknown call is
	// never sent again.
	t.Run("lost answer, unsupported binding", func(t *testing.T) {
		k := idempotency.NewKey().String()
		before := g.up.Total()
		plan(t, g.up, upstreamtest.HangUp)
		want(t, "first call", g.call(t, k, "tickets.once", args), effectspec.Unknown, false)
		if a := g.call(t, k, "tickets.once", args); a.reason() != "outcome_unknown" || a.resp.Error.Data.Status != 409 {
			t.Fatalf("retry: %d %s; want outcome_unknown 409", a.code, a.raw)
		}
		if got := g.up.Total(); got.Received != before.Received+1 || got.Executed != before.Executed+1 {
			t.Errorf("the upstream received %d and executed %d calls, want 1 and 1",
				got.Received-before.Received, got.Executed-before.Executed)
		}
	})

	// A 2025-11-25 upstream: its session expires between the attempts; the
	// stale session's 404 is not an outcome, the gateway initializes a new
	// session and the call goes through.
	t.Run("2025-11-25 session expires", func(t *testing.T) {
		k := idempotency.NewKey().String()
		want(t, "first call", g.call(t, k, "tickets.old", args), effectspec.Accepted, false)
		inits := len(g.old.Requests("initialize"))
		g.old.ExpireSessions()
		k2 := idempotency.NewKey().String()
		want(t, "a call after the expiry", g.call(t, k2, "tickets.old", args), effectspec.Accepted, false)
		wantCounts(t, "a call after the expiry", g.old, g.vendorKey(t, "tickets.old", k2), 1, 1)
		if n := len(g.old.Requests("initialize")); n != inits+1 {
			t.Errorf("%d initialize requests after the expiry, want 1", n-inits)
		}

		// The same between a lost answer and its retry.
		k3 := idempotency.NewKey().String()
		plan(t, g.old, upstreamtest.HangUp)
		want(t, "lost answer", g.call(t, k3, "tickets.old", args), effectspec.Unknown, false)
		g.old.ExpireSessions()
		want(t, "retry in a new session", g.call(t, k3, "tickets.old", args), effectspec.Accepted, false)
		wantCounts(t, "lost answer", g.old, g.vendorKey(t, "tickets.old", k3), 2, 1)
	})

	t.Run("SSE answer", func(t *testing.T) {
		k := idempotency.NewKey().String()
		a := g.call(t, k, "tickets.sse", args)
		want(t, "call", a, effectspec.Accepted, false)
		ticket(t, a)
		wantCounts(t, "sse", g.sse, g.vendorKey(t, "tickets.sse", k), 1, 1)
	})

	// The stream breaks after the POST was written: post_send, unknown;
	// the retry is deduplicated by the upstream.
	t.Run("stream cut mid-answer", func(t *testing.T) {
		k := idempotency.NewKey().String()
		plan(t, g.sse, upstreamtest.CutStream)
		want(t, "first call", g.call(t, k, "tickets.sse", args), effectspec.Unknown, false)
		want(t, "retry", g.call(t, k, "tickets.sse", args), effectspec.Accepted, false)
		wantCounts(t, "cut", g.sse, g.vendorKey(t, "tickets.sse", k), 2, 1)
	})

	// A server-to-client request on the call's stream is refused; the
	// call's result still arrives.
	t.Run("elicitation on the stream", func(t *testing.T) {
		k := idempotency.NewKey().String()
		plan(t, g.sse, upstreamtest.Elicit)
		want(t, "call", g.call(t, k, "tickets.sse", args), effectspec.Accepted, false)
		wantCounts(t, "elicit", g.sse, g.vendorKey(t, "tickets.sse", k), 1, 1)
		if log := g.WaitLog("elicitation/create", 1); !strings.Contains(log, "elicitation/create") {
			t.Errorf("the log does not name the refused elicitation/create")
		}
		refused := false
		for _, q := range g.sse.Requests("") {
			refused = refused || q.Method == "" && strings.Contains(string(q.Body), `"id":"elicit-1"`) && strings.Contains(string(q.Body), `"error"`)
		}
		if !refused {
			t.Errorf("the upstream got no error answer to its elicitation/create")
		}
	})

	// -32602 is the tool's definitely_rejected: replayed, never sent again.
	t.Run("invalid params", func(t *testing.T) {
		k := idempotency.NewKey().String()
		plan(t, g.up, upstreamtest.InvalidParams)
		want(t, "call", g.call(t, k, "tickets.create", args), effectspec.DefinitelyRejected, false)
		want(t, "again", g.call(t, k, "tickets.create", args), effectspec.DefinitelyRejected, true)
		wantCounts(t, "-32602", g.up, g.vendorKey(t, "tickets.create", k), 1, 0)
	})

	// isError true is what the spec's tool_error says: unknown by default,
	// definitely_rejected when declared.
	t.Run("isError", func(t *testing.T) {
		k := idempotency.NewKey().String()
		plan(t, g.up, upstreamtest.ToolError)
		want(t, "tool_error unset", g.call(t, k, "tickets.create", args), effectspec.Unknown, false)
		k2 := idempotency.NewKey().String()
		plan(t, g.up, upstreamtest.ToolError)
		want(t, "tool_error definitely_rejected", g.call(t, k2, "tickets.strict", args), effectspec.DefinitelyRejected, false)
		want(t, "its replay", g.call(t, k2, "tickets.strict", args), effectspec.DefinitelyRejected, true)
		wantCounts(t, "isError declared", g.up, g.vendorKey(t, "tickets.strict", k2), 1, 0)
	})

	// 503 with a complete body earns the one immediate second attempt
	// (meta binding): one client call, accepted. Not with unsupported.
	t.Run("503 then success", func(t *testing.T) {
		k := idempotency.NewKey().String()
		plan(t, g.up, upstreamtest.Busy)
		a := g.call(t, k, "tickets.create", args)
		want(t, "call", a, effectspec.Accepted, false)
		if rc := a.receipt(t); rc.AttemptCount != 2 {
			t.Errorf("attempt_count %d, want 2 (the 503, then the result)", rc.AttemptCount)
		}
		wantCounts(t, "503", g.up, g.vendorKey(t, "tickets.create", k), 2, 1)

		// unsupported: the upstream could not deduplicate a second attempt,
		// so the 503 is the call's unknown outcome and nothing is sent again.
		k2 := idempotency.NewKey().String()
		before := g.up.Total()
		plan(t, g.up, upstreamtest.Busy)
		want(t, "unsupported", g.call(t, k2, "tickets.once", args), effectspec.Unknown, false)
		if a := g.call(t, k2, "tickets.once", args); a.reason() != "outcome_unknown" {
			t.Errorf("unsupported retry: %d %s; want outcome_unknown", a.code, a.raw)
		}
		if got := g.up.Total(); got.Received != before.Received+1 || got.Executed != before.Executed {
			t.Errorf("unsupported: the upstream received %d and executed %d calls, want 1 and 0",
				got.Received-before.Received, got.Executed-before.Executed)
		}
	})

	// An Obol upstream's refusal that says the call did not run is not an
	// outcome: the cycle's second attempt goes at once; when neither ran,
	// the client is told vendor_unreachable and its retry goes through.
	t.Run("not-run refusal", func(t *testing.T) {
		k := idempotency.NewKey().String()
		plan(t, g.up, upstreamtest.QuotaExceeded)
		want(t, "one refusal", g.call(t, k, "tickets.create_arg", args), effectspec.Accepted, false)
		wantCounts(t, "one refusal", g.up, g.vendorKey(t, "tickets.create_arg", k), 2, 1)

		k2 := idempotency.NewKey().String()
		plan(t, g.up, upstreamtest.QuotaExceeded, upstreamtest.QuotaExceeded)
		if a := g.call(t, k2, "tickets.create_arg", args); a.reason() != "vendor_unreachable" || a.safe(t) != "true" {
			t.Fatalf("two refusals: %d %s; want vendor_unreachable, safe_new_key true", a.code, a.raw)
		}
		want(t, "retry", g.call(t, k2, "tickets.create_arg", args), effectspec.Accepted, false)
		wantCounts(t, "two refusals", g.up, g.vendorKey(t, "tickets.create_arg", k2), 3, 1)
	})

	// The upstream gets only what the gateway builds: never the client's
	// key, API key or _meta (its dev.obol/* members or any other), and its
	// result's dev.obol/* members never reach the client.
	t.Run("what crosses the hop", func(t *testing.T) {
		k := idempotency.NewKey().String()
		c := refservertest.Client{Base: g.base, APIKey: e2eKeyOne, HTTP: &http.Client{Timeout: time.Minute}}
		params := map[string]any{"name": "tickets.create", "arguments": args, "_meta": map[string]any{
			metaKey: k, "acme/client": "from the client", "progressToken": "p1"}}
		r := c.RPC(context.Background(), "tools/call", params, func(h http.Header) { h.Set(headerKey, k) })
		a := rawAnswer{code: r.HTTPStatus, raw: string(r.Body), resp: r}
		if r.Err != nil {
			t.Fatalf("call: %v", r.Err)
		}
		want(t, "call", a, effectspec.Accepted, false)
		vk := g.vendorKey(t, "tickets.create", k)

		for _, q := range g.up.Requests("") {
			body := string(q.Body)
			for _, bad := range []string{k, e2eKeyOne, "acme/client", "from the client", "progressToken"} {
				if strings.Contains(body, bad) {
					t.Errorf("a %s request to the upstream carries %q: %s", q.Method, bad, body)
				}
			}
			for name, vs := range q.Header {
				for _, v := range vs {
					if strings.Contains(v, k) || strings.Contains(v, e2eKeyOne) {
						t.Errorf("a %s request to the upstream carries the client's key or API key in %s", q.Method, name)
					}
				}
			}
			if q.Header.Get("Authorization") != "Bearer "+e2eSecret {
				t.Errorf("a %s request to the upstream without the connection's secret", q.Method)
			}
		}
		calls := g.up.Requests("tools/call")
		var last struct {
			Params struct {
				Meta map[string]json.RawMessage `json:"_meta"`
			} `json:"params"`
		}
		json.Unmarshal(calls[len(calls)-1].Body, &last)
		var sent string
		json.Unmarshal(last.Params.Meta[upstreamtest.MetaKey], &sent)
		if sent != vk {
			t.Errorf("the upstream's _meta[%s] is %q, want the vendor key %s", upstreamtest.MetaKey, sent, vk)
		}
		for name := range last.Params.Meta {
			if name != upstreamtest.MetaKey && !strings.HasPrefix(name, "io.modelcontextprotocol/") {
				t.Errorf("the upstream's _meta carries %q, which the gateway does not build", name)
			}
		}

		meta := a.resp.Result.RawMeta
		if _, ok := meta["dev.obol/forged"]; ok {
			t.Errorf("the upstream's dev.obol/forged reached the client: %s", a.raw)
		}
		if rc := a.receipt(t); rc.Outcome != effectspec.Accepted || strings.Contains(string(meta[metaReceipt]), "forged") {
			t.Errorf("the client's receipt is not the gateway's: %s", meta[metaReceipt])
		}
		if a.resp.Result.Meta.Key != k {
			t.Errorf("_meta[%s] %q, want the client's key %s", metaKey, a.resp.Result.Meta.Key, k)
		}
		if string(meta["acme/trace"]) != `"tr_1"` {
			t.Errorf("the upstream's own acme/trace did not reach the client: %s", a.raw)
		}
	})

	// The MCP Go SDK's client calls an upstream's tool through refserver.
	t.Run("go-sdk client", func(t *testing.T) {
		k := idempotency.NewKey().String()
		s := g.session(t, e2eKeyOne, k)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		tools, err := s.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var arg *mcp.Tool
		for _, tl := range tools.Tools {
			if tl.Name == "tickets.create_arg" {
				arg = tl
			}
		}
		if arg == nil {
			t.Fatalf("tools/list lacks tickets.create_arg: %d tools", len(tools.Tools))
		}
		if schema, _ := json.Marshal(arg.InputSchema); strings.Contains(string(schema), "idempotency_key") ||
			!strings.Contains(string(schema), "title") {
			t.Errorf("tickets.create_arg's schema %s: want the upstream's without idempotency_key", schema)
		}
		a := call(t, s, "tickets.create", args, "")
		a.wantOutcome(t, "accepted", false)
		if !strings.HasPrefix(a.text, "create_ticket: tkt_") {
			t.Errorf("text %q, want the upstream's", a.text)
		}
		call(t, s, "tickets.create", args, "").wantOutcome(t, "accepted", true)
		wantCounts(t, "go-sdk", g.up, g.vendorKey(t, "tickets.create", k), 1, 1)
	})

	t.Run("TypeScript client", func(t *testing.T) { tsClientCall(t, g) })
}

// tsClientCall runs examples/mcpserver/tsclient/upstream.mjs, the official
// MCP TypeScript client, against g's tickets.create. It needs node and the
// client's package: installed in that directory, or in npm's cache (npm
// runs offline here, so that a test never waits on the registry; set
// OBOL_TSCLIENT_ONLINE=1 to let it fetch the package, as CI does when
// node is present: then nothing skips it).
func tsClientCall(t *testing.T, g *mcpGateway) {
	online := os.Getenv("OBOL_TSCLIENT_ONLINE") == "1"
	node, err := exec.LookPath("node")
	if err != nil {
		if online {
			t.Fatalf("OBOL_TSCLIENT_ONLINE=1 and no node on PATH: %v", err)
		}
		t.Skip("SKIPPED: the TypeScript client is NOT tested: no node on PATH")
	}
	src, err := filepath.Abs("../examples/mcpserver/tsclient")
	if err != nil {
		t.Fatal(err)
	}
	dir := src
	if _, err := os.Stat(filepath.Join(src, "node_modules", "@modelcontextprotocol", "sdk")); err != nil {
		dir = t.TempDir()
		for _, f := range []string{"package.json", "upstream.mjs"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		install := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "--ignore-scripts")
		install.Dir = dir
		install.Env = os.Environ()
		if !online {
			install.Env = append(install.Env, "npm_config_offline=true")
		}
		if out, err := install.CombinedOutput(); err != nil {
			if strings.Contains(string(out), "ENOTCACHED") {
				t.Skip("SKIPPED: the TypeScript client is NOT tested: its package is not in npm's cache " +
					"(OBOL_TSCLIENT_ONLINE=1 fetches it)")
			}
			t.Fatalf("npm install: %v\n%s", err, out)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "upstream.mjs", g.base+"/mcp", e2eKeyOne, "tickets.create",
		`{"title":"printer on fire","idempotency_key":"model-made-ts"}`)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "FAIL") {
		t.Fatalf("node upstream.mjs: %v\n%s", err, out)
	}
	var key string
	for _, line := range strings.Split(string(out), "\n") {
		if k, ok := strings.CutPrefix(line, "KEY="); ok {
			key = k
		}
	}
	if !strings.HasPrefix(key, "idt_") {
		t.Fatalf("node upstream.mjs printed no key:\n%s", out)
	}
	wantCounts(t, "TypeScript client", g.up, g.vendorKey(t, "tickets.create", key), 1, 1)
}
