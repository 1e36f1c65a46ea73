package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// claimTests cover the rows of the state table (docs/DESIGN.md, "The record and
// its lifecycle") that a plain claim reaches.
var claimTests = []test{
	{"New", testClaimNew},
	{"NewHeld", testClaimNewHeld},
	{"RouteKeptWhole", testRouteKeptWhole},
	{"RequestMismatch", testRequestMismatch},
	{"DestinationConflict", testDestinationConflict},
	{"UnknownRouteChanged", testUnknownRouteChanged},
	{"RouteIgnoredWithoutDispatch", testRouteIgnoredWithoutDispatch},
	{"ReplayAfterRouteChange", testReplayAfterRouteChange},
	{"InProgress", testInProgress},
	{"InProgressDeadline", testInProgressDeadline},
	{"ReplayAccepted", func(t *testing.T, h Harness) { testReplay(t, h, effectspec.Accepted, 201) }},
	{"ReplayDefinitelyRejected", func(t *testing.T, h Harness) { testReplay(t, h, effectspec.DefinitelyRejected, 422) }},
	{"ReplayKeepsOnlySafeHeaders", testReplaySafeHeaders},
	{"ReplayBodyDropped", testReplayBodyDropped},
	{"Held", testHeld},
	{"UnknownHeader", func(t *testing.T, h Harness) { testUnknownRedispatch(t, h, effectspec.BindingHeader) }},
	{"UnknownBodyPointer", func(t *testing.T, h Harness) { testUnknownRedispatch(t, h, effectspec.BindingBodyPointer) }},
	{"UnknownUnsupported", testUnknownUnsupported},
	{"LookupNotFound", testLookupNotFound},
	{"ScopeIsolation", testScopeIsolation},
	{"VendorKey", testVendorKey},
}

func testClaimNew(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	r := e.claimed(req)
	if r.LeaseDeadline.IsZero() || r.Ticket != "" || r.Record != nil || r.AlreadyApplied {
		t.Fatalf("claimed: lease %v, ticket %q, record %v, already applied %v; want a lease and nothing else",
			r.LeaseDeadline, r.Ticket, r.Record != nil, r.AlreadyApplied)
	}
	rec := e.lookup(req)
	switch {
	case rec.State != effectspec.InProgress:
		t.Fatalf("record state %q, want in_progress", rec.State)
	case rec.AttemptCount != 1 || rec.SentAttempts != 1:
		t.Fatalf("record attempt count %d, sent %d, want 1, 1", rec.AttemptCount, rec.SentAttempts)
	case rec.Key != req.Key || rec.KeySource != req.KeySource:
		t.Fatalf("record key %q (%s), want %q (%s)", rec.Key, rec.KeySource, req.Key, req.KeySource)
	case rec.RequestHash != req.RequestHash || rec.Binding != req.Binding || rec.Route.Fingerprint != req.Route.Fingerprint || rec.Route != req.Route:
		t.Fatalf("record pins hash %q binding %q fingerprint %q route %+v; want %q %q %q %+v",
			rec.RequestHash, rec.Binding, rec.Route.Fingerprint, rec.Route, req.RequestHash, req.Binding, req.Route.Fingerprint, req.Route)
	case rec.ScopeVersion != idempotency.ScopeVersion:
		t.Fatalf("record scope version %d, want %d", rec.ScopeVersion, idempotency.ScopeVersion)
	case rec.SchemaVersion < 1:
		t.Fatalf("record schema version %d, want >= 1", rec.SchemaVersion)
	case !rec.LeaseDeadline.Equal(r.LeaseDeadline):
		t.Fatalf("record lease %v, claim answered %v", rec.LeaseDeadline, r.LeaseDeadline)
	case rec.CreatedAt.IsZero() || rec.UpdatedAt.IsZero() || !rec.FinalizedAt.IsZero():
		t.Fatalf("record times created %v updated %v finalized %v", rec.CreatedAt, rec.UpdatedAt, rec.FinalizedAt)
	case rec.Result != nil || rec.Ticket != "" || rec.Approved:
		t.Fatalf("new record has a result (%v), ticket %q or approval %v", rec.Result != nil, rec.Ticket, rec.Approved)
	}
	// The lease is the configured one, counted from the claim on the store's
	// clock (a second of slack for stores that keep coarser times), and ends
	// at the attempt deadline at the latest.
	want := min(e.cfg.Lease, effectspec.DefaultAttemptTimeout)
	if d := rec.LeaseDeadline.Sub(rec.CreatedAt); d < want-time.Second || d > want+time.Second {
		t.Fatalf("lease deadline is %v after creation, want the configured lease %v (at most the attempt timeout)", d, want)
	}
	if e.s.Lease() != e.cfg.Lease {
		t.Fatalf("Lease() = %v, want the configured %v", e.s.Lease(), e.cfg.Lease)
	}
	// Timeout zero is the default attempt timeout.
	if d := rec.AttemptDeadline.Sub(rec.CreatedAt); d < effectspec.DefaultAttemptTimeout-time.Second || d > effectspec.DefaultAttemptTimeout+time.Second {
		t.Fatalf("attempt deadline is %v after creation, want the default %v", d, effectspec.DefaultAttemptTimeout)
	}
	if !r.AttemptDeadline.Equal(rec.AttemptDeadline) {
		t.Fatalf("claim answered attempt deadline %v, record has %v", r.AttemptDeadline, rec.AttemptDeadline)
	}
	// A claim's timeout sets its attempt deadline.
	req = call(effectspec.BindingUnsupported)
	req.Timeout = 5 * time.Minute
	r = e.claimed(req)
	if d := r.AttemptDeadline.Sub(e.lookup(req).CreatedAt); d < req.Timeout-time.Second || d > req.Timeout+time.Second {
		t.Fatalf("attempt deadline is %v after creation, want the timeout %v", d, req.Timeout)
	}
}

