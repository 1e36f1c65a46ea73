package storetest

import (
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// refuseTests: a refusal decided before the claim (ClaimRequest.Refuse)
// replays a final record and otherwise writes nothing.
var refuseTests = []test{
	{"Missing", testRefuseMissing},
	{"Final", testRefuseFinal},
	{"NotFinal", testRefuseNotFinal},
	{"RequestMismatch", testRefuseRequestMismatch},
}

func refused(req idempotency.ClaimRequest) idempotency.ClaimRequest {
	req.Refuse = true
	return req
}

func testRefuseMissing(t *testing.T, h Harness) {
	e := std(t, h)
	for _, approval := range []bool{false, true} {
		req := refused(call(effectspec.BindingHeader))
		req.ApprovalRequired = approval
		r := e.claimWant(req, idempotency.StatusRefused)
		contender(t, r)
		if r.Ticket != "" {
			t.Fatalf("refused claim carries a ticket")
		}
		if r.Err() == nil {
			t.Fatal("refused: Err() is nil")
		}
		e.absent(req)
	}
}

func testRefuseFinal(t *testing.T, h Harness) {
	e := std(t, h)
	for _, outcome := range []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected} {
		req := call(effectspec.BindingHeader)
		e.claimed(req)
		want := result(201, `{"id":"ch_1"}`)
		e.finalize(req, 1, outcome, want)
		e.unchanged(req, "a refused claim of a final record", func() {
			for _, q := range []idempotency.ClaimRequest{refused(req), refused(elsewhere(req))} {
				r := e.claimWant(q, idempotency.StatusReplay)
				if r.Record == nil || r.Record.State != outcome || r.Record.Route != req.Route {
					t.Fatal("refused claim of a final record: replay without the original record")
				}
				sameResult(t, r.Record.Result, want)
			}
		})
	}
}

func testRefuseNotFinal(t *testing.T, h Harness) {
	e := short(t, h)
	setups := map[string]func(req idempotency.ClaimRequest){
		"in flight":     func(req idempotency.ClaimRequest) { e.claimed(req) },
		"lease lapsed":  func(req idempotency.ClaimRequest) { e.claimed(req); e.expireLease() },
		"unknown":       func(req idempotency.ClaimRequest) { e.claimed(req); e.finalize(req, 1, effectspec.Unknown, nil) },
		"never sent":    func(req idempotency.ClaimRequest) { e.claimed(req); e.neverSent(req, 1) },
		"held":          func(req idempotency.ClaimRequest) { e.hold(req) },
		"held approved": func(req idempotency.ClaimRequest) { tk := e.hold(req); e.decide(tk, true) },
		"denied":        func(req idempotency.ClaimRequest) { tk := e.hold(req); e.decide(tk, false) },
	}
	for name, setup := range setups {
		for _, b := range []effectspec.BindingKind{effectspec.BindingHeader, effectspec.BindingUnsupported} {
			req := call(b)
			setup(req)
			if rec := e.lookup(req); rec.Approved {
				req.Ticket = rec.Ticket
			}
			e.unchanged(req, "a refused claim", func() {
				r := e.claim(refused(req))
				if r.Status != idempotency.StatusRefused {
					t.Fatalf("%s, %s: refused claim answered %q, want refused", name, b, r.Status)
				}
				contender(t, r)
			})
		}
	}
}

// testRefuseRequestMismatch: the request hash row comes first, refused or
// not: another request under a used key is request_mismatch.
func testRefuseRequestMismatch(t *testing.T, h Harness) {
	e := std(t, h)
	for _, final := range []bool{false, true} {
		req := call(effectspec.BindingHeader)
		e.claimed(req)
		if final {
			e.finalize(req, 1, effectspec.Accepted, result(201, `{}`))
		}
		other := refused(req)
		other.RequestHash = requestHash(`{"amount":999,"currency":"eur"}`)
		e.unchanged(req, "a refused claim of another request", func() {
			contender(t, e.claimWant(other, idempotency.StatusRequestMismatch))
		})
	}
}
