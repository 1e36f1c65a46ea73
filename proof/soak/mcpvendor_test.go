package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// mcpClient speaks raw JSON-RPC to a stand-in upstream, as a gateway's
// MCP target would.
type mcpClient struct {
	t       *testing.T
	url     string
	session string
	id      int
}

// mcpAnswer is one answer: the HTTP status and header, the JSON-RPC
// response to our id (nil if none was read), whether it came as SSE, what
// else came on the stream, and the error that ended the read.
type mcpAnswer struct {
	status  int
	header  http.Header
	resp    *rpcMessage
	sse     bool
	others  []rpcMessage
	readErr error
}

// post sends one request: with modern, the headers and _meta 2026-07-28
// requires; else in the client's session, if any.
func (c *mcpClient) post(method string, params map[string]any, modern bool) mcpAnswer {
	c.t.Helper()
	c.id++
	if params == nil {
		params = map[string]any{}
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer sk_soak_mcp_test")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set("Content-Type", "application/json")
	if modern {
		meta, _ := params["_meta"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
		}
		meta["io.modelcontextprotocol/protocolVersion"] = mcpModern
		params["_meta"] = meta
		h.Set("Mcp-Protocol-Version", mcpModern)
		h.Set("Mcp-Method", method)
		if name, ok := params["name"].(string); ok {
			h.Set("Mcp-Name", name)
		}
	} else if c.session != "" {
		h.Set("Mcp-Protocol-Version", mcpLegacy)
		h.Set("Mcp-Session-Id", c.session)
	}
	return c.send(h, map[string]any{"jsonrpc": "2.0", "id": c.id, "method": method, "params": params})
}

func (c *mcpClient) send(h http.Header, msg any) mcpAnswer {
	c.t.Helper()
	body, _ := json.Marshal(msg)
	req, _ := http.NewRequestWithContext(context.Background(), "POST", c.url, bytes.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return mcpAnswer{readErr: err}
	}
	defer resp.Body.Close()
	a := mcpAnswer{status: resp.StatusCode, header: resp.Header}
	want := fmt.Sprint(c.id)
	take := func(data []byte) {
		var m rpcMessage
		if json.Unmarshal(data, &m) != nil {
			a.readErr = fmt.Errorf("not JSON-RPC: %q", data)
			return
		}
		if m.Method == "" && string(m.ID) == want {
			a.resp = &m
			return
		}
		a.others = append(a.others, m)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, err := io.ReadAll(resp.Body)
		if a.readErr = err; err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
			take(raw)
		}
		return a
	}
	a.sse = true
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && d != "" {
			take([]byte(d))
		}
	}
	if err := sc.Err(); err != nil {
		a.readErr = err
	}
	return a
}

// errCode is the JSON-RPC error code of a, 0 if none.
func (a mcpAnswer) errCode() int {
	if a.resp == nil || a.resp.Error == nil {
		return 0
	}
	var e struct{ Code int }
	_ = json.Unmarshal(a.resp.Error, &e)
	return e.Code
}

func callParams(tool string, s *slot, metaKey, argKey string) map[string]any {
	args := map[string]any{}
	_ = json.Unmarshal(s.args, &args)
	if argKey != "" {
		args["idempotency_key"] = argKey
	}
	p := map[string]any{"name": tool, "arguments": args}
	if metaKey != "" {
		p["_meta"] = map[string]any{mcpMetaKey: metaKey}
	}
	return p
}

func newTestVendors(t *testing.T) (*vendors, *world) {
	t.Helper()
	v, err := newVendors(time.Second, func(string, string, ...any) {})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.close)
	return v, &world{vend: v, slots: map[string]*slot{}, obs: map[string]*observation{}, history: map[string][]event{}, c: newCounts()}
}