func testClaimNewHeld(t *testing.T, h Harness) {
	e := std(t, h)
	req := held(call(effectspec.BindingHeader))
	r := e.claimWant(req, idempotency.StatusHeld)
	if !idempotency.ValidTicketID(r.Ticket) {
		t.Fatalf("held: ticket %q is not an apt_ id", r.Ticket)
	}
	if r.Token != 0 || !r.LeaseDeadline.IsZero() || r.Record != nil {
		t.Fatalf("held: token %d, lease %v, record %v; a held call reserves nothing", r.Token, r.LeaseDeadline, r.Record != nil)
	}
	rec := e.lookup(req)
	if rec.State != effectspec.Held || rec.AttemptCount != 0 || rec.Ticket != r.Ticket || rec.Approved {
		t.Fatalf("held record: state %q, attempts %d, ticket %q, approved %v; want held, 0, %q, false",
			rec.State, rec.AttemptCount, rec.Ticket, rec.Approved, r.Ticket)
	}
	tk, err := e.s.Ticket(e.ctx, r.Ticket)
	if err != nil {
		t.Fatalf("Ticket: %v", err)
	}
	if tk.ID != r.Ticket || tk.Scope != req.Scope || tk.Key != req.Key || tk.Status != idempotency.TicketPending || tk.Status == idempotency.TicketApproved {
		t.Fatalf("Ticket = %+v; want id %q, scope %+v, key %q, pending", tk, r.Ticket, req.Scope, req.Key)
	}
}

// testRouteKeptWhole: a fresh claim, held or not, pins the route record
// as given, whether its connection and tool are the scope's, others or
// empty, and whatever the length or bytes of a fact.
func testRouteKeptWhole(t *testing.T, h Harness) {
	e := std(t, h)
	base := call(effectspec.BindingHeader)
	routes := map[string]func(r *idempotency.Route){
		"the scope's": func(r *idempotency.Route) {},
		"others":      func(r *idempotency.Route) { r.Connection, r.Tool = "conn_other", "resend.send_email" },
		"empty":       func(r *idempotency.Route) { r.Connection, r.Tool, r.Method, r.Host, r.Path = "", "", "", "", "" },
		"long and UTF-8": func(r *idempotency.Route) {
			r.Host, r.Path = strings.Repeat("h", 128), "/v1/größe/😀/"+strings.Repeat("p", 100)
		},
	}
	for name, mut := range routes {
		for _, approval := range []bool{false, true} {
			req := call(effectspec.BindingHeader)
			route := idempotency.Route{Connection: base.Scope.Connection, Provider: "stripe", Tool: base.Scope.Tool,
				Method: "POST", Host: "api.stripe.test", Path: "/v1/charges", Binding: req.Binding}
			mut(&route)
			req.Route = route.Record()
			want := idempotency.StatusClaimed
			if approval {
				req, want = held(req), idempotency.StatusHeld
			}
			e.claimWant(req, want)
			if rec := e.lookup(req); rec.Route != req.Route || rec.Route.Fingerprint != req.Route.Fingerprint {
				t.Errorf("route %s, approval %v: record pins %+v (%s); want %+v (%s)", name, approval, rec.Route, rec.Route.Fingerprint, req.Route, req.Route.Fingerprint)
			}
		}
	}
}

