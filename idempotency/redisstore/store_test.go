package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/receipt"
)

var ctx = context.Background()

func TestClaimNewReservesAttemptOne(t *testing.T) {
	m := newMini(t, Options{Lease: 10 * time.Second})
	k := idempotency.NewKey()
	res := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	if res.Token != 1 || !res.LeaseDeadline.Equal(t0.Add(10*time.Second)) || res.AlreadyApplied || res.Record != nil {
		t.Fatalf("claim = %+v", res)
	}
	rk := m.recordKey(t, k)
	if got := recordFields(t, m.mr, rk)["q"]; hex.EncodeToString([]byte(got)) != hashOf("args")[7:] {
		t.Fatalf("stored request hash %q, want its 32 bytes", got)
	}
	wantVK := idempotency.VendorKey(m.store.Deployment(), testScope, k, hashOf("args"))
	if res.VendorKey != wantVK || res.VendorKey == k {
		t.Fatalf("claim vendor key %v, want %v (never the client's key %v)", res.VendorKey, wantVK, k)
	}
	// A reservation lives as long as an unknown record would.
	if ttl := m.mr.TTL(rk); ttl != 7*24*time.Hour {
		t.Fatalf("TTL %v, want the unknown retention 168h", ttl)
	}
	rec, err := m.store.Lookup(ctx, testScope, k)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != effectspec.InProgress || rec.AttemptCount != 1 || rec.RequestHash != hashOf("args") ||
		rec.Route.Fingerprint != hashOf("route") || rec.Binding != effectspec.BindingHeader || rec.KeySource != idempotency.KeySupplied ||
		rec.Route.Provider != "stripe" || rec.ScopeVersion != idempotency.ScopeVersion || rec.SchemaVersion != schemaVersion ||
		!rec.CreatedAt.Equal(t0) || rec.Key != k || rec.VendorKey != wantVK {
		t.Fatalf("lookup = %+v", rec)
	}
}

func TestContendersGetBareAnswers(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)

	// An unknown record of another key: another route there is a conflict.
	u := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(u), idempotency.StatusClaimed)
	mustFinalize(t, m.store, u, 1, effectspec.Unknown, nil)
	before := m.snapshot(t)

	mismatch := claimReq(k)
	mismatch.RequestHash = hashOf("other args")
	route := claimReq(u)
	route.Route.Fingerprint = hashOf("other route")
	binding := claimReq(u)
	binding.Binding = effectspec.BindingBodyPointer
	refused := claimReq(k)
	refused.Refuse = true
	attemptDeadline := t0.Add(effectspec.DefaultAttemptTimeout)
	for _, c := range []struct {
		name string
		req  idempotency.ClaimRequest
		want idempotency.ClaimResult
		raw  int // elements of the raw reply
	}{
		{"same request", claimReq(k), idempotency.ClaimResult{Status: idempotency.StatusInProgress, AttemptDeadline: attemptDeadline}, 2},
		{"request hash", mismatch, idempotency.ClaimResult{Status: idempotency.StatusRequestMismatch}, 1},
		{"fingerprint", route, idempotency.ClaimResult{Status: idempotency.StatusDestinationConflict}, 1},
		{"binding", binding, idempotency.ClaimResult{Status: idempotency.StatusDestinationConflict}, 1},
		{"refused", refused, idempotency.ClaimResult{Status: idempotency.StatusRefused}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := mustClaim(t, m.store, c.req, c.want.Status)
			if res != c.want {
				t.Fatalf("contender saw more than its status: %+v, want %+v", res, c.want)
			}
			// The raw script reply is the status alone (and the attempt
			// deadline for in_progress).
			rk := m.recordKey(t, c.req.Key)
			arr, err := m.store.sc.claim.lua.Exec(ctx, m.client, []string{rk, m.store.bucketOf(testScope.Workspace, rk), m.store.pendingOf(testScope.Workspace, rk),
				m.store.genKeyOf(keySlot(rk))}, scriptargs.ClaimSpec.Argv(&scriptargs.Claim{
				ScopeVersion: scopeVersion, RequestHash: mustDigest(t, c.req.RequestHash), Binding: mustBinding(t, c.req.Binding),
				Fingerprint: mustDigest(t, c.req.Route.Fingerprint), Route: "\x1fstripe\x1fstripe.create_charge\x1fPOST\x1fapi.stripe.com\x1f/v1/charges", KeySource: "s",
				Op: opTag('c', idempotency.NewOpID()), Lease: "30000", Retention: "86400000", URetention: "604800000", Timeout: 30000,
				Refuse: c.req.Refuse, Member: member(c.req.Key), Window: 86400000, Incarnation: "incarnat",
				MaxAttempts: effectspec.DefaultMaxAttempts,
			})).ToArray()
			if err == nil {
				arr, err = genInner(arr) // the slot's generation beside it is no caller's
			}
			if err != nil || len(arr) != c.raw {
				t.Fatalf("raw reply %v, %v; want %d elements", arr, err, c.raw)
			}
			if st, _ := arr[0].ToString(); st != string(c.want.Status) {
				t.Fatalf("raw reply status %q, want %q", st, c.want.Status)
			}
		})
	}
	if after := m.snapshot(t); after != before {
		t.Fatalf("contenders changed the record:\n%s\n%s", before, after)
	}
}

