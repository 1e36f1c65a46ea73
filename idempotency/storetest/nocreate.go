package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// noCreateTests: a claim that may not create a record
// (ClaimRequest.NoCreate) answers no_record and writes nothing where no
// live record is, and claims every existing record as without it.
var noCreateTests = []test{
	{"Missing", testNoCreateMissing},
	{"Expired", testNoCreateExpired},
	{"Existing", testNoCreateExisting},
}

func noCreate(req idempotency.ClaimRequest) idempotency.ClaimRequest {
	req.NoCreate = true
	return req
}

func testNoCreateMissing(t *testing.T, h Harness) {
	e := std(t, h)
	for _, approval := range []bool{false, true} {
		for _, b := range []effectspec.BindingKind{effectspec.BindingHeader, effectspec.BindingUnsupported} {
			req := call(b)
			req.ApprovalRequired = approval
			r := e.claimWant(noCreate(req), idempotency.StatusNoRecord)
			contender(t, r)
			if r.Ticket != "" || !errors.Is(r.Err(), idempotency.ErrNoRecord) {
				t.Fatalf("no_record: ticket %q, Err() %v; want none and ErrNoRecord", r.Ticket, r.Err())
			}
			e.absent(req)
			// Refuse is answered first.
			if r := e.claim(refused(noCreate(req))); r.Status != idempotency.StatusRefused {
				t.Fatalf("refused and no-create: %q, want refused", r.Status)
			}
			e.absent(req)
			// Nothing was written: the same key is fresh for a claim that
			// may create its record.
			if approval {
				e.hold(req)
			} else {
				e.claimed(req)
			}
		}
	}
}

// testNoCreateExpired: an expired record is no record.
func testNoCreateExpired(t *testing.T, h Harness) {
	e := newEnv(t, h, shortLease, shortRetention)
	req := call(effectspec.BindingHeader)
	req.Timeout = time.Second // within the short retention
	e.claimed(req)
	e.finalize(req, 1, effectspec.Accepted, result(201, `{}`))
	e.wait(e.cfg.Retention + margin)
	contender(t, e.claimWant(noCreate(req), idempotency.StatusNoRecord))
	e.absent(req)
}

func testNoCreateExisting(t *testing.T, h Harness) {
	e := short(t, h)
	type row struct {
		setup func(req idempotency.ClaimRequest) idempotency.ClaimRequest // the claim to send
		want  map[effectspec.BindingKind]idempotency.Status
	}
	same := func(s idempotency.Status) map[effectspec.BindingKind]idempotency.Status {
		return map[effectspec.BindingKind]idempotency.Status{effectspec.BindingHeader: s, effectspec.BindingUnsupported: s}
	}
	rows := map[string]row{
		"in flight": {func(req idempotency.ClaimRequest) idempotency.ClaimRequest { e.claimed(req); return req },
			same(idempotency.StatusInProgress)},
		"re-sent claim": {func(req idempotency.ClaimRequest) idempotency.ClaimRequest {
			req.OpID = idempotency.NewOpID()
			e.claimed(req)
			return req
		}, same(idempotency.StatusClaimed)},
		"lease lapsed": {func(req idempotency.ClaimRequest) idempotency.ClaimRequest {
			e.claimed(req)
			e.expireLease()
			return req
		}, map[effectspec.BindingKind]idempotency.Status{effectspec.BindingHeader: idempotency.StatusClaimed,
			effectspec.BindingUnsupported: idempotency.StatusOutcomeUnknown}},
		"never sent": {func(req idempotency.ClaimRequest) idempotency.ClaimRequest {
			e.claimed(req)
			e.neverSent(req, 1)
			return req
		}, same(idempotency.StatusClaimed)},
		"final": {func(req idempotency.ClaimRequest) idempotency.ClaimRequest {
			e.claimed(req)
			e.finalize(req, 1, effectspec.Accepted, result(201, `{}`))
			return req
		}, same(idempotency.StatusReplay)},
		"held": {func(req idempotency.ClaimRequest) idempotency.ClaimRequest { e.hold(req); return held(req) },
			same(idempotency.StatusHeld)},
		"approved resume": {func(req idempotency.ClaimRequest) idempotency.ClaimRequest {
			tk := e.hold(req)
			if _, err := e.decide(tk, true); err != nil {
				t.Fatalf("Decide: %v", err)
			}
			req = held(req)
			req.Ticket = tk
			return req
		}, same(idempotency.StatusClaimed)},
		"denied": {func(req idempotency.ClaimRequest) idempotency.ClaimRequest {
			tk := e.hold(req)
			if _, err := e.decide(tk, false); err != nil {
				t.Fatalf("Decide: %v", err)
			}
			return held(req)
		}, same(idempotency.StatusDenied)},
	}
	for name, r := range rows {
		for _, b := range []effectspec.BindingKind{effectspec.BindingHeader, effectspec.BindingUnsupported} {
			q := noCreate(r.setup(call(b)))
			got := e.claim(q)
			if got.Status != r.want[b] {
				t.Fatalf("%s, %s: a claim with NoCreate answered %q, want %q (as without it)", name, b, got.Status, r.want[b])
			}
			if got.Status == idempotency.StatusClaimed && got.Token == 0 {
				t.Fatalf("%s, %s: claimed without a token", name, b)
			}
		}
	}
}