// testRequestMismatch: a different request under a claimed key is refused in
// every state, before any other rule.
func testRequestMismatch(t *testing.T, h Harness) {
	e := std(t, h)
	for _, st := range []string{"in_progress", "accepted", "unknown", "held"} {
		req := call(effectspec.BindingHeader)
		switch st {
		case "held":
			e.claimWant(held(req), idempotency.StatusHeld)
		default:
			e.claimed(req)
			if st != "in_progress" {
				e.finalize(req, 1, effectspec.Outcome(st), result(201, `{"id":"ch_1"}`))
			}
		}
		other := req
		other.RequestHash = requestHash(`{"amount":999,"currency":"eur"}`)
		e.unchanged(req, "a mismatching claim", func() {
			contender(t, e.claimWant(other, idempotency.StatusRequestMismatch))
			// A different request that also goes elsewhere is still a
			// request mismatch: the request hash is checked first.
			other.Route.Fingerprint = otherFingerprint(req)
			contender(t, e.claimWant(other, idempotency.StatusRequestMismatch))
		})
	}
}

// testDestinationConflict: an unknown record of a vendor binding would be
// redispatched; resolved elsewhere now, it is destination_conflict, and a
// fingerprint alone (same route record) is enough to tell.
func testDestinationConflict(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	e.finalize(req, 1, effectspec.Unknown, nil)
	e.unchanged(req, "a conflicting claim", func() {
		for what, other := range moved(req) {
			if r := e.claim(other); r.Status != idempotency.StatusDestinationConflict {
				t.Fatalf("unknown record, %s: %q, want destination_conflict", what, r.Status)
			} else {
				contender(t, r)
			}
		}
		other := req
		other.Route.Fingerprint = otherFingerprint(req)
		contender(t, e.claimWant(other, idempotency.StatusDestinationConflict))
	})
	// The original route still redispatches.
	if r := e.claimWant(req, idempotency.StatusClaimed); r.Token != 2 {
		t.Fatalf("redispatch on the original route: token %d, want 2", r.Token)
	}
}

// testUnknownRouteChanged: the unknown row with another route is
// destination_conflict for every binding, also where the same route would
// answer outcome_unknown, and for a record whose lease lapsed.
func testUnknownRouteChanged(t *testing.T, h Harness) {
	e := short(t, h)
	for _, b := range []effectspec.BindingKind{effectspec.BindingHeader, effectspec.BindingBodyPointer, effectspec.BindingUnsupported} {
		for _, lapsed := range []bool{false, true} {
			req := call(b)
			e.claimed(req)
			if lapsed {
				e.expireLease()
			} else {
				e.finalize(req, 1, effectspec.Unknown, nil)
			}
			conflicts := func() {
				for what, other := range moved(req) {
					if r := e.claim(other); r.Status != idempotency.StatusDestinationConflict {
						t.Fatalf("%s, lease lapsed %v, %s: %q, want destination_conflict", b, lapsed, what, r.Status)
					} else {
						contender(t, r)
					}
				}
			}
			if lapsed {
				// The lapsed attempt first becomes unknown (Lease/ExpiredOtherRoute).
				conflicts()
			} else {
				e.unchanged(req, "a claim resolved elsewhere", conflicts)
			}
			e.wantUnknown(req, 1)
		}
	}
}

// testRouteIgnoredWithoutDispatch: rows that do not dispatch answer as they
// would for the original route: in_progress, held, denied.
func testRouteIgnoredWithoutDispatch(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	e.unchanged(req, "a claim resolved elsewhere while in flight", func() {
		for what, other := range moved(req) {
			if r := e.claim(other); r.Status != idempotency.StatusInProgress {
				t.Fatalf("in flight, %s: %q, want in_progress", what, r.Status)
			}
		}
	})
	hq := held(call(effectspec.BindingHeader))
	ticket := e.hold(hq)
	e.unchanged(hq, "a claim resolved elsewhere while held", func() {
		for what, other := range moved(hq) {
			if r := e.claim(other); r.Status != idempotency.StatusHeld || r.Ticket != ticket {
				t.Fatalf("held, %s: %q ticket %q, want held with ticket %q", what, r.Status, r.Ticket, ticket)
			}
		}
	})
	dq := held(call(effectspec.BindingHeader))
	if _, err := e.decide(e.hold(dq), false); err != nil {
		t.Fatalf("Decide: %v", err)
	}
	e.unchanged(dq, "a claim resolved elsewhere after a denial", func() {
		for what, other := range moved(dq) {
			if r := e.claim(other); r.Status != idempotency.StatusDenied {
				t.Fatalf("denied, %s: %q, want denied", what, r.Status)
			}
		}
	})
}

