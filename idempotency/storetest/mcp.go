package storetest

import (
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// mcpTests: an upstream MCP server runs an MCP route's calls, one
// tools/call per attempt (docs/DESIGN.md, "Request hash and dispatch
// fingerprint", kind mcp). With binding meta the slot's vendor key travels
// in params._meta, where the upstream deduplicates on it: the rules of a
// vendor binding hold (redispatch inside the window, record letter m on the
// allow-list). The record keeps the route's upstream tool.
var mcpTests = []test{
	{"MetaRedispatch", testMCPMetaRedispatch},
	{"MetaWindow", testMCPMetaWindow},
	{"UnsupportedUnknown", testMCPUnsupportedUnknown},
	{"RouteChanged", testMCPRouteChanged},
	{"KeepsRoute", testMCPKeepsRoute},
}

var mcpBindings = []effectspec.BindingKind{effectspec.BindingMeta, effectspec.BindingBodyPointer, effectspec.BindingUnsupported}

// mcpCall returns a fresh claim request on its own key for a tool of an
// upstream MCP server, with binding b.
func mcpCall(b effectspec.BindingKind) idempotency.ClaimRequest {
	return idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Workspace: "ws_test", Connection: "conn_pay", Tool: "pay.create"},
		Key:         idempotency.NewKey(),
		KeySource:   idempotency.KeySupplied,
		RequestHash: requestHash(`{"amount":100,"currency":"eur"}`),
		Binding:     b,
		Route:       mcpRoute(b).Record(),
	}
}

func mcpRoute(b effectspec.BindingKind) idempotency.Route {
	r := idempotency.Route{Connection: "conn_pay", Provider: "pay", Tool: "pay.create", Host: "mcp.pay.example", Path: "/mcp",
		Scheme: "https", Credential: "PAY_TOKEN", Binding: b, UpstreamTool: "create_payment"}
	switch b {
	case effectspec.BindingMeta:
		r.BindingName = effectspec.DefaultMetaName
	case effectspec.BindingBodyPointer:
		r.BindingName = "/idempotency_key"
	}
	return r
}

// mcpMoved returns the ways an MCP request for req's key (made by mcpCall)
// may now resolve elsewhere: another upstream tool, another endpoint,
// another _meta member, another binding.
func mcpMoved(req idempotency.ClaimRequest) map[string]idempotency.ClaimRequest {
	at := func(f func(r *idempotency.Route)) idempotency.ClaimRequest {
		r := mcpRoute(req.Binding)
		f(&r)
		out := req
		out.Binding, out.Route = r.Binding, r.Record()
		return out
	}
	other := effectspec.BindingBodyPointer
	if req.Binding == other {
		other = effectspec.BindingMeta
	}
	return map[string]idempotency.ClaimRequest{
		"another upstream tool": at(func(r *idempotency.Route) { r.UpstreamTool = "create_refund" }),
		"another endpoint":      at(func(r *idempotency.Route) { r.Path = "/v2/mcp" }),
		"another name":          at(func(r *idempotency.Route) { r.BindingName = "com.example/key" }),
		"another binding":       at(func(r *idempotency.Route) { r.Binding, r.BindingName = other, mcpRoute(other).BindingName }),
	}
}

// testMCPMetaRedispatch: an unknown meta call, finalized unknown or with its
// lease lapsed, is sent again under the same vendor key (the upstream
// deduplicates on it), never the client's key.
func testMCPMetaRedispatch(t *testing.T, h Harness) {
	for _, lapsed := range []bool{false, true} {
		e := short(t, h)
		req := mcpCall(effectspec.BindingMeta)
		vk := e.claimed(req).VendorKey
		if vk.IsZero() || vk == req.Key {
			t.Fatalf("meta claim: vendor key %q; want one derived from the slot, never the client's key %q", vk, req.Key)
		}
		if lapsed {
			e.expireLease()
		} else {
			e.finalize(req, 1, effectspec.Unknown, nil)
		}
		r := e.claimWant(req, idempotency.StatusClaimed)
		if r.Token != 2 || r.LeaseDeadline.IsZero() || r.VendorKey != vk {
			t.Fatalf("lease lapsed %v: redispatch of an unknown meta call: token %d, lease %v, vendor key %q; want 2, a lease, the slot's key %q",
				lapsed, r.Token, r.LeaseDeadline, r.VendorKey, vk)
		}
		if rec := e.lookup(req); rec.State != effectspec.InProgress || rec.AttemptCount != 2 || rec.SentAttempts != 2 || rec.VendorKey != vk {
			t.Fatalf("lease lapsed %v: after the redispatch: state %q, attempts %d, sent %d, vendor key %q; want in_progress, 2, 2, %q",
				lapsed, rec.State, rec.AttemptCount, rec.SentAttempts, rec.VendorKey, vk)
		}
		e.wantBinding(req, "after the redispatch")
	}
}

