package storetest

import (
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// inProcessTests: a handler inside the gateway runs an in-process tool's
// attempts (docs/DESIGN.md, "In-process tools"). With in_process_keyed it
// passes the slot's key to a downstream that deduplicates on it, so the
// rules of a vendor binding hold; with in_process nothing downstream knows
// the key, so a call that may have run is never run again, while an attempt
// proven not run frees the slot as for every binding (docs/DESIGN.md, "The
// record and its lifecycle": the redispatch allow-list).
var inProcessTests = []test{
	{"KeyedRedispatch", testInProcessKeyedRedispatch},
	{"KeyedWindow", testInProcessKeyedWindow},
	{"UnkeyedUnknown", testInProcessUnkeyedUnknown},
	{"UnkeyedNeverSent", testInProcessUnkeyedNeverSent},
	{"RouteChanged", testInProcessRouteChanged},
	{"KeepsBinding", testInProcessKeepsBinding},
}

var inProcessBindings = []effectspec.BindingKind{effectspec.BindingInProcess, effectspec.BindingInProcessKeyed}

// inproc returns a fresh claim request on its own key for an in-process
// tool: the route of a handler on server "local" without an account.
func inproc(b effectspec.BindingKind) idempotency.ClaimRequest {
	scope := idempotency.Scope{Workspace: "ws_test", Connection: "inproc", Tool: "ledger.post"}
	route := inprocRoute(b)
	return idempotency.ClaimRequest{
		Scope:       scope,
		Key:         idempotency.NewKey(),
		KeySource:   idempotency.KeySupplied,
		RequestHash: requestHash(`{"account":"acc_1","amount":100}`),
		Binding:     b,
		Route:       route.Record(),
	}
}

func inprocRoute(b effectspec.BindingKind) idempotency.Route {
	return idempotency.Route{Connection: "inproc", Provider: "local", Tool: "ledger.post", Host: "local",
		Path: "ledger.post", Scheme: idempotency.SchemeInProcess, Credential: idempotency.NoCredential, Binding: b}
}

// inprocMoved returns the ways an in-process request for req's key (made by
// inproc) may now resolve elsewhere: another server, another downstream
// account (the fingerprint alone tells), the other in-process binding, an
// HTTP binding.
func inprocMoved(req idempotency.ClaimRequest) map[string]idempotency.ClaimRequest {
	at := func(f func(r *idempotency.Route)) idempotency.ClaimRequest {
		r := inprocRoute(req.Binding)
		f(&r)
		out := req
		out.Binding, out.Route = r.Binding, r.Record()
		return out
	}
	other := effectspec.BindingInProcessKeyed
	if req.Binding == other {
		other = effectspec.BindingInProcess
	}
	return map[string]idempotency.ClaimRequest{
		"another server":               at(func(r *idempotency.Route) { r.Host, r.Provider = "billing", "billing" }),
		"another account":              at(func(r *idempotency.Route) { r.Credential = "LEDGER_ACCOUNT" }),
		"the other in-process binding": at(func(r *idempotency.Route) { r.Binding = other }),
		"an HTTP binding":              otherBinding(req),
	}
}

// wantBinding checks that the record still holds req's binding and route.
func (e *env) wantBinding(req idempotency.ClaimRequest, when string) {
	e.t.Helper()
	rec := e.lookup(req)
	if rec.Binding != req.Binding || rec.Route != req.Route || rec.Route.Fingerprint != req.Route.Fingerprint {
		e.t.Fatalf("%s: record binding %q, route %+v, fingerprint %q; want %q, %+v, %q",
			when, rec.Binding, rec.Route, rec.Route.Fingerprint, req.Binding, req.Route, req.Route.Fingerprint)
	}
}

// testInProcessKeyedRedispatch: an unknown keyed in-process call, finalized
// unknown or with its lease lapsed, is run again under the same key (the
// downstream deduplicates on it), and the key is never the client's.
func testInProcessKeyedRedispatch(t *testing.T, h Harness) {
	for _, lapsed := range []bool{false, true} {
		e := short(t, h)
		req := inproc(effectspec.BindingInProcessKeyed)
		vk := e.claimed(req).VendorKey
		if vk.IsZero() || vk == req.Key {
			t.Fatalf("keyed in-process claim: vendor key %q; want one derived from the slot, never the client's key %q", vk, req.Key)
		}
		if lapsed {
			e.expireLease()
		} else {
			e.finalize(req, 1, effectspec.Unknown, nil)
		}
		r := e.claimWant(req, idempotency.StatusClaimed)
		if r.Token != 2 || r.LeaseDeadline.IsZero() || r.VendorKey != vk {
			t.Fatalf("lease lapsed %v: redispatch of an unknown keyed call: token %d, lease %v, vendor key %q; want 2, a lease, the slot's key %q",
				lapsed, r.Token, r.LeaseDeadline, r.VendorKey, vk)
		}
		if rec := e.lookup(req); rec.State != effectspec.InProgress || rec.AttemptCount != 2 || rec.SentAttempts != 2 || rec.VendorKey != vk {
			t.Fatalf("lease lapsed %v: after the redispatch: state %q, attempts %d, sent %d, vendor key %q; want in_progress, 2, 2, %q",
				lapsed, rec.State, rec.AttemptCount, rec.SentAttempts, rec.VendorKey, vk)
		}
		e.wantBinding(req, "after the redispatch")
	}
}

// testInProcessKeyedWindow: the downstream deduplicates only for the
// window, measured from the first attempt that may have run: after it the
// keyed call is outcome_unknown and nothing is reserved, approval or not.
func testInProcessKeyedWindow(t *testing.T, h Harness) {
	e := short(t, h)
	req := inproc(effectspec.BindingInProcessKeyed)
	req.VendorWindow = testWindow
	vk := e.claimed(req).VendorKey
	e.finalize(req, 1, effectspec.Unknown, nil)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 || r.VendorKey != vk {
		t.Fatalf("redispatch inside the window: token %d, vendor key %q; want 2, %q", r.Token, r.VendorKey, vk)
	}
	e.finalize(req, 2, effectspec.Unknown, nil)
	// The new attempt's lease would end after the window.
	e.wait(testWindow - e.cfg.Lease/2)
	e.unchanged(req, "claims of a keyed call after the window", func() {
		contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
		contender(t, e.claimWant(held(req), idempotency.StatusOutcomeUnknown))
	})
	if rec := e.lookup(req); rec.State != effectspec.Unknown || rec.AttemptCount != 2 {
		t.Fatalf("after the window: state %q, attempts %d; want unknown, 2", rec.State, rec.AttemptCount)
	}
	// A lease that lapsed after the window: unknown, not run again.
	req = inproc(effectspec.BindingInProcessKeyed)
	req.VendorWindow = testWindow
	e.claimed(req)
	e.wait(testWindow)
	contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
	e.wantUnknown(req, 1)
}

// testInProcessUnkeyedUnknown: an unkeyed in-process call that may have run
// is outcome_unknown under its key, whatever the window, approval or lease:
// it is not on the allow-list.
func testInProcessUnkeyedUnknown(t *testing.T, h Harness) {
	e := short(t, h)
	for _, window := range []bool{false, true} {
		req := inproc(effectspec.BindingInProcess)
		if window {
			req.VendorWindow = testWindow // a window licenses nothing here
		}
		e.claimed(req)
		e.finalize(req, 1, effectspec.Unknown, nil)
		e.unchanged(req, "claims of an unknown in_process call", func() {
			for range 2 {
				contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
			}
			contender(t, e.claimWant(held(req), idempotency.StatusOutcomeUnknown))
		})
		e.wantBinding(req, "after outcome_unknown")
	}
	// The lapsed lease of a handler that may still be running.
	req := inproc(effectspec.BindingInProcess)
	e.claimed(req)
	e.expireLease()
	contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
	e.wantUnknown(req, 1)
	e.unchanged(req, "a claim of the lapsed in_process call", func() {
		contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
	})
}

// testInProcessUnkeyedNeverSent: an in_process attempt proven not run (a
// handler that reported it did nothing, a claim given back) frees the
// slot, at once or under the same key later; once an attempt may have run,
// the slot is burnt.
func testInProcessUnkeyedNeverSent(t *testing.T, h Harness) {
	e := std(t, h)
	// Finalized never sent: the next claim runs it, and it may run once.
	req := inproc(effectspec.BindingInProcess)
	e.claimed(req)
	e.neverSent(req, 1)
	e.wantNothingSent(req, 1)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 || r.LeaseDeadline.IsZero() {
		t.Fatalf("claim after a never-run in_process attempt: token %d, lease %v; want 2 with a lease", r.Token, r.LeaseDeadline)
	}
	if rec := e.lookup(req); rec.State != effectspec.InProgress || rec.AttemptCount != 2 || rec.SentAttempts != 1 {
		t.Fatalf("after the re-open: state %q, attempts %d, sent %d; want in_progress, 2, 1", rec.State, rec.AttemptCount, rec.SentAttempts)
	}
	e.finalize(req, 2, effectspec.Unknown, nil)
	e.unchanged(req, "a claim after an in_process attempt that may have run", func() {
		contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
	})

	// Given back: a retry under the same key runs it.
	req = inproc(effectspec.BindingInProcess)
	req.OpID = idempotency.NewOpID()
	e.claimed(req)
	e.giveBack(req, 1)
	e.wantNothingSent(req, 1)
	retry := req
	retry.OpID = idempotency.NewOpID()
	if r := e.claimWant(retry, idempotency.StatusClaimed); r.Token != 2 || r.AlreadyApplied {
		t.Fatalf("the retry after a give-back: token %d, applied %v; want a fresh token 2", r.Token, r.AlreadyApplied)
	}

	// At once: a second attempt after one proven not run, and when that one
	// does not run either, the slot re-opens.
	req = inproc(effectspec.BindingInProcess)
	e.claimed(req)
	rsv, err := e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: 1, PreviousNeverSent: true})
	if err != nil || rsv.Token != 2 {
		t.Fatalf("Reserve after a never-run first attempt: %+v %v, want token 2", rsv, err)
	}
	e.neverSent(req, 2)
	e.wantNothingSent(req, 2)
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 3 {
		t.Fatalf("claim after two never-run attempts: token %d, want 3", r.Token)
	}
}