// TestMCPStatelessUpstream: the 2026-07-28 stand-in answers server/discover
// and lists its tools in two pages; refuses a call without the version's
// headers before the tool (not seen, no effect); runs the meta tool once
// per key and replays its first result, planted dev.obol/ member included;
// runs the ticket tool on arguments.idempotency_key.
func TestMCPStatelessUpstream(t *testing.T) {
	v, w := newTestVendors(t)
	c := &mcpClient{t: t, url: v.URL + "/mcp/stateless"}
	ten := tenant{id: "ws_a", marker: "mk_a"}

	d := c.post("server/discover", nil, true)
	var disc struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if d.resp == nil || json.Unmarshal(d.resp.Result, &disc) != nil || len(disc.SupportedVersions) != 1 || disc.SupportedVersions[0] != mcpModern {
		t.Fatalf("server/discover: %+v", d)
	}
	var names []string
	cursor := ""
	for range 3 {
		a := c.post("tools/list", map[string]any{"cursor": cursor}, true)
		var page struct {
			Tools []struct {
				Name        string         `json:"name"`
				InputSchema map[string]any `json:"inputSchema"`
			} `json:"tools"`
			NextCursor string `json:"nextCursor"`
		}
		if a.resp == nil || json.Unmarshal(a.resp.Result, &page) != nil {
			t.Fatalf("tools/list: %+v", a)
		}
		for _, tl := range page.Tools {
			names = append(names, tl.Name)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if fmt.Sprint(names) != "[charge create_ticket post_note]" {
		t.Errorf("tools listed %v", names)
	}

	charge := w.slotFor(ten, toolInfo{name: "mcp.charge", vendorKB: true}, "idt_00000000000000000000000000000001")
	// No version headers: refused before the tool.
	bare := c.send(http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer sk_soak_x"}},
		map[string]any{"jsonrpc": "2.0", "id": 99, "method": "tools/call", "params": callParams("charge", charge, "idv_1", "")})
	if bare.status != http.StatusBadRequest || v.seenCount(charge.id) != 0 || v.performed(charge.id) {
		t.Fatalf("a call without the 2026-07-28 headers: HTTP %d, seen %d", bare.status, v.seenCount(charge.id))
	}
	var results [][]byte
	for range 2 {
		a := c.post("tools/call", callParams("charge", charge, "idv_1", ""), true)
		if a.resp == nil || a.resp.Result == nil || a.readErr != nil {
			t.Fatalf("tools/call charge: %+v", a)
		}
		results = append(results, a.resp.Result)
	}
	if !bytes.Equal(results[0], results[1]) || !strings.Contains(string(results[0]), mcpPlanted) || !strings.Contains(string(results[0]), `"resultType":"complete"`) {
		t.Errorf("the retry is not the first result replayed, or lacks the planted member:\n%s\n%s", results[0], results[1])
	}
	tr := v.truth()[charge.id]
	if tr.seen != 2 || tr.effects != 1 || fmt.Sprint(tr.vendorKeys) != "[idv_1]" || tr.keyExecutions["mcp|idv_1"] != 1 {
		t.Errorf("charge truth %+v; want seen 2, one effect under idv_1", tr)
	}

	ticket := w.slotFor(ten, toolInfo{name: "mcp.ticket", vendorKB: true}, "idt_00000000000000000000000000000002")
	c.post("tools/call", callParams("create_ticket", ticket, "", "idv_2"), true)
	c.post("tools/call", callParams("create_ticket", ticket, "", "idv_2"), true)
	if tr := v.truth()[ticket.id]; tr.effects != 1 || fmt.Sprint(tr.vendorKeys) != "[idv_2]" {
		t.Errorf("ticket truth %+v; want one effect under idv_2", tr)
	}
	if bad := w.checkVendorTruth(); len(bad) != 0 {
		t.Errorf("violations for deduplicated retries: %v", bad)
	}
}

// TestMCPSessionsUpstream: the 2025-11-25 stand-in refuses server/discover
// as an unknown method, opens a session at initialize, refuses a call
// without one, answers 404 once its sessions are lost (neither counted as
// a request that reached the tool), and keeps deduplicating across
// sessions.
func TestMCPSessionsUpstream(t *testing.T) {
	v, w := newTestVendors(t)
	c := &mcpClient{t: t, url: v.URL + "/mcp/sessions"}
	ten := tenant{id: "ws_b", marker: "mk_b"}
	s := w.slotFor(ten, toolInfo{name: "mcps.charge", vendorKB: true}, "idt_00000000000000000000000000000003")

	if a := c.post("server/discover", nil, true); a.errCode() != -32601 {
		t.Fatalf("server/discover on the sessions upstream: %+v", a)
	}
	if a := c.post("tools/call", callParams("charge", s, "idv_3", ""), false); a.status != http.StatusBadRequest {
		t.Fatalf("a call without a session: HTTP %d", a.status)
	}
	initialize := func() {
		t.Helper()
		c.session = ""
		a := c.post("initialize", map[string]any{"protocolVersion": mcpLegacy, "capabilities": map[string]any{}, "clientInfo": map[string]string{"name": "t", "version": "1"}}, false)
		if c.session = a.header.Get("Mcp-Session-Id"); c.session == "" || a.resp == nil {
			t.Fatalf("initialize: %+v", a)
		}
	}
	initialize()
	for range 9 { // enough for an SSE answer that asks the client first
		if a := c.post("tools/call", callParams("charge", s, "idv_3", ""), false); a.resp == nil || a.readErr != nil {
			t.Fatalf("tools/call in a session: %+v", a)
		}
	}
	if n := v.expireSessions("mcp_sessions"); n != 1 {
		t.Errorf("%d sessions expired, want 1", n)
	}
	if a := c.post("tools/call", callParams("charge", s, "idv_3", ""), false); a.status != http.StatusNotFound {
		t.Fatalf("a call in a lost session: HTTP %d, want 404", a.status)
	}
	initialize()
	if a := c.post("tools/call", callParams("charge", s, "idv_3", ""), false); a.resp == nil {
		t.Fatalf("tools/call in a new session: %+v", a)
	}
	tr := v.truth()[s.id]
	if tr.seen != 10 || tr.effects != 1 {
		t.Errorf("truth %+v; want 10 requests at the tool, one effect", tr)
	}
	f := v.mcpFigures()
	if f["mcp_sessions_created"] != 2 || f["mcp_unknown_session_404"] != 1 || f["mcp_sse_answers"] == 0 || f["mcp_server_requests_sent"] == 0 {
		t.Errorf("figures %v", f)
	}
}

// TestMCPUpstreamModes: 503 with Retry-After before the tool runs; an
// answer hung up after it ran; an SSE answer cut mid-event after it ran;
// a tool error for a refused amount, with nothing done.
func TestMCPUpstreamModes(t *testing.T) {
	v, w := newTestVendors(t)
	c := &mcpClient{t: t, url: v.URL + "/mcp/stateless"}
	ten := tenant{id: "ws_a", marker: "mk_a"}
	mk := func(n int) *slot {
		for {
			s := w.slotFor(ten, toolInfo{name: "mcp.charge", vendorKB: true}, fmt.Sprintf("idt_%032d", n))
			var b callBody
			_ = json.Unmarshal(s.args, &b)
			if !toolRefusesAmount(b.Amount) {
				return s
			}
			n += 1000
		}
	}

	v.setMode("mcp", mode503)
	s := mk(1)
	a := c.post("tools/call", callParams("charge", s, "idv_m1", ""), true)
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" || a.errCode() != -32000 || v.performed(s.id) || v.seenCount(s.id) != 1 {
		t.Errorf("503: %+v, performed %v", a, v.performed(s.id))
	}

	v.setMode("mcp", modeHangup)
	s = mk(2)
	if a := c.post("tools/call", callParams("charge", s, "idv_m2", ""), true); a.readErr == nil || !v.performed(s.id) {
		t.Errorf("hangup: %+v, performed %v", a, v.performed(s.id))
	}

	v.setMode("mcp", modeSSECut)
	s = mk(3)
	a = c.post("tools/call", callParams("charge", s, "idv_m3", ""), true)
	if !a.sse || a.resp != nil || a.readErr == nil || !v.performed(s.id) {
		t.Errorf("sse_cut: %+v, performed %v", a, v.performed(s.id))
	}
	v.setMode("mcp", modeNormal)
	a = c.post("tools/call", callParams("charge", s, "idv_m3", ""), true)
	if a.resp == nil || a.resp.Result == nil || v.truth()[s.id].effects != 1 {
		t.Errorf("the retry after a cut stream: %+v, truth %+v", a, v.truth()[s.id])
	}

	var refused *slot
	for n := 4; refused == nil; n++ {
		s := w.slotFor(ten, toolInfo{name: "mcp.charge", vendorKB: true}, fmt.Sprintf("idt_%032d", n))
		var b callBody
		_ = json.Unmarshal(s.args, &b)
		if toolRefusesAmount(b.Amount) {
			refused = s
		}
	}
	a = c.post("tools/call", callParams("charge", refused, "idv_m4", ""), true)
	var res struct {
		IsError bool `json:"isError"`
	}
	if a.resp == nil || json.Unmarshal(a.resp.Result, &res) != nil || !res.IsError || v.performed(refused.id) {
		t.Errorf("tool error: %+v, performed %v", a, v.performed(refused.id))
	}
}

// TestVendorTruthMCP: the checks see, at an upstream MCP server, the
// client's _meta passed on, the client's key as the meta binding's key, two
// vendor keys of one slot, one vendor key run twice, a second run of an
// unsupported tool, and a reply carrying the upstream's own dev.obol/
// member.
func TestVendorTruthMCP(t *testing.T) {
	v, w := newTestVendors(t)
	c := &mcpClient{t: t, url: v.URL + "/mcp/stateless"}
	ten := tenant{id: "ws_a", marker: "mk_a"}
	w.out = &logger{w: io.Discard, start: time.Now()}

	passed := w.slotFor(ten, toolInfo{name: "mcp.ticket", vendorKB: true}, "idt_00000000000000000000000000000011")
	p := callParams("create_ticket", passed, "", "idv_11")
	p["_meta"] = map[string]any{mcpMetaKey: passed.key}
	c.post("tools/call", p, true)
	clientKey := w.slotFor(ten, toolInfo{name: "mcp.charge", vendorKB: true}, "idt_00000000000000000000000000000012")
	c.post("tools/call", callParams("charge", clientKey, clientKey.key, ""), true)
	twoKeys := w.slotFor(ten, toolInfo{name: "mcp.charge", vendorKB: true}, "idt_00000000000000000000000000000013")
	c.post("tools/call", callParams("charge", twoKeys, "idv_13a", ""), true)
	c.post("tools/call", callParams("charge", twoKeys, "idv_13b", ""), true)
	note := w.slotFor(ten, toolInfo{name: "mcp.note"}, "idt_00000000000000000000000000000014")
	c.post("tools/call", callParams("post_note", note, "", ""), true)
	c.post("tools/call", callParams("post_note", note, "", ""), true)
	once := w.slotFor(ten, toolInfo{name: "mcp.note"}, "idt_00000000000000000000000000000015")
	c.post("tools/call", callParams("post_note", once, "", ""), true)
	// One vendor key run twice, as by an upstream whose deduplication
	// missed it: counted per key even under one key.
	sameKey := w.slotFor(ten, toolInfo{name: "mcp.charge", vendorKB: true}, "idt_00000000000000000000000000000016")
	c.post("tools/call", callParams("charge", sameKey, "idv_16", ""), true)
	v.mu.Lock()
	v.keyExec["mcp|idv_16"]++
	v.mu.Unlock()

	bad := w.checkVendorTruth()
	for _, want := range []struct{ inv, slot string }{
		{"client_key_at_vendor", passed.id}, {"client_key_at_vendor", clientKey.id},
		{"duplicates", twoKeys.id}, {"duplicates", note.id}, {"duplicates", sameKey.id},
	} {
		if _, ok := bad[want.inv][want.slot]; !ok {
			t.Errorf("%s not found for %s; found %v", want.inv, want.slot, bad)
		}
	}
	for inv, m := range bad {
		if d, ok := m[once.id]; ok {
			t.Errorf("%s reported for a note run once: %s", inv, d)
		}
	}

	a := c.post("tools/call", callParams("post_note", once, "", ""), true)
	body, _ := json.Marshal(a.resp)
	w.checkReply(once, reply{body: body}, time.Now(), 0, false)
	if w.c.violated["upstream_obol_meta_passed_on"] != 1 {
		t.Errorf("a reply with the upstream's dev.obol/ member: violations %v", w.c.violated)
	}
}

// TestMCPUpstreamsServeTheGoSDKClient: the go-sdk's own client talks to
// both stand-ins as to real servers (discover on the stateless one, the
// fallback to initialize and a session on the other), lists the three
// tools across the pages and calls the meta tool, whose retry with the same
// key the upstream deduplicates.
func TestMCPUpstreamsServeTheGoSDKClient(t *testing.T) {
	v, w := newTestVendors(t)
	for _, up := range []struct{ path, route, version string }{
		{"/mcp/stateless", "mcp", mcpModern}, {"/mcp/sessions", "mcp_sessions", mcpLegacy},
	} {
		t.Run(up.route, func(t *testing.T) {
			ctx := context.Background()
			hc := &http.Client{Transport: headerTransport{"Authorization": "Bearer sk_soak_sdk"}}
			cl := mcp.NewClient(&mcp.Implementation{Name: "soak-test", Version: "1.0.0"}, nil)
			cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: v.URL + up.path, HTTPClient: hc, MaxRetries: -1}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if got := cs.InitializeResult().ProtocolVersion; got != up.version {
				t.Errorf("negotiated %q, want %q", got, up.version)
			}
			var names []string
			for tl, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, tl.Name)
			}
			if fmt.Sprint(names) != "[charge create_ticket post_note]" {
				t.Errorf("tools %v", names)
			}
			s := w.slotFor(tenant{id: "ws_a", marker: "mk_a"}, toolInfo{name: up.route + ".charge", vendorKB: true}, "idt_00000000000000000000000000000021")
			var args map[string]any
			_ = json.Unmarshal(s.args, &args)
			for range 3 {
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge", Arguments: args, Meta: mcp.Meta{mcpMetaKey: "idv_21" + up.route}})
				if err != nil || res.IsError {
					t.Fatalf("CallTool: %v %+v", err, res)
				}
			}
			if tr := v.truth()[s.id]; tr.seen != 3 || tr.effects != 1 {
				t.Errorf("truth %+v; want 3 requests, one effect", tr)
			}
		})
	}
	if f := v.mcpFigures(); f["mcp_protocol_refusals"] != 0 || f["mcp_discovers"] != 1 || f["mcp_sessions_created"] != 1 {
		t.Errorf("figures %v", f)
	}
	if bad, _ := v.counters(); bad != 0 {
		t.Errorf("%d requests without the secret", bad)
	}
}

// headerTransport sets its headers on every request.
type headerTransport map[string]string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return http.DefaultTransport.RoundTrip(r)
}