func mustDigest(t *testing.T, v string) string {
	d, err := digestOf("digest", v)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustBinding(t *testing.T, b effectspec.BindingKind) string {
	c, ok := bindingCode(b)
	if !ok {
		t.Fatal(b)
	}
	return c
}

func TestScopeVersionConflictNeverRewrites(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	rk := m.recordKey(t, k)
	for _, s := range []string{"f", "u", "a"} {
		m.mr.HSet(rk, "m", s+"sh", "w", "2", "q", hashOf("args")[7:], "f", hashOf("route")[7:], "n", "1", "l", "1")
		before := m.snapshot(t)
		mustClaim(t, m.store, claimReq(k), idempotency.StatusScopeVersionConflict)
		if after := m.snapshot(t); after != before {
			t.Fatalf("state %s: record rewritten", s)
		}
	}
}

func TestReplayCarriesStoredResult(t *testing.T) {
	for _, outcome := range []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected} {
		t.Run(string(outcome), func(t *testing.T) {
			m := newMini(t, Options{})
			k := idempotency.NewKey()
			c := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
			m.mr.SetTime(t0.Add(time.Second))
			h := http.Header{"Content-Type": {"application/json"}, "Set-Cookie": {"session=secret"}, "X-Request-Id": {"req_1"}, "Etag": {`"a"`, `"b"`}}
			rec := mustFinalize(t, m.store, k, c.Token, outcome, &idempotency.StoredResult{Status: 201, Header: h, Body: []byte(`{"id":"ch_1"}`)})
			if rec.State != outcome || rec.Result == nil || rec.Result.Body != nil || rec.Result.Status != 201 || !rec.FinalizedAt.Equal(t0.Add(time.Second)) {
				t.Fatalf("finalize returned %+v / %+v", rec, rec.Result)
			}
			res := mustClaim(t, m.store, claimReq(k), idempotency.StatusReplay)
			r := res.Record
			if r == nil || r.Result == nil || res.Token != 0 {
				t.Fatalf("replay = %+v", res)
			}
			if string(r.Result.Body) != `{"id":"ch_1"}` || r.Result.Status != 201 || r.Result.BodyDropped || r.AttemptCount != 1 || r.State != outcome {
				t.Fatalf("replayed %+v / %+v", r, r.Result)
			}
			want := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req_1"}, "Etag": {`"a"`, `"b"`}}
			if len(r.Result.Header) != len(want) {
				t.Fatalf("headers %v, want %v", r.Result.Header, want)
			}
			for name, v := range want {
				if got := r.Result.Header.Values(name); len(got) != len(v) || got[0] != v[0] || got[len(got)-1] != v[len(v)-1] {
					t.Fatalf("header %s = %v, want %v", name, got, v)
				}
			}
		})
	}
}

func TestBodyOverLimitDropped(t *testing.T) {
	m := newMini(t, Options{MaxResultBytes: 40})
	k := idempotency.NewKey()
	c := mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	body := make([]byte, 41)
	mustFinalize(t, m.store, k, c.Token, effectspec.Accepted, &idempotency.StoredResult{
		Status: 200, Header: http.Header{"Content-Type": {"text/plain"}}, Body: body,
	})
	r := mustClaim(t, m.store, claimReq(k), idempotency.StatusReplay).Record
	if r.Result.Body != nil || !r.Result.BodyDropped || r.Result.Status != 200 || r.Result.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("replayed %+v", r.Result)
	}
}