// testMCPMetaWindow: the upstream deduplicates only for the window,
// measured from the first attempt that may have left: after it the meta
// call is outcome_unknown and nothing is reserved, approval or not.
func testMCPMetaWindow(t *testing.T, h Harness) {
	e := short(t, h)
	req := mcpCall(effectspec.BindingMeta)
	req.VendorWindow = testWindow
	vk := e.claimed(req).VendorKey
	e.finalize(req, 1, effectspec.Unknown, nil)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 || r.VendorKey != vk {
		t.Fatalf("redispatch inside the window: token %d, vendor key %q; want 2, %q", r.Token, r.VendorKey, vk)
	}
	e.finalize(req, 2, effectspec.Unknown, nil)
	// The new attempt's lease would end after the window.
	e.wait(testWindow - e.cfg.Lease/2)
	e.unchanged(req, "claims of a meta call after the window", func() {
		contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
		contender(t, e.claimWant(held(req), idempotency.StatusOutcomeUnknown))
	})
	if rec := e.lookup(req); rec.State != effectspec.Unknown || rec.AttemptCount != 2 {
		t.Fatalf("after the window: state %q, attempts %d; want unknown, 2", rec.State, rec.AttemptCount)
	}
	// A lease that lapsed after the window: unknown, not sent again.
	req = mcpCall(effectspec.BindingMeta)
	req.VendorWindow = testWindow
	e.claimed(req)
	e.wait(testWindow)
	contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
	e.wantUnknown(req, 1)
}

// testMCPUnsupportedUnknown: an MCP call whose upstream knows no key is
// outcome_unknown once it may have run, whatever the window; an attempt
// proven never sent (a stale session, a refused protocol version) frees the
// slot.
func testMCPUnsupportedUnknown(t *testing.T, h Harness) {
	e := std(t, h)
	req := mcpCall(effectspec.BindingUnsupported)
	req.VendorWindow = testWindow // a window licenses nothing here
	e.claimed(req)
	e.neverSent(req, 1)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("claim after a never-sent attempt: token %d, want 2", r.Token)
	}
	e.finalize(req, 2, effectspec.Unknown, nil)
	e.unchanged(req, "claims of an unknown unsupported MCP call", func() {
		contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
		contender(t, e.claimWant(held(req), idempotency.StatusOutcomeUnknown))
	})
	e.wantBinding(req, "after outcome_unknown")
}

// testMCPRouteChanged: for every MCP binding, an unknown record, or one
// whose attempts never left, resolved elsewhere now is
// destination_conflict and changes nothing; on its own route a meta or
// body_pointer call is sent again and an unsupported one stays
// outcome_unknown.
func testMCPRouteChanged(t *testing.T, h Harness) {
	e := std(t, h)
	for _, b := range mcpBindings {
		for _, never := range []bool{false, true} {
			req := mcpCall(b)
			e.claimed(req)
			if never {
				e.neverSent(req, 1)
			} else {
				e.finalize(req, 1, effectspec.Unknown, nil)
			}
			e.unchanged(req, "claims resolved elsewhere", func() {
				for what, other := range mcpMoved(req) {
					if other.Route.Fingerprint == req.Route.Fingerprint && other.Binding == req.Binding {
						continue // the name of a binding that has none
					}
					if r := e.claim(other); r.Status != idempotency.StatusDestinationConflict {
						t.Fatalf("%s, never sent %v, %s: %q, want destination_conflict", b, never, what, r.Status)
					} else {
						contender(t, r)
					}
				}
			})
			want := idempotency.StatusClaimed
			if b == effectspec.BindingUnsupported && !never {
				want = idempotency.StatusOutcomeUnknown
			}
			if r := e.claim(req); r.Status != want {
				t.Fatalf("%s, never sent %v: on its own route: %q, want %q", b, never, r.Status, want)
			}
		}
	}
}

// testMCPKeepsRoute: the record holds its binding and its route, upstream
// tool included, through every step, and a replay shows them.
func testMCPKeepsRoute(t *testing.T, h Harness) {
	e := std(t, h)
	for _, b := range mcpBindings {
		req := mcpCall(b)
		if req.Route.UpstreamTool != "create_payment" {
			t.Fatalf("setup: route record %+v without its upstream tool", req.Route)
		}
		e.claimed(req)
		e.wantBinding(req, string(b)+", claimed")
		e.neverSent(req, 1)
		e.wantBinding(req, string(b)+", never sent")
		e.claimWant(req, idempotency.StatusClaimed)
		e.finalize(req, 2, effectspec.Unknown, nil)
		e.wantBinding(req, string(b)+", unknown")
		if b != effectspec.BindingUnsupported {
			e.claimWant(req, idempotency.StatusClaimed)
			e.wantBinding(req, string(b)+", redispatched")
		}
		for _, outcome := range []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected} {
			req := mcpCall(b)
			e.claimed(req)
			want := result(200, `{"content":[{"type":"text","text":"paid"}],"isError":false}`)
			e.finalize(req, 1, outcome, want)
			rp := e.claimWant(req, idempotency.StatusReplay)
			if rp.Record == nil {
				t.Fatalf("%s: replay of %s carries no record", b, outcome)
			}
			if got := rp.Record; got.Binding != b || got.Route != req.Route || got.State != outcome {
				t.Fatalf("%s: replay of %s: binding %q, route %+v, state %q; want %q, %+v, %q",
					b, outcome, got.Binding, got.Route, got.State, b, req.Route, outcome)
			}
			sameResult(t, rp.Record.Result, want)
		}
	}
}
