package upstreamtest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The MCP Go SDK's client speaks to the server in every mode: discovery
// (2026-07-28) or initialize and a session (2025-11-25), JSON or SSE; a
// call's keys are counted.
func TestSDKClient(t *testing.T) {
	for _, o := range []Options{{}, {SSE: true}, {Legacy: true}, {Legacy: true, SSE: true}} {
		s := Start(t, o)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.URL, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatalf("%+v: connect: %v", o, err)
		}
		tools, err := cs.ListTools(ctx, nil)
		if err != nil || len(tools.Tools) != 2 || tools.Tools[0].Name != "create_ticket" {
			t.Fatalf("%+v: tools %+v %v", o, tools, err)
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_ticket",
			Arguments: map[string]any{"title": "a", ArgKey: "arg-1"}, Meta: mcp.Meta{MetaKey: "meta-1"}})
		if err != nil || res.IsError || res.StructuredContent.(map[string]any)["id"] != "tkt_1" {
			t.Fatalf("%+v: call %+v %v", o, res, err)
		}
		if s.Key("meta-1") != (Counts{1, 1}) || s.Key("arg-1") != (Counts{1, 1}) || s.Total() != (Counts{1, 1}) ||
			strings.Join(s.Keys(), ",") != "meta-1,arg-1" {
			t.Errorf("%+v: counts meta %+v arg %+v total %+v keys %v", o, s.Key("meta-1"), s.Key("arg-1"), s.Total(), s.Keys())
		}
		init, disc := len(s.Requests("initialize")), len(s.Requests("server/discover"))
		if o.Legacy && (init != 1 || s.Requests("tools/call")[0].Header.Get(sessionHeader) == "") ||
			!o.Legacy && (init != 0 || disc != 1) {
			t.Errorf("%+v: %d initialize, %d server/discover", o, init, disc)
		}
		cs.Close()
		cancel()
	}
}

// reply is one answer read raw.
type reply struct {
	status int
	header http.Header
	body   string
	err    error // reading the body failed
	msg    message
}

// post sends body to s with the headers a 2026-07-28 client sends (or a
// 2025-11-25 one's in session sid), edited by edit.
func post(t *testing.T, s *Server, sid, body string, edit func(http.Header)) reply {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	var m message
	json.Unmarshal([]byte(body), &m)
	var p callParams
	json.Unmarshal(m.Params, &p)
	if s.o.Legacy {
		if sid != "" {
			req.Header.Set(sessionHeader, sid)
			req.Header.Set("Mcp-Protocol-Version", LegacyVersion)
		}
	} else {
		req.Header.Set("Mcp-Protocol-Version", Version)
		req.Header.Set("Mcp-Method", m.Method)
		if p.Name != "" {
			req.Header.Set("Mcp-Name", p.Name)
		}
	}
	if edit != nil {
		edit(req.Header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
	data := b
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data = nil
		sc := bufio.NewScanner(strings.NewReader(string(b)))
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok && strings.Contains(d, `"id"`) && !strings.Contains(d, `"method"`) {
				data = []byte(d)
			}
		}
	}
	json.Unmarshal(data, &r.msg)
	return r
}