func TestHeldApprovalResume(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	req := claimReq(k)
	req.ApprovalRequired = true
	h := mustClaim(t, m.store, req, idempotency.StatusHeld)
	if !idempotency.ValidTicketID(h.Ticket) || h.Token != 0 {
		t.Fatalf("held = %+v", h)
	}
	// The ticket key resolves to the record.
	tk, err := m.store.Ticket(ctx, h.Ticket)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Key != k || tk.Scope != testScope || tk.Status != idempotency.TicketPending || tk.Status == idempotency.TicketApproved || tk.KeySource != req.KeySource {
		t.Fatalf("ticket = %+v", tk)
	}
	// Later claims see the same ticket; a crash that lost the ticket key is
	// repaired by the next held answer.
	m.mr.Del(m.store.ticketKey(h.Ticket))
	again := mustClaim(t, m.store, claimReq(k), idempotency.StatusHeld)
	if again.Ticket != h.Ticket {
		t.Fatalf("second ticket %q, want %q", again.Ticket, h.Ticket)
	}
	if !m.mr.Exists(m.store.ticketKey(h.Ticket)) {
		t.Fatal("held answer did not rewrite the ticket key")
	}
	// Presenting the ticket before approval: still held.
	resume := claimReq(k)
	resume.Ticket = h.Ticket
	mustClaim(t, m.store, resume, idempotency.StatusHeld)

	tk, err = m.store.Decide(ctx, idempotency.DecideRequest{Ticket: h.Ticket, Approve: true})
	if err != nil || tk.Status != idempotency.TicketApproved {
		t.Fatalf("approve = %+v, %v", tk, err)
	}
	// Approved, but a claim without the ticket does not dispatch.
	mustClaim(t, m.store, claimReq(k), idempotency.StatusHeld)
	wrong := claimReq(k)
	wrong.Ticket = idempotency.NewTicketID()
	mustClaim(t, m.store, wrong, idempotency.StatusHeld)
	c := mustClaim(t, m.store, resume, idempotency.StatusClaimed)
	if c.Token != 1 {
		t.Fatalf("resume token %d, want 1", c.Token)
	}
	mustClaim(t, m.store, resume, idempotency.StatusInProgress)
	// The decision is final.
	if _, err := m.store.Decide(ctx, idempotency.DecideRequest{Ticket: h.Ticket, Approve: false}); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("deny after approve: %v, want ErrStale", err)
	}
	if tk, err := m.store.Decide(ctx, idempotency.DecideRequest{Ticket: h.Ticket, Approve: true}); err != nil || tk.Status != idempotency.TicketApproved {
		t.Fatalf("approve again: %+v, %v", tk, err)
	}
	rec, _ := m.store.Lookup(ctx, testScope, k)
	if !rec.Approved || rec.Ticket != h.Ticket || rec.State != effectspec.InProgress {
		t.Fatalf("record %+v", rec)
	}
}

func TestDenied(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	req := claimReq(k)
	req.ApprovalRequired = true
	h := mustClaim(t, m.store, req, idempotency.StatusHeld)
	tk, err := m.store.Decide(ctx, idempotency.DecideRequest{Ticket: h.Ticket})
	if err != nil || tk.Status != idempotency.TicketDenied {
		t.Fatalf("deny = %+v, %v", tk, err)
	}
	resume := claimReq(k)
	resume.Ticket = h.Ticket
	mustClaim(t, m.store, resume, idempotency.StatusDenied)
	mustClaim(t, m.store, claimReq(k), idempotency.StatusDenied)
	if _, err := m.store.Decide(ctx, idempotency.DecideRequest{Ticket: h.Ticket, Approve: true}); !errors.Is(err, idempotency.ErrDenied) {
		t.Fatalf("approve after deny: %v, want ErrDenied", err)
	}
	if tk, err := m.store.Ticket(ctx, h.Ticket); err != nil || tk.Status != idempotency.TicketDenied {
		t.Fatalf("ticket = %+v, %v", tk, err)
	}
	if _, err := m.store.Ticket(ctx, idempotency.NewTicketID()); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("unknown ticket: %v", err)
	}
}

func TestUnknownRow(t *testing.T) {
	for _, c := range []struct {
		binding effectspec.BindingKind
		want    idempotency.Status
	}{
		{effectspec.BindingHeader, idempotency.StatusClaimed},
		{effectspec.BindingBodyPointer, idempotency.StatusClaimed},
		{effectspec.BindingUnsupported, idempotency.StatusOutcomeUnknown},
	} {
		t.Run(string(c.binding), func(t *testing.T) {
			m := newMini(t, Options{})
			k := idempotency.NewKey()
			req := claimReq(k)
			req.Binding = c.binding
			first := mustClaim(t, m.store, req, idempotency.StatusClaimed)
			mustFinalize(t, m.store, k, first.Token, effectspec.Unknown, &idempotency.StoredResult{Status: 504})
			before := m.snapshot(t)
			res := mustClaim(t, m.store, req, c.want)
			if c.want == idempotency.StatusClaimed {
				if res.Token != 2 {
					t.Fatalf("token %d, want 2", res.Token)
				}
				rec, _ := m.store.Lookup(ctx, testScope, k)
				if rec.State != effectspec.InProgress || rec.Result != nil || rec.AttemptCount != 2 {
					t.Fatalf("record %+v", rec)
				}
				// A new cycle: one immediate second attempt is allowed again.
				if _, err := m.store.Reserve(ctx, idempotency.ReserveRequest{Scope: testScope, Key: k, Token: 2}); err != nil {
					t.Fatal(err)
				}
				return
			}
			if res.Token != 0 || m.snapshot(t) != before {
				t.Fatalf("outcome_unknown changed the record or leaked a token: %+v", res)
			}
		})
	}
}

