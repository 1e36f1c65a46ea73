package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// inputTests: bad input gets an error and writes nothing.
var inputTests = []test{
	{"BadScope", testBadScope},
	{"ZeroKey", testZeroKey},
	{"BadHashes", testBadHashes},
	{"BadBinding", testBadBinding},
	{"BadOutcome", testBadOutcome},
	{"BadTicketID", testBadTicketID},
	{"BadTimeout", testBadTimeout},
}

var badScopes = []idempotency.Scope{
	{Workspace: "", Connection: "conn_a", Tool: "t"},
	{Workspace: "ws:a", Connection: "conn_a", Tool: "t"},
	{Workspace: "ws_a", Connection: "conn:a", Tool: "t"},
	{Workspace: "ws{a}", Connection: "conn_a", Tool: "t"},
	{Workspace: "ws_a", Connection: "", Tool: "t"},
	{Workspace: "ws_a", Connection: idempotency.Unresolved, Tool: "t"},
	{Workspace: "ws_a", Connection: "conn_a", Tool: ""},
	{Workspace: "ws_a", Connection: "conn_a", Tool: "cap.send"},
	{Workspace: strings.Repeat("w", 129), Connection: "conn_a", Tool: "t"},
}

func testBadScope(t *testing.T, h Harness) {
	e := std(t, h)
	for _, sc := range badScopes {
		req := call(effectspec.BindingHeader)
		req.Scope = sc
		if _, err := e.s.Claim(e.ctx, req); !errors.Is(err, idempotency.ErrInvalidScope) {
			t.Fatalf("Claim in scope %+v: %v, want ErrInvalidScope", sc, err)
		}
		if _, err := e.s.Lookup(e.ctx, sc, req.Key); !errors.Is(err, idempotency.ErrInvalidScope) {
			t.Fatalf("Lookup in scope %+v: %v, want ErrInvalidScope", sc, err)
		}
		if _, err := e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: sc, Key: req.Key, Token: 1}); !errors.Is(err, idempotency.ErrInvalidScope) {
			t.Fatalf("Reserve in scope %+v: %v, want ErrInvalidScope", sc, err)
		}
		if _, err := e.s.Finalize(e.ctx, idempotency.FinalizeRequest{Scope: sc, Key: req.Key, Token: 1, Outcome: effectspec.Accepted}); !errors.Is(err, idempotency.ErrInvalidScope) {
			t.Fatalf("Finalize in scope %+v: %v, want ErrInvalidScope", sc, err)
		}
	}
}

func testZeroKey(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	req.Key = idempotency.Key{}
	if _, err := e.s.Claim(e.ctx, req); !errors.Is(err, idempotency.ErrMalformedKey) {
		t.Fatalf("Claim with the zero key: %v, want ErrMalformedKey", err)
	}
	if _, err := e.s.Lookup(e.ctx, req.Scope, req.Key); !errors.Is(err, idempotency.ErrMalformedKey) {
		t.Fatalf("Lookup with the zero key: %v, want ErrMalformedKey", err)
	}
	if _, err := e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: req.Scope, Token: 1}); !errors.Is(err, idempotency.ErrMalformedKey) {
		t.Fatalf("Reserve with the zero key: %v, want ErrMalformedKey", err)
	}
	if _, err := e.s.Finalize(e.ctx, idempotency.FinalizeRequest{Scope: req.Scope, Token: 1, Outcome: effectspec.Accepted}); !errors.Is(err, idempotency.ErrMalformedKey) {
		t.Fatalf("Finalize with the zero key: %v, want ErrMalformedKey", err)
	}
}

var badHashes = []string{
	"",
	"sha256:",
	"sha256:" + strings.Repeat("a", 63),
	"sha256:" + strings.Repeat("a", 65),
	"sha256:" + strings.Repeat("A", 64),
	"sha256:" + strings.Repeat("g", 64),
	"md5:" + strings.Repeat("a", 32),
	strings.Repeat("a", 64),
}

func testBadHashes(t *testing.T, h Harness) {
	e := std(t, h)
	for _, bad := range badHashes {
		for _, field := range []string{"request hash", "fingerprint"} {
			req := call(effectspec.BindingHeader)
			if field == "request hash" {
				req.RequestHash = bad
			} else {
				req.Route.Fingerprint = bad
			}
			if r, err := e.s.Claim(e.ctx, req); err == nil {
				t.Fatalf("Claim with %s %q: status %q, want an error", field, bad, r.Status)
			}
			e.absent(req)
		}
	}
}

func testBadBinding(t *testing.T, h Harness) {
	e := std(t, h)
	req := call("carrier_pigeon")
	if r, err := e.s.Claim(e.ctx, req); err == nil {
		t.Fatalf("Claim with binding %q: status %q, want an error", req.Binding, r.Status)
	}
	e.absent(req)
}

func testBadOutcome(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	for _, outcome := range []effectspec.Outcome{"", effectspec.InProgress, effectspec.Held, effectspec.Denied, "done"} {
		e.unchanged(req, "Finalize with outcome "+string(outcome), func() {
			if err := e.finalizeErr(req, 1, outcome); err == nil {
				t.Fatalf("Finalize with outcome %q succeeded", outcome)
			}
		})
	}
	e.finalize(req, 1, effectspec.Accepted, result(201, `{}`))
}

func testBadTicketID(t *testing.T, h Harness) {
	e := std(t, h)
	for _, id := range []string{"", "apt_", "apt_xyz", "apt_" + strings.Repeat("A", 32), idempotency.NewKey().String(), "apt_" + strings.Repeat("0", 32) + "}"} {
		if _, err := e.s.Ticket(e.ctx, id); err == nil {
			t.Fatalf("Ticket(%q) succeeded", id)
		}
		if _, err := e.decide(id, true); err == nil {
			t.Fatalf("Decide(%q) succeeded", id)
		}
		if _, err := e.s.Ticket(e.ctx, id); err == nil {
			t.Fatalf("Ticket(%q) succeeded after Decide", id)
		}
	}
}

// testBadTimeout: an attempt timeout that is negative or over
// effectspec.MaxAttemptTimeout is an error that writes nothing.
func testBadTimeout(t *testing.T, h Harness) {
	e := std(t, h)
	for _, d := range []time.Duration{-time.Second, effectspec.MaxAttemptTimeout + time.Millisecond} {
		req := call(effectspec.BindingHeader)
		req.Timeout = d
		if _, err := e.s.Claim(e.ctx, req); err == nil {
			t.Fatalf("Claim with timeout %v succeeded", d)
		}
		e.absent(req)
		req.Timeout = 0
		e.claimed(req)
		e.unchanged(req, "a Reserve with a bad timeout", func() {
			if _, err := e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: 1, Timeout: d}); err == nil || isStale(err) {
				t.Fatalf("Reserve with timeout %v: %v, want an input error", d, err)
			}
		})
	}
	req := call(effectspec.BindingHeader)
	req.Timeout = effectspec.MaxAttemptTimeout
	if r := e.claimed(req); r.AttemptDeadline.Sub(r.LeaseDeadline) < effectspec.MaxAttemptTimeout-e.cfg.Lease-time.Second {
		t.Fatalf("timeout %v: attempt deadline %v, lease %v", req.Timeout, r.AttemptDeadline, r.LeaseDeadline)
	}
}