// testReplayAfterRouteChange: a final record replays whatever the request's
// route says now (a pin change, an edited base_url), with its ORIGINAL route
// record, binding and fingerprint.
func testReplayAfterRouteChange(t *testing.T, h Harness) {
	e := std(t, h)
	for _, outcome := range []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected} {
		req := call(effectspec.BindingHeader)
		e.claimed(req)
		want := result(201, `{"id":"ch_1"}`)
		e.finalize(req, 1, outcome, want)
		e.unchanged(req, "a replay resolved elsewhere", func() {
			for what, other := range moved(req) {
				other.Route.Provider = "adyen"
				r := e.claim(other)
				if r.Status != idempotency.StatusReplay || r.Record == nil {
					t.Fatalf("%s record, %s: %q, want replay", outcome, what, r.Status)
				}
				rec := r.Record
				if rec.Route != req.Route || rec.Binding != req.Binding || rec.Route.Fingerprint != req.Route.Fingerprint || rec.State != outcome {
					t.Fatalf("%s: replayed route %+v binding %q fingerprint %q; want the original %+v %q %q",
						what, rec.Route, rec.Binding, rec.Route.Fingerprint, req.Route, req.Binding, req.Route.Fingerprint)
				}
				sameResult(t, rec.Result, want)
			}
		})
	}
}

// testInProgressDeadline: in_progress says when the running attempt ends,
// and nothing else of the owner's.
func testInProgressDeadline(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	req.Timeout = 2 * time.Minute
	c := e.claimed(req)
	r := e.claimWant(req, idempotency.StatusInProgress)
	contender(t, r)
	if r.AttemptDeadline.IsZero() || !r.AttemptDeadline.Equal(c.AttemptDeadline) {
		t.Fatalf("in_progress attempt deadline %v, the attempt's is %v", r.AttemptDeadline, c.AttemptDeadline)
	}
}

func testInProgress(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	e.unchanged(req, "a contending claim", func() {
		for range 3 {
			contender(t, e.claimWant(req, idempotency.StatusInProgress))
		}
	})
	if rec := e.lookup(req); rec.AttemptCount != 1 {
		t.Fatalf("attempt count %d after contenders, want 1", rec.AttemptCount)
	}
}

func testReplay(t *testing.T, h Harness, outcome effectspec.Outcome, status int) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	res := result(status, `{"id":"ch_1","amount":100}`)
	fin := e.finalize(req, 1, outcome, res)
	if fin.State != outcome || fin.AttemptCount != 1 || fin.FinalizedAt.IsZero() {
		t.Fatalf("Finalize returned state %q, attempts %d, finalized %v; want %q, 1, a time",
			fin.State, fin.AttemptCount, fin.FinalizedAt, outcome)
	}
	if fin.Result != nil && len(fin.Result.Body) != 0 {
		t.Fatal("Finalize returned the result body; it answers the record without it")
	}
	e.unchanged(req, "a replay", func() {
		for range 2 {
			r := e.claimWant(req, idempotency.StatusReplay)
			if r.Token != 0 || !r.LeaseDeadline.IsZero() || r.Ticket != "" || r.AlreadyApplied {
				t.Fatalf("replay: token %d, lease %v, ticket %q, already applied %v; want none",
					r.Token, r.LeaseDeadline, r.Ticket, r.AlreadyApplied)
			}
			if r.Record == nil {
				t.Fatal("replay carries no record")
			}
			rec := *r.Record
			if rec.State != outcome || rec.Key != req.Key || rec.RequestHash != req.RequestHash || rec.AttemptCount != 1 || rec.FinalizedAt.IsZero() {
				t.Fatalf("replayed record: state %q, key %q, hash %q, attempts %d, finalized %v",
					rec.State, rec.Key, rec.RequestHash, rec.AttemptCount, rec.FinalizedAt)
			}
			sameResult(t, rec.Result, res)
		}
	})
}