func TestExpiredLease(t *testing.T) {
	for _, c := range []struct {
		binding effectspec.BindingKind
		want    idempotency.Status
	}{
		{effectspec.BindingHeader, idempotency.StatusClaimed},
		{effectspec.BindingUnsupported, idempotency.StatusOutcomeUnknown},
	} {
		t.Run(string(c.binding), func(t *testing.T) {
			m := newMini(t, Options{Lease: time.Second})
			k := idempotency.NewKey()
			req := claimReq(k)
			req.Binding = c.binding
			mustClaim(t, m.store, req, idempotency.StatusClaimed)
			m.mr.SetTime(t0.Add(999 * time.Millisecond))
			mustClaim(t, m.store, req, idempotency.StatusInProgress)
			if rec, _ := m.store.Lookup(ctx, testScope, k); rec.State != effectspec.InProgress {
				t.Fatalf("live lease reads %s", rec.State)
			}
			m.mr.SetTime(t0.Add(time.Second))
			if rec, _ := m.store.Lookup(ctx, testScope, k); rec.State != effectspec.Unknown {
				t.Fatalf("expired lease reads %s, want unknown", rec.State)
			}
			if s := recordFields(t, m.mr, m.recordKey(t, k))["m"]; s != "fsu" && s != "fsh" {
				t.Fatalf("lookup wrote state %q", s)
			}
			res := mustClaim(t, m.store, req, c.want)
			rk := m.recordKey(t, k)
			switch c.want {
			case idempotency.StatusClaimed:
				if res.Token != 2 || !res.LeaseDeadline.Equal(t0.Add(2*time.Second)) {
					t.Fatalf("takeover = %+v", res)
				}
				// The old worker is fenced off.
				if _, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Accepted}); !errors.Is(err, idempotency.ErrStale) {
					t.Fatalf("old token finalize: %v", err)
				}
			default:
				if s := recordFields(t, m.mr, rk)["m"]; s != "usu" {
					t.Fatalf("meta %q, want usu", s)
				}
				// The expiry path took no new token: the owner's answer applies.
				rec, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Accepted})
				if err != nil || rec.State != effectspec.Accepted {
					t.Fatalf("owner's finalize after the expiry path: %+v, %v", rec, err)
				}
				if _, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Unknown}); !errors.Is(err, idempotency.ErrStale) {
					t.Fatalf("a second finalize over the final record: %v", err)
				}
			}
		})
	}
}

func TestFinalizeAfterLeaseWithoutTakeover(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	k := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	m.mr.SetTime(t0.Add(time.Minute))
	rec := mustFinalize(t, m.store, k, 1, effectspec.Accepted, &idempotency.StoredResult{Status: 200})
	if rec.State != effectspec.Accepted || !rec.LeaseDeadline.IsZero() {
		t.Fatalf("record %+v", rec)
	}
}

func TestReserve(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	k := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	rr := func(token int) (idempotency.Reservation, error) {
		return m.store.Reserve(ctx, idempotency.ReserveRequest{Scope: testScope, Key: k, Token: token})
	}
	if _, err := rr(2); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("future token: %v", err)
	}
	m.mr.SetTime(t0.Add(500 * time.Millisecond))
	r, err := rr(1)
	if err != nil || r.Token != 2 || !r.LeaseDeadline.Equal(t0.Add(1500*time.Millisecond)) || r.AlreadyApplied {
		t.Fatalf("reserve = %+v, %v", r, err)
	}
	before := m.snapshot(t)
	for _, tok := range []int{1, 2, 3} {
		if _, err := rr(tok); !errors.Is(err, idempotency.ErrStale) {
			t.Fatalf("token %d: %v, want ErrStale", tok, err)
		}
	}
	if m.snapshot(t) != before {
		t.Fatal("stale reserve changed the record")
	}
	mustFinalize(t, m.store, k, 2, effectspec.Accepted, nil)
	if _, err := rr(2); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("after finalize: %v", err)
	}
	if _, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 2, Outcome: effectspec.Accepted}); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("second finalize: %v", err)
	}
	if _, err := m.store.Reserve(ctx, idempotency.ReserveRequest{Scope: testScope, Key: idempotency.NewKey(), Token: 1}); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("missing record: %v", err)
	}
}

func TestReserveAfterLeaseIsStale(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	k := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	m.mr.SetTime(t0.Add(time.Second))
	before := m.snapshot(t)
	if _, err := m.store.Reserve(ctx, idempotency.ReserveRequest{Scope: testScope, Key: k, Token: 1}); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("reserve after the lease: %v", err)
	}
	if m.snapshot(t) != before {
		t.Fatal("stale reserve changed the record")
	}
}

