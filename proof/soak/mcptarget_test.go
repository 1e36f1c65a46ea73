package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// TestMCPTargetMeetsStandIns: the gateway's MCP target, sent to the soak's
// stand-in upstreams, gives the attempt results the soak's checks rely on:
// an answer is the tool's outcome, Retryable only for a keyed binding on a
// 503; a hang-up or a cut stream after the tool ran may have run it
// (PostSend); a lost session is never-sent (BeforeSend, not in the
// vendor's count) and the next attempt makes a new one. Every key lands
// where the tool reads it, and the retries run the tool once.
func TestMCPTargetMeetsStandIns(t *testing.T) {
	v, w := newTestVendors(t)
	ten := tenant{id: "ws_a", marker: "mk_a"}
	hdr := http.Header{"Authorization": {"Bearer sk_soak_mcp_target"}}
	ups := map[string]*retry.MCPUpstream{
		"mcp":          {URL: v.URL + "/mcp/stateless", Header: hdr},
		"mcp_sessions": {URL: v.URL + "/mcp/sessions", Header: hdr},
	}
	specs := map[string]effectspec.Spec{
		"charge":        {Tool: "charge", Route: effectspec.RouteNative, Timeout: 2 * time.Second, Idempotency: effectspec.Binding{Kind: effectspec.BindingMeta}},
		"create_ticket": {Tool: "create_ticket", Route: effectspec.RouteNative, Timeout: 2 * time.Second, Idempotency: effectspec.Binding{Kind: effectspec.BindingBodyPointer, Pointer: "/idempotency_key"}},
		"post_note":     {Tool: "post_note", Route: effectspec.RouteNative, Timeout: 2 * time.Second, Idempotency: effectspec.Binding{Kind: effectspec.BindingUnsupported}},
	}
	n := 0
	send := func(route, tool string, s *slot, key idempotency.Key) retry.Result {
		t.Helper()
		n++
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return ups[route].Target(tool).Send(ctx, retry.Attempt{Key: key, Number: n, Arguments: s.args, Spec: specs[tool]})
	}
	mk := func(route, tool string) *slot {
		for {
			s := w.slotFor(ten, toolInfo{name: route + "." + tool, vendorKB: tool != "post_note"}, idempotency.NewKey().String())
			var b callBody
			_ = json.Unmarshal(s.args, &b)
			if !toolRefusesAmount(b.Amount) {
				return s
			}
		}
	}

	for _, route := range []string{"mcp", "mcp_sessions"} {
		for _, tool := range []string{"charge", "create_ticket"} {
			s, key := mk(route, tool), idempotency.NewKey()
			if r := send(route, tool, s, key); r.Phase != retry.Responded || r.Outcome != effectspec.Accepted || !strings.Contains(string(r.Body), s.id) {
				t.Fatalf("%s %s: %+v", route, tool, r)
			}
			v.setMode(route, mode503)
			if r := send(route, tool, s, key); r.Phase != retry.Responded || r.Outcome != effectspec.Unknown || !r.Retryable || r.Status != 503 {
				t.Errorf("%s %s, 503: %+v", route, tool, r)
			}
			for _, m := range []vendorMode{modeHangup, modeSSECut} {
				v.setMode(route, m)
				if r := send(route, tool, s, key); r.Phase != retry.PostSend {
					t.Errorf("%s %s, %s: %+v", route, tool, m, r)
				}
			}
			v.setMode(route, modeNormal)
			if r := send(route, tool, s, key); r.Outcome != effectspec.Accepted {
				t.Errorf("%s %s, the retry: %+v", route, tool, r)
			}
			tr := v.truth()[s.id]
			if tr.seen != 5 || tr.effects != 1 || len(tr.vendorKeys) != 1 || tr.vendorKeys[0] != key.String() || len(tr.forwardedMeta) != 0 {
				t.Errorf("%s %s: truth %+v; want 5 requests, one effect under %s", route, tool, tr, key)
			}
		}
		s := mk(route, "post_note")
		v.setMode(route, mode503)
		if r := send(route, "post_note", s, idempotency.NewKey()); r.Phase != retry.Responded || r.Retryable {
			t.Errorf("%s post_note, 503: %+v; no second attempt without a key", route, r)
		}
		v.setMode(route, modeNormal)
	}

	s := mk("mcp_sessions", "charge")
	key := idempotency.NewKey()
	if r := send("mcp_sessions", "charge", s, key); r.Outcome != effectspec.Accepted {
		t.Fatalf("before the sessions are lost: %+v", r)
	}
	if v.expireSessions("mcp_sessions") == 0 {
		t.Fatal("no session to lose")
	}
	if r := send("mcp_sessions", "charge", s, key); r.Phase != retry.BeforeSend || r.Err == nil {
		t.Errorf("in a lost session: %+v; want BeforeSend", r)
	}
	if r := send("mcp_sessions", "charge", s, key); r.Outcome != effectspec.Accepted {
		t.Errorf("after a lost session: %+v", r)
	}
	if tr := v.truth()[s.id]; tr.seen != 2 || tr.effects != 1 {
		t.Errorf("truth %+v; want 2 requests at the tool (not the one refused for its session), one effect", tr)
	}
	if f := v.mcpFigures(); f["mcp_protocol_refusals"] != 0 || f["mcp_unknown_session_404"] != 1 {
		t.Errorf("figures %v", f)
	}
}