// testInProcessRouteChanged: for both in-process bindings, an unknown
// record, or one whose attempts never ran, resolved elsewhere now is
// destination_conflict and changes nothing; on its own route the keyed one
// runs again and the unkeyed one stays outcome_unknown.
func testInProcessRouteChanged(t *testing.T, h Harness) {
	e := std(t, h)
	for _, b := range inProcessBindings {
		for _, never := range []bool{false, true} {
			req := inproc(b)
			e.claimed(req)
			if never {
				e.neverSent(req, 1)
			} else {
				e.finalize(req, 1, effectspec.Unknown, nil)
			}
			e.unchanged(req, "claims resolved elsewhere", func() {
				for what, other := range inprocMoved(req) {
					if r := e.claim(other); r.Status != idempotency.StatusDestinationConflict {
						t.Fatalf("%s, never sent %v, %s: %q, want destination_conflict", b, never, what, r.Status)
					} else {
						contender(t, r)
					}
				}
			})
			want := idempotency.StatusClaimed
			if b == effectspec.BindingInProcess && !never {
				want = idempotency.StatusOutcomeUnknown
			}
			if r := e.claim(req); r.Status != want {
				t.Fatalf("%s, never sent %v: on its own route: %q, want %q", b, never, r.Status, want)
			}
		}
	}
}

// testInProcessKeepsBinding: the record holds its in-process binding
// through every step, and a replay shows it.
func testInProcessKeepsBinding(t *testing.T, h Harness) {
	e := std(t, h)
	for _, b := range inProcessBindings {
		req := inproc(b)
		e.claimed(req)
		e.wantBinding(req, string(b)+", claimed")
		e.neverSent(req, 1)
		e.wantBinding(req, string(b)+", never sent")
		e.claimWant(req, idempotency.StatusClaimed)
		e.finalize(req, 2, effectspec.Unknown, nil)
		e.wantBinding(req, string(b)+", unknown")
		if b == effectspec.BindingInProcessKeyed {
			e.claimWant(req, idempotency.StatusClaimed)
			e.wantBinding(req, string(b)+", redispatched")
		}
		for _, outcome := range []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected} {
			req := inproc(b)
			e.claimed(req)
			want := result(200, `{"content":[{"type":"text","text":"posted"}]}`)
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