func TestOpIDResend(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	req := claimReq(k)
	req.OpID = "op-claim"
	first := mustClaim(t, m.store, req, idempotency.StatusClaimed)
	snap := m.snapshot(t)
	again := mustClaim(t, m.store, req, idempotency.StatusClaimed)
	if !again.AlreadyApplied || again.Token != first.Token || !again.LeaseDeadline.Equal(first.LeaseDeadline) {
		t.Fatalf("re-sent claim = %+v", again)
	}
	req.OpID = "op-other"
	mustClaim(t, m.store, req, idempotency.StatusInProgress)
	if m.snapshot(t) != snap {
		t.Fatal("re-sent claim changed the record")
	}

	rq := idempotency.ReserveRequest{Scope: testScope, Key: k, Token: 1, OpID: "op-reserve"}
	r1, err := m.store.Reserve(ctx, rq)
	if err != nil {
		t.Fatal(err)
	}
	snap = m.snapshot(t)
	r2, err := m.store.Reserve(ctx, rq)
	if err != nil || !r2.AlreadyApplied || r2.Token != r1.Token || r2.Token != 2 {
		t.Fatalf("re-sent reserve = %+v, %v", r2, err)
	}
	if m.snapshot(t) != snap {
		t.Fatal("re-sent reserve changed the record")
	}

	fq := idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 2, Outcome: effectspec.Accepted, Result: &idempotency.StoredResult{Status: 200}, OpID: "op-fin"}
	f1, err := m.store.Finalize(ctx, fq)
	if err != nil {
		t.Fatal(err)
	}
	snap = m.snapshot(t)
	m.mr.SetTime(t0.Add(time.Hour))
	f2, err := m.store.Finalize(ctx, fq)
	if err != nil || f2.State != f1.State || !f2.FinalizedAt.Equal(f1.FinalizedAt) {
		t.Fatalf("re-sent finalize = %+v, %v", f2, err)
	}
	if m.snapshot(t) != snap {
		t.Fatal("re-sent finalize changed the record")
	}
	fq.OpID = "op-fin-2"
	if _, err := m.store.Finalize(ctx, fq); !errors.Is(err, idempotency.ErrStale) {
		t.Fatalf("another finalize: %v", err)
	}
}

func TestOpIDResendHeldAndDecide(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	req := claimReq(k)
	req.ApprovalRequired = true
	req.OpID = "op-hold"
	h := mustClaim(t, m.store, req, idempotency.StatusHeld)
	again := mustClaim(t, m.store, req, idempotency.StatusHeld)
	if !again.AlreadyApplied || again.Ticket != h.Ticket {
		t.Fatalf("re-sent held = %+v", again)
	}
	d := idempotency.DecideRequest{Ticket: h.Ticket, Approve: true, OpID: "op-dec"}
	if _, err := m.store.Decide(ctx, d); err != nil {
		t.Fatal(err)
	}
	snap := m.snapshot(t)
	if tk, err := m.store.Decide(ctx, d); err != nil || tk.Status != idempotency.TicketApproved {
		t.Fatalf("re-sent decide = %+v, %v", tk, err)
	}
	if m.snapshot(t) != snap {
		t.Fatal("re-sent decide changed the record")
	}
}