func testReplaySafeHeaders(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingHeader)
	e.claimed(req)
	res := result(201, `{}`)
	res.Header.Set("Set-Cookie", "session=secret")
	res.Header.Set("Authorization", "Bearer sk_live_secret")
	res.Header.Set("Location", "https://files.example/x?signature=secret")
	e.finalize(req, 1, effectspec.Accepted, res)
	r := e.claimWant(req, idempotency.StatusReplay)
	if r.Record == nil || r.Record.Result == nil {
		t.Fatal("replay carries no result")
	}
	for name := range r.Record.Result.Header {
		if !idempotency.SafeHeader(name) {
			t.Fatalf("replay keeps header %s, which SafeHeader does not allow", name)
		}
	}
	if got := r.Record.Result.Header.Get("Content-Type"); got != "application/json" {
		t.Fatalf("replay lost the safe Content-Type header (got %q)", got)
	}
}

func testReplayBodyDropped(t *testing.T, h Harness) {
	e := std(t, h)
	// Half the limit is kept whether or not a store counts headers too.
	for _, n := range []int{e.cfg.MaxResultBytes / 2, e.cfg.MaxResultBytes + 1} {
		req := call(effectspec.BindingHeader)
		e.claimed(req)
		res := result(201, strings.Repeat("x", n))
		e.finalize(req, 1, effectspec.Accepted, res)
		r := e.claimWant(req, idempotency.StatusReplay)
		if r.Record == nil || r.Record.Result == nil {
			t.Fatal("replay carries no result")
		}
		got := r.Record.Result
		if n <= e.cfg.MaxResultBytes {
			sameResult(t, got, res)
			continue
		}
		if !got.BodyDropped || len(got.Body) != 0 || got.Status != 201 || got.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("a %d-byte body over the %d-byte limit: dropped %v, %d bytes kept, status %d, content type %q; want dropped, status and headers kept",
				n, e.cfg.MaxResultBytes, got.BodyDropped, len(got.Body), got.Status, got.Header.Get("Content-Type"))
		}
	}
}

func testHeld(t *testing.T, h Harness) {
	e := std(t, h)
	req := held(call(effectspec.BindingHeader))
	first := e.claimWant(req, idempotency.StatusHeld)
	e.unchanged(req, "claims of a held record", func() {
		for _, approval := range []bool{true, false} {
			again := req
			again.ApprovalRequired = approval
			r := e.claimWant(again, idempotency.StatusHeld)
			if r.Ticket != first.Ticket {
				t.Fatalf("held again: ticket %q, want the same ticket %q", r.Ticket, first.Ticket)
			}
			contender(t, r)
		}
	})
}

func testUnknownRedispatch(t *testing.T, h Harness, binding effectspec.BindingKind) {
	e := std(t, h)
	req := call(binding)
	e.claimed(req)
	e.finalize(req, 1, effectspec.Unknown, nil)
	if rec := e.lookup(req); rec.State != effectspec.Unknown {
		t.Fatalf("after finalize unknown: state %q", rec.State)
	}
	r := e.claimWant(req, idempotency.StatusClaimed)
	if r.Token != 2 || r.LeaseDeadline.IsZero() || r.Record != nil {
		t.Fatalf("re-claim of an unknown %s record: token %d, lease %v, record %v; want token 2 with a lease",
			binding, r.Token, r.LeaseDeadline, r.Record != nil)
	}
	rec := e.lookup(req)
	if rec.State != effectspec.InProgress || rec.AttemptCount != 2 || !rec.LeaseDeadline.Equal(r.LeaseDeadline) {
		t.Fatalf("after re-claim: state %q, attempts %d, lease %v; want in_progress, 2, %v",
			rec.State, rec.AttemptCount, rec.LeaseDeadline, r.LeaseDeadline)
	}
	contender(t, e.claimWant(req, idempotency.StatusInProgress))
	e.finalize(req, 2, effectspec.Accepted, result(200, `{"ok":true}`))
	if r := e.claimWant(req, idempotency.StatusReplay); r.Record == nil || r.Record.AttemptCount != 2 {
		t.Fatal("replay after the second attempt does not count two attempts")
	}
}