// callBody is a tools/call of create_ticket with the 2026-07-28 _meta and
// both keys.
func callBody(metaKey, argKey string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"create_ticket",` +
		`"arguments":{"title":"t","idempotency_key":"` + argKey + `"},"_meta":{"` + MetaKey + `":"` + metaKey + `",` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
}

func (r reply) code() int {
	var e struct{ Code int }
	json.Unmarshal(r.msg.Error, &e)
	return e.Code
}

func (r reply) ticket() string {
	var res struct {
		IsError           bool
		StructuredContent struct{ ID string }
	}
	json.Unmarshal(r.msg.Result, &res)
	if res.IsError {
		return "isError"
	}
	return res.StructuredContent.ID
}

// Every fault does what its doc says, and Dedup replays a key's first
// execution.
func TestFaults(t *testing.T) {
	s := Start(t, Options{Dedup: true, ResultMeta: map[string]any{"dev.obol/receipt": "upstream's", "acme/trace": "tr_1"}})
	s.Plan(HangUp, CutStream, Busy, InvalidParams, ToolError, QuotaExceeded, Elicit)
	if r := post(t, s, "", callBody("k1", "a1"), nil); r.err == nil {
		t.Errorf("HangUp: answered %d %s", r.status, r.body)
	}
	if r := post(t, s, "", callBody("k2", "a2"), nil); r.err == nil || r.status != 200 {
		t.Errorf("CutStream: %d %s %v, want a 200 whose body breaks", r.status, r.body, r.err)
	}
	if r := post(t, s, "", callBody("k3", "a3"), nil); r.status != 503 || r.header.Get("Retry-After") != "1" || r.code() != codeServer {
		t.Errorf("Busy: %d %v %s", r.status, r.header, r.body)
	}
	if r := post(t, s, "", callBody("k3", "a3"), nil); r.status != 200 || r.code() != codeInvalidParams {
		t.Errorf("InvalidParams: %d %s", r.status, r.body)
	}
	if r := post(t, s, "", callBody("k3", "a3"), nil); r.status != 200 || r.ticket() != "isError" {
		t.Errorf("ToolError: %d %s", r.status, r.body)
	}
	if r := post(t, s, "", callBody("k3", "a3"), nil); r.status != 429 || r.code() != codeServer || !strings.Contains(r.body, `"reason":"quota_exceeded"`) {
		t.Errorf("QuotaExceeded: %d %s", r.status, r.body)
	}
	if r := post(t, s, "", callBody("k4", "a4"), nil); r.ticket() != "tkt_3" || !strings.Contains(r.body, `"method":"elicitation/create"`) {
		t.Errorf("Elicit: %d %s", r.status, r.body)
	}
	s.Plan(HangUp, Busy)
	if n := s.ClearPlan(); n != 2 || s.Planned() != 0 {
		t.Errorf("ClearPlan: %d, then %d planned; want 2, then 0", n, s.Planned())
	}
	if s.Planned() != 0 || s.Key("k3") != (Counts{4, 0}) || s.Key("k1") != (Counts{1, 1}) || s.Total() != (Counts{7, 3}) {
		t.Errorf("planned %d, k3 %+v, k1 %+v, total %+v", s.Planned(), s.Key("k3"), s.Key("k1"), s.Total())
	}
	// The key that was hung up on replays its execution: tkt_1.
	r := post(t, s, "", callBody("k1", "a9"), nil)
	if r.ticket() != "tkt_1" || s.Key("k1") != (Counts{2, 1}) || s.Key("a9") != (Counts{1, 0}) {
		t.Errorf("k1 again: %s, k1 %+v", r.body, s.Key("k1"))
	}
	if !strings.Contains(r.body, `"acme/trace":"tr_1"`) || !strings.Contains(r.body, `"dev.obol/receipt"`) {
		t.Errorf("result lacks ResultMeta: %s", r.body)
	}
	// Without a _meta key, the argument key deduplicates.
	if a, b := post(t, s, "", callBody("", "a5"), nil), post(t, s, "", callBody("", "a5"), nil); a.ticket() != "tkt_4" || b.ticket() != "tkt_4" {
		t.Errorf("argument key: %s then %s", a.body, b.body)
	}
}

// A 2026-07-28 server checks the per-request headers and _meta as the MCP
// Go SDK's server does, and answers in the same statuses and codes.
func TestModernChecks(t *testing.T) {
	s := Start(t, Options{Token: "tok"})
	auth := func(h http.Header) { h.Set("Authorization", "Bearer tok") }
	body := callBody("k", "a")
	for _, c := range []struct {
		name   string
		body   string
		edit   func(http.Header)
		status int
		code   int
	}{
		{"no token", body, func(h http.Header) {}, 401, 0},
		{"content type", body, func(h http.Header) { auth(h); h.Set("Content-Type", "text/plain") }, 415, 0},
		{"accept", body, func(h http.Header) { auth(h); h.Set("Accept", "application/json") }, 400, 0},
		{"no version header", body, func(h http.Header) { auth(h); h.Del("Mcp-Protocol-Version") }, 400, codeUnsupportedVersion},
		{"old version header", body, func(h http.Header) { auth(h); h.Set("Mcp-Protocol-Version", LegacyVersion) }, 400, codeUnsupportedVersion},
		{"no _meta version", strings.Replace(body, `"io.modelcontextprotocol/protocolVersion":"2026-07-28",`, "", 1), auth, 400, codeInvalidParams},
		{"method header", body, func(h http.Header) { auth(h); h.Set("Mcp-Method", "tools/list") }, 400, codeHeaderMismatch},
		{"name header", body, func(h http.Header) { auth(h); h.Del("Mcp-Name") }, 400, codeHeaderMismatch},
		{"no capabilities", strings.Replace(body, `,"io.modelcontextprotocol/clientCapabilities":{}`, "", 1), auth, 200, codeInvalidParams},
		{"unknown method", strings.Replace(body, `"tools/call"`, `"tools/frobnicate"`, 1), auth, 404, codeMethodNotFound},
		{"unknown tool", strings.Replace(body, `"create_ticket"`, `"nope"`, 1), auth, 200, codeInvalidParams},
		{"ok", body, auth, 200, 0},
	} {
		r := post(t, s, "", c.body, c.edit)
		if r.err != nil || r.status != c.status || r.code() != c.code {
			t.Errorf("%s: %d %s %v, want %d code %d", c.name, r.status, r.body, r.err, c.status, c.code)
		}
	}
	if s.Total() != (Counts{1, 1}) {
		t.Errorf("total %+v, want the one call that passed", s.Total())
	}
}

// A 2025-11-25 server serves calls only in a live session: a call without
// one is refused 400, in an expired one 404; a new initialize opens one.
func TestLegacySessions(t *testing.T) {
	s := Start(t, Options{Legacy: true})
	initialize := func() string {
		r := post(t, s, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`, nil)
		if r.status != 200 || r.header.Get(sessionHeader) == "" || !strings.Contains(r.body, LegacyVersion) {
			t.Fatalf("initialize: %d %v %s", r.status, r.header, r.body)
		}
		return r.header.Get(sessionHeader)
	}
	legacyCall := strings.Replace(callBody("k", "a"), `,"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`, "", 1)
	sid := initialize()
	if r := post(t, s, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); r.status != 202 {
		t.Errorf("initialized: %d %s", r.status, r.body)
	}
	if r := post(t, s, "", legacyCall, nil); r.status != 400 {
		t.Errorf("no session: %d %s", r.status, r.body)
	}
	if r := post(t, s, sid, legacyCall, nil); r.ticket() != "tkt_1" {
		t.Errorf("in session: %d %s", r.status, r.body)
	}
	if r := post(t, s, sid, callBody("k", "a"), func(h http.Header) { h.Set("Mcp-Protocol-Version", Version) }); r.status != 400 || r.code() != codeUnsupportedVersion {
		t.Errorf("2026-07-28 call: %d %s", r.status, r.body)
	}
	s.ExpireSessions()
	if r := post(t, s, sid, legacyCall, nil); r.status != 404 {
		t.Errorf("expired session: %d %s", r.status, r.body)
	}
	if r := post(t, s, initialize(), legacyCall, nil); r.ticket() != "tkt_2" || s.Key("k") != (Counts{2, 2}) {
		t.Errorf("new session: %d %s, k %+v", r.status, r.body, s.Key("k"))
	}
}