func TestUnsupportedExpiredResendAnswersUnknown(t *testing.T) {
	m := newMini(t, Options{Lease: time.Second})
	k := idempotency.NewKey()
	req := claimReq(k)
	req.Binding = effectspec.BindingUnsupported
	mustClaim(t, m.store, req, idempotency.StatusClaimed)
	m.mr.SetTime(t0.Add(2 * time.Second))
	req.OpID = "op-x"
	mustClaim(t, m.store, req, idempotency.StatusOutcomeUnknown)
	if res := mustClaim(t, m.store, req, idempotency.StatusOutcomeUnknown); !res.AlreadyApplied {
		t.Fatalf("re-sent = %+v", res)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	m := newMini(t, Options{})
	k := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	snap := m.snapshot(t)
	bad := []func(r *idempotency.ClaimRequest){
		func(r *idempotency.ClaimRequest) { r.Scope.Workspace = "a:b" },
		func(r *idempotency.ClaimRequest) { r.Scope.Connection = "{x}" },
		func(r *idempotency.ClaimRequest) { r.Scope.Connection = idempotency.Unresolved },
		func(r *idempotency.ClaimRequest) { r.Scope.Tool = "" },
		func(r *idempotency.ClaimRequest) { r.Key = idempotency.Key{} },
		func(r *idempotency.ClaimRequest) { r.RequestHash = "args" },
		func(r *idempotency.ClaimRequest) { r.RequestHash = r.RequestHash[7:] },
		func(r *idempotency.ClaimRequest) { r.RequestHash = strings.ToUpper(r.RequestHash[7:]) },
		func(r *idempotency.ClaimRequest) { r.RequestHash = "sha256:" + strings.ToUpper(r.RequestHash[7:]) },
		func(r *idempotency.ClaimRequest) { r.RequestHash += "0" },
		func(r *idempotency.ClaimRequest) { r.Route.Fingerprint = "" },
		func(r *idempotency.ClaimRequest) { r.Route.Fingerprint = "sha256:ABCDEF" },
		func(r *idempotency.ClaimRequest) { r.Binding = "smoke_signal" },
		func(r *idempotency.ClaimRequest) { r.KeySource = "" },
		func(r *idempotency.ClaimRequest) { r.Ticket = "apt_nope" },
		func(r *idempotency.ClaimRequest) { r.OpID = "op id" },
		func(r *idempotency.ClaimRequest) { r.OpID = string(make([]byte, 64)) },
		func(r *idempotency.ClaimRequest) { r.Route.Provider = "a\nb" },
	}
	for i, mut := range bad {
		for _, key := range []idempotency.Key{k, idempotency.NewKey()} {
			req := claimReq(key)
			mut(&req)
			if _, err := m.store.Claim(ctx, req); err == nil {
				t.Fatalf("bad claim %d accepted", i)
			} else if errors.Is(err, idempotency.ErrStoreUnavailable) {
				t.Fatalf("bad claim %d reported as a store failure: %v", i, err)
			}
		}
	}
	for i, r := range []idempotency.ReserveRequest{
		{Scope: testScope, Key: k, Token: 0},
		{Scope: testScope, Key: k, Token: 1, OpID: "a/b"},
		{Scope: idempotency.Scope{Workspace: "ws", Tool: "t"}, Key: k, Token: 1},
	} {
		if _, err := m.store.Reserve(ctx, r); err == nil {
			t.Fatalf("bad reserve %d accepted", i)
		}
	}
	for i, f := range []idempotency.FinalizeRequest{
		{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.InProgress},
		{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Denied},
		{Scope: testScope, Key: k, Token: 1},
		{Scope: testScope, Key: k, Token: -1, Outcome: effectspec.Accepted},
		{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Accepted, Result: &idempotency.StoredResult{Status: -1}},
		{Scope: testScope, Key: k, Token: 1, Outcome: effectspec.Accepted, OpID: "ü"},
	} {
		if _, err := m.store.Finalize(ctx, f); err == nil {
			t.Fatalf("bad finalize %d accepted", i)
		}
	}
	for _, d := range []idempotency.DecideRequest{{Ticket: ""}, {Ticket: "apt_x"}, {Ticket: idempotency.NewTicketID(), OpID: "$"}} {
		if _, err := m.store.Decide(ctx, d); err == nil {
			t.Fatalf("bad decide %+v accepted", d)
		}
	}
	if _, err := m.store.Lookup(ctx, idempotency.Scope{}, k); err == nil {
		t.Fatal("bad lookup accepted")
	}
	if m.snapshot(t) != snap {
		t.Fatalf("bad input changed the store:\n%s\n%s", snap, m.snapshot(t))
	}
}

func TestLookupNotFound(t *testing.T) {
	m := newMini(t, Options{})
	if _, err := m.store.Lookup(ctx, testScope, idempotency.NewKey()); !errors.Is(err, idempotency.ErrNotFound) {
		t.Fatalf("lookup: %v", err)
	}
}

func TestRedisErrorsAreStoreUnavailable(t *testing.T) {
	m := newMini(t, Options{})
	m.mr.SetError("LOADING server is loading")
	_, err := m.store.Claim(ctx, claimReq(idempotency.NewKey()))
	var oe *unavailableError
	if !errors.Is(err, idempotency.ErrStoreUnavailable) || !errors.As(err, &oe) || oe.Op != "claim" {
		t.Fatalf("claim error %v", err)
	}
	m.mr.SetError("")
	m.mr.Close()
	// rueidis retries read-only commands until the context ends.
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := m.store.Lookup(dctx, testScope, idempotency.NewKey()); !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("lookup error %v", err)
	}
}

// TestWaitReplicasShortfallIsNotTrusted: miniredis has no replicas (and no
// INFO replication for New to check), so every WAIT falls short: each
// reservation is refused, and finalized as never sent so that it does not
// burn the slot.
func TestWaitReplicasShortfallIsNotTrusted(t *testing.T) {
	m := newMini(t, Options{WaitTimeout: 5 * time.Millisecond})
	m.store.waitN = 1
	k := idempotency.NewKey()
	_, err := m.store.Claim(ctx, claimReq(k))
	if !errors.Is(err, errReplicas) || !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("claim without replicas: %v", err)
	}
	rec, err := m.store.Lookup(ctx, testScope, k)
	if err != nil || rec.State != effectspec.Unknown || rec.AttemptCount != 1 || rec.SentAttempts != 0 {
		t.Fatalf("after a refused reservation: %+v, %v; want unknown, 1 attempt, none sent", rec, err)
	}
	unsupported := claimReq(idempotency.NewKey())
	unsupported.Binding = effectspec.BindingUnsupported
	if _, err := m.store.Claim(ctx, unsupported); !errors.Is(err, errReplicas) {
		t.Fatalf("claim without replicas: %v", err)
	}
	m.store.waitN = 0
	// The slot is not burned, even for an unsupported binding.
	for _, req := range []idempotency.ClaimRequest{claimReq(k), unsupported} {
		if res := mustClaim(t, m.store, req, idempotency.StatusClaimed); res.Token != 2 {
			t.Fatalf("claim after a refused reservation: token %d, want 2", res.Token)
		}
	}
	m.store.waitN = 1
	if _, err := m.store.Reserve(ctx, idempotency.ReserveRequest{Scope: testScope, Key: k, Token: 2}); !errors.Is(err, errReplicas) {
		t.Fatalf("reserve without replicas: %v", err)
	}
	if rec, err := m.store.Lookup(ctx, testScope, k); err != nil || rec.State != effectspec.Unknown || rec.AttemptCount != 3 || rec.SentAttempts != 1 {
		t.Fatalf("after a refused reserve: %+v, %v; want unknown, 3 attempts, 1 sent", rec, err)
	}
	// Held answers are not reservations: no WAIT verdict.
	req := claimReq(idempotency.NewKey())
	req.ApprovalRequired = true
	mustClaim(t, m.store, req, idempotency.StatusHeld)
}