func testUnknownUnsupported(t *testing.T, h Harness) {
	e := std(t, h)
	req := call(effectspec.BindingUnsupported)
	e.claimed(req)
	e.finalize(req, 1, effectspec.Unknown, nil)
	e.unchanged(req, "a claim of an unknown unsupported record", func() {
		for range 2 {
			contender(t, e.claimWant(req, idempotency.StatusOutcomeUnknown))
		}
	})
}

func testLookupNotFound(t *testing.T, h Harness) {
	e := std(t, h)
	e.absent(call(effectspec.BindingHeader))
	if _, err := e.s.Ticket(e.ctx, idempotency.NewTicketID()); !isNotFound(err) {
		t.Fatalf("Ticket of an unknown id: %v, want ErrNotFound", err)
	}
}

// testScopeIsolation: one key in different scopes is different records.
func testScopeIsolation(t *testing.T, h Harness) {
	e := std(t, h)
	base := call(effectspec.BindingHeader)
	e.claimed(base)
	variants := []func(*idempotency.ClaimRequest){
		func(r *idempotency.ClaimRequest) { r.Scope.Workspace = "ws_other" },
		func(r *idempotency.ClaimRequest) { r.Scope.Connection = "conn_other" },
		func(r *idempotency.ClaimRequest) { r.Scope.Tool = "stripe.refund" },
		func(r *idempotency.ClaimRequest) { r.Scope.Connection, r.Scope.Tool = "", "cap.charge" },
	}
	for i, v := range variants {
		req := base
		v(&req)
		if r := e.claim(req); r.Status != idempotency.StatusClaimed || r.Token != 1 {
			t.Fatalf("variant %d (%+v): status %q token %d; the same key in another scope is a new record", i, req.Scope, r.Status, r.Token)
		}
	}
	if rec := e.lookup(base); rec.AttemptCount != 1 || rec.State != effectspec.InProgress {
		t.Fatalf("original record changed: state %q, attempts %d", rec.State, rec.AttemptCount)
	}
	// A capability record is found by its scope.
	capReq := base
	capReq.Scope.Connection, capReq.Scope.Tool = "", "cap.charge"
	if rec := e.lookup(capReq); rec.Key != base.Key {
		t.Fatal("capability record not found under its scope")
	}
}

// testVendorKey: a vendor binding's record carries a vendor key made from the
// whole slot (docs/DESIGN.md, "The key on the vendor hop"): never the client's
// key, another one in another workspace, and the same one on every claim that
// dispatches and on the replayed record. An unsupported binding has none.
func testVendorKey(t *testing.T, h Harness) {
	e := std(t, h)
	for _, b := range []effectspec.BindingKind{effectspec.BindingHeader, effectspec.BindingBodyPointer} {
		req := call(b)
		vk := e.claimed(req).VendorKey
		if vk.IsZero() || vk == req.Key {
			t.Fatalf("%s: claim vendor key %q; want one derived from the slot, never the client's key %q", b, vk, req.Key)
		}
		if _, err := idempotency.ParseKey(vk.String()); err != nil {
			t.Fatalf("%s: vendor key is not an idt_ key: %v", b, err)
		}
		if rec := e.lookup(req); rec.VendorKey != vk {
			t.Fatalf("%s: record vendor key %q, claim answered %q", b, rec.VendorKey, vk)
		}
		other := req
		other.Scope.Workspace = "ws_other"
		if ovk := e.claimed(other).VendorKey; ovk == vk || ovk == req.Key {
			t.Fatalf("%s: another workspace with the same client key got vendor key %q (first %q)", b, ovk, vk)
		}
		e.finalize(req, 1, effectspec.Unknown, nil)
		if r := e.claimWant(req, idempotency.StatusClaimed); r.VendorKey != vk {
			t.Fatalf("%s: redispatch sends vendor key %q, the slot's is %q", b, r.VendorKey, vk)
		}
		e.finalize(req, 2, effectspec.Accepted, result(201, `{}`))
		if r := e.claimWant(req, idempotency.StatusReplay); r.Record == nil || r.Record.VendorKey != vk {
			t.Fatalf("%s: replayed record lacks the vendor key %q", b, vk)
		}
	}
	req := call(effectspec.BindingUnsupported)
	if vk := e.claimed(req).VendorKey; !vk.IsZero() {
		t.Fatalf("unsupported binding: vendor key %q, want none", vk)
	}
	if rec := e.lookup(req); !rec.VendorKey.IsZero() {
		t.Fatalf("unsupported binding: record vendor key %q, want none", rec.VendorKey)
	}
}