func TestNewOptions(t *testing.T) {
	m := newMini(t, Options{})
	if m.store.prefix != idempotency.DefaultPrefix || m.store.lease != "10000" || m.store.uretention != "604800000" || m.store.Lease() != 10*time.Second || m.store.retention != "86400000" || m.store.maxResult != 64<<10 {
		t.Fatalf("defaults: %+v", m.store)
	}
	for _, o := range []Options{
		{Prefix: "a{b}"},
		{Lease: time.Hour, Retention: time.Minute},
		{Lease: -time.Second},
		{MaxResultBytes: -1},
		{WaitReplicas: -1},
		{WaitTimeout: -time.Second},
	} {
		o.SkipEvictionCheck = true
		if _, err := New(ctx, m.client, o); err == nil {
			t.Fatalf("New(%+v) accepted", o)
		}
	}
	// miniredis has no CONFIG: the eviction check cannot pass.
	if _, err := New(ctx, m.client, Options{}); err == nil {
		t.Fatal("New without CONFIG GET accepted")
	}
}

func TestHeaderFieldsRoundTrip(t *testing.T) {
	for i, name := range headerCodes {
		f := headerField(name)
		if got, ok := fieldHeader(f); !ok || got != name || (i < 10 && len(f) != 1) {
			t.Fatalf("%s -> %q -> %q, %v", name, f, got, ok)
		}
	}
	if f := headerField("X-Other"); f != ":X-Other" {
		t.Fatalf("uncoded header field %q", f)
	}
	if _, ok := fieldHeader("10"); ok {
		t.Fatal("multi-digit field read as a header")
	}
}

// TestRouteRecordRoundTrip: the route record comes back whole from Lookup,
// Finalize and a replay, whether its connection and tool are the scope's
// (and not stored) or not, empty facts included.
func TestRouteRecordRoundTrip(t *testing.T) {
	m := newMini(t, Options{})
	capScope := idempotency.Scope{Workspace: "ws_acme", Tool: "cap.charge"}
	long := strings.Repeat("p", 128)
	for i, c := range []struct {
		scope idempotency.Scope
		route receipt.RouteRecord
	}{
		{testScope, claimReq(idempotency.Key{}).Route},
		{testScope, receipt.RouteRecord{}},
		{testScope, receipt.RouteRecord{Connection: "conn_other", Tool: "stripe.refund", Provider: "stripe"}},
		{capScope, receipt.RouteRecord{Connection: "conn_stripe", Provider: "stripe", Tool: "stripe.create_charge", Method: "POST", Host: "h:8443", Path: long}},
		{capScope, receipt.RouteRecord{Tool: "cap.charge"}},
		{capScope, receipt.RouteRecord{Provider: "x y", Path: "/v1/{id}/é"}},
	} {
		k := idempotency.NewKey()
		req := claimReq(k)
		if c.route.Fingerprint == "" {
			c.route.Fingerprint = hashOf("route")
		}
		req.Scope, req.Route = c.scope, c.route
		mustClaim(t, m.store, req, idempotency.StatusClaimed)
		rec, err := m.store.Lookup(ctx, c.scope, k)
		if err != nil || rec.Route != c.route {
			t.Fatalf("case %d: Lookup route %+v, %v; want %+v", i, rec.Route, err, c.route)
		}
		fin, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: c.scope, Key: k, Token: 1, Outcome: effectspec.Accepted})
		if err != nil || fin.Route != c.route {
			t.Fatalf("case %d: Finalize route %+v, %v; want %+v", i, fin.Route, err, c.route)
		}
		if r := mustClaim(t, m.store, req, idempotency.StatusReplay); r.Record.Route != c.route {
			t.Fatalf("case %d: replay route %+v; want %+v", i, r.Record.Route, c.route)
		}
	}
}

// TestRouteRecordRefused: a route fact over 128 bytes or with a control
// byte is an error that writes nothing and does not quote the fact.
func TestRouteRecordRefused(t *testing.T) {
	m := newMini(t, Options{})
	before := m.snapshot(t)
	for _, mut := range []func(r *receipt.RouteRecord){
		func(r *receipt.RouteRecord) { r.Tool = strings.Repeat("t", 129) },
		func(r *receipt.RouteRecord) { r.Host = "api.stripe.com\nsecret" },
		func(r *receipt.RouteRecord) { r.Path = "/v1/\x00secret" },
		func(r *receipt.RouteRecord) { r.Method = "PO\x7fST" },
		func(r *receipt.RouteRecord) { r.Connection = "secret\r" },
	} {
		req := claimReq(idempotency.NewKey())
		mut(&req.Route)
		_, err := m.store.Claim(ctx, req)
		if err == nil || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "ttt") {
			t.Fatalf("route %+v: %v, want an error that does not quote it", req.Route, err)
		}
	}
	if after := m.snapshot(t); after != before {
		t.Fatal("a refused route wrote something")
	}
}

// TestRecordBeforeAttemptDeadlines writes an in-flight record as the store
// wrote it before route records were whole, sent counts and attempt
// deadlines existed: it reads with every attempt counted as sent, the
// scope's tool, no attempt deadline; it renews without a cap and finalizes.
func TestRecordBeforeAttemptDeadlines(t *testing.T) {
	m := newMini(t, Options{Lease: 10 * time.Second})
	k := idempotency.NewKey()
	rk := m.recordKey(t, k)
	ms := func(d time.Duration) string { return strconv.FormatInt(t0.Add(d).UnixMilli(), 10) }
	m.mr.HSet(rk, "m", "fsu", "w", strconv.Itoa(idempotency.ScopeVersion), "q", mustDigest(t, hashOf("args")), "f", mustDigest(t, hashOf("route")),
		"c", "conn_stripe", "p", "stripe", "n", "2", "y", "1", "l", ms(5*time.Second), "C", ms(-time.Minute), "U", ms(0), "o", "xxxxxxxx")
	m.mr.SetTTL(rk, time.Hour)
	rec, err := m.store.Lookup(ctx, testScope, k)
	if err != nil {
		t.Fatal(err)
	}
	want := receipt.RouteRecord{Connection: "conn_stripe", Provider: "stripe", Tool: testScope.Tool, Fingerprint: hashOf("route")}
	if rec.State != effectspec.InProgress || rec.AttemptCount != 2 || rec.SentAttempts != 2 || !rec.AttemptDeadline.IsZero() || rec.Route != want {
		t.Fatalf("legacy record %+v", rec)
	}
	req := claimReq(k)
	req.Binding = effectspec.BindingUnsupported
	if r := mustClaim(t, m.store, req, idempotency.StatusInProgress); !r.AttemptDeadline.IsZero() {
		t.Fatalf("in_progress of a legacy record: attempt deadline %v", r.AttemptDeadline)
	}
	m.mr.SetTime(t0.Add(4 * time.Second))
	l, err := m.store.Renew(ctx, idempotency.RenewRequest{Scope: testScope, Key: k, Token: 2})
	if err != nil || !l.Equal(t0.Add(14*time.Second)) {
		t.Fatalf("renew of a legacy record = %v, %v; want now + lease", l, err)
	}
	if _, err := m.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: testScope, Key: k, Token: 2, NeverSent: true}); err != nil {
		t.Fatal(err)
	}
	if rec, _ := m.store.Lookup(ctx, testScope, k); rec.State != effectspec.Unknown || rec.SentAttempts != 1 || rec.AttemptCount != 2 {
		t.Fatalf("legacy record after never sent: %+v", rec)
	}
	// Attempt 1 may have left: an unsupported binding stays unknown.
	mustClaim(t, m.store, req, idempotency.StatusOutcomeUnknown)
}

// TestTTLs: a reservation (claim or reserve) and an unknown outcome set the
// unknown retention, a final outcome the retention, a held record the
// retention.
func TestTTLs(t *testing.T) {
	m := newMini(t, Options{Retention: time.Hour, UnknownRetention: 3 * time.Hour})
	ttl := func(k idempotency.Key, want time.Duration, what string) {
		t.Helper()
		if got := m.mr.TTL(m.recordKey(t, k)); got != want {
			t.Fatalf("%s: TTL %v, want %v", what, got, want)
		}
	}
	k := idempotency.NewKey()
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	ttl(k, 3*time.Hour, "claim")
	m.mr.SetTTL(m.recordKey(t, k), time.Minute)
	// Attempt 1 never left, so the claim below is the first redispatch,
	// which no backoff delays.
	if _, err := m.store.Reserve(ctx, idempotency.ReserveRequest{Scope: testScope, Key: k, Token: 1, PreviousNeverSent: true}); err != nil {
		t.Fatal(err)
	}
	ttl(k, 3*time.Hour, "reserve")
	mustFinalize(t, m.store, k, 2, effectspec.Unknown, nil)
	ttl(k, 3*time.Hour, "unknown outcome")
	mustClaim(t, m.store, claimReq(k), idempotency.StatusClaimed)
	mustFinalize(t, m.store, k, 3, effectspec.Accepted, nil)
	ttl(k, time.Hour, "accepted outcome")

	h := idempotency.NewKey()
	req := claimReq(h)
	req.ApprovalRequired = true
	mustClaim(t, m.store, req, idempotency.StatusHeld)
	ttl(h, time.Hour, "held")
}
