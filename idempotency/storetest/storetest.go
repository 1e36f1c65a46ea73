package storetest

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// Harness tells the suite how to make stores.
type Harness struct {
	// New returns a fresh, empty Store configured by cfg, and advance, which
	// moves that store's clock forward by d (for miniredis: FastForward for
	// TTLs and SetTime for TIME). A nil advance means the store follows wall
	// time, and the suite sleeps instead.
	//
	// New is called once per subtest, from parallel subtests. Each call gets
	// its own cfg.Prefix, so stores may share one server; a harness whose
	// advance moves a shared clock must give each call its own server.
	New func(t *testing.T, cfg Config) (store idempotency.Store, advance func(d time.Duration))
}

// Config is the store configuration a subtest needs.
type Config struct {
	Prefix    string        // storage key prefix, unique per New call
	Lease     time.Duration // lease of a reserved attempt
	Retention time.Duration // how long a final record lives after its last change
	// UnknownRetention is how long a record lives after a reservation or an
	// unknown outcome; at least Retention.
	UnknownRetention time.Duration
	MaxResultBytes   int // a stored body over this is dropped (BodyDropped)
}

// Timings of the suite. Short leases are used only where a lease must expire:
// elsewhere a lease outliving a slow, loaded test machine keeps the suite
// from flaking.
const (
	longLease      = time.Minute
	longRetention  = time.Hour
	shortLease     = 300 * time.Millisecond
	shortRetention = 2 * time.Second
	margin         = 300 * time.Millisecond // waited beyond a deadline
	maxResult      = 1024
	callTimeout    = time.Minute // for all of one subtest's store calls
)

// Run runs the conformance suite against the stores h makes. Its subtests
// run in parallel.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("storetest: Harness.New is nil")
	}
	groups := []struct {
		name  string
		tests []test
	}{
		{"Claim", claimTests},
		{"Approval", approvalTests},
		{"Window", windowTests},
		{"InProcess", inProcessTests},
		{"MCP", mcpTests},
		{"Attempts", attemptTests},
		{"Limits", limitTests},
		{"NeverSent", neverSentTests},
		{"Refuse", refuseTests},
		{"NoCreate", noCreateTests},
		{"Renew", renewTests},
		{"Lease", leaseTests},
		{"Resend", resendTests},
		{"Retention", retentionTests},
		{"Input", inputTests},
		{"Concurrency", concurrencyTests},
		{"Settle", settleTests},
		{"List", listTests},
		{"GiveBack", giveBackTests},
		{"Incarnation", incarnationTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, h)
				})
			}
		})
	}
}

type test struct {
	name string
	fn   func(t *testing.T, h Harness)
}

// env is one subtest's store and clock.
type env struct {
	t       *testing.T
	ctx     context.Context
	s       idempotency.Store
	advance func(time.Duration)
	cfg     Config
}

func newEnv(t *testing.T, h Harness, lease, retention time.Duration) *env {
	t.Helper()
	return newEnvUnknown(t, h, lease, retention, 2*retention)
}

func newEnvUnknown(t *testing.T, h Harness, lease, retention, unknownRetention time.Duration) *env {
	t.Helper()
	cfg := Config{
		Prefix:           "st" + idempotency.NewOpID()[:12] + ":",
		Lease:            lease,
		Retention:        retention,
		UnknownRetention: unknownRetention,
		MaxResultBytes:   maxResult,
	}
	s, advance := h.New(t, cfg)
	if s == nil {
		t.Fatal("storetest: Harness.New returned a nil Store")
	}
	// A store that hangs (a script that never returns) fails its subtest
	// instead of stalling the whole run until the test binary times out.
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return &env{t: t, ctx: ctx, s: s, advance: advance, cfg: cfg}
}

// std is a store with leases and retention that never run out during a test.
func std(t *testing.T, h Harness) *env { t.Helper(); return newEnv(t, h, longLease, longRetention) }

// wait lets d pass on the store's clock.
func (e *env) wait(d time.Duration) {
	if e.advance != nil {
		e.advance(d)
		return
	}
	time.Sleep(d)
}

// call returns a fresh claim request on its own key.
func call(binding effectspec.BindingKind) idempotency.ClaimRequest {
	scope := idempotency.Scope{Workspace: "ws_test", Connection: "conn_stripe", Tool: "stripe.create_charge"}
	route := idempotency.Route{
		Connection: scope.Connection, Provider: "stripe", Tool: scope.Tool,
		Method: "POST", Host: "api.stripe.test", Path: "/v1/charges", Binding: binding,
	}
	return idempotency.ClaimRequest{
		Scope:       scope,
		Key:         idempotency.NewKey(),
		KeySource:   idempotency.KeySupplied,
		RequestHash: requestHash(`{"amount":100,"currency":"eur"}`),
		Binding:     binding,
		Route:       route.Record(),
	}
}

func requestHash(args string) string {
	h, err := idempotency.RequestHash([]byte(args))
	if err != nil {
		panic("storetest: " + err.Error()) // constant, valid arguments
	}
	return h
}

// otherFingerprint is the fingerprint of the same route on another host.
func otherFingerprint(req idempotency.ClaimRequest) string {
	return elsewhere(req).Route.Fingerprint
}

// elsewhere is req resolved to the same route on another host, with that
// route's record and fingerprint.
func elsewhere(req idempotency.ClaimRequest) idempotency.ClaimRequest {
	r := idempotency.Route{
		Connection: req.Route.Connection, Provider: req.Route.Provider, Tool: req.Route.Tool,
		Method: req.Route.Method, Host: "api.elsewhere.test", Path: req.Route.Path, Binding: req.Binding,
	}
	req.Route = r.Record()
	return req
}

// otherBinding is req with another binding (and the fingerprint that goes
// with it).
func otherBinding(req idempotency.ClaimRequest) idempotency.ClaimRequest {
	b := effectspec.BindingBodyPointer
	if req.Binding == b {
		b = effectspec.BindingHeader
	}
	r := idempotency.Route{
		Connection: req.Route.Connection, Provider: req.Route.Provider, Tool: req.Route.Tool,
		Method: req.Route.Method, Host: req.Route.Host, Path: req.Route.Path, Binding: b,
	}
	req.Binding, req.Route.Fingerprint = b, r.Fingerprint()
	return req
}

// moved returns the ways a request for req's key may now resolve elsewhere.
func moved(req idempotency.ClaimRequest) map[string]idempotency.ClaimRequest {
	return map[string]idempotency.ClaimRequest{"another host": elsewhere(req), "another binding": otherBinding(req)}
}

func held(req idempotency.ClaimRequest) idempotency.ClaimRequest {
	req.ApprovalRequired = true
	return req
}

func (e *env) claim(req idempotency.ClaimRequest) idempotency.ClaimResult {
	e.t.Helper()
	r, err := e.s.Claim(e.ctx, req)
	if err != nil {
		e.t.Fatalf("Claim: unexpected error: %v", err)
	}
	return r
}

// claimWant claims and checks the status.
func (e *env) claimWant(req idempotency.ClaimRequest, want idempotency.Status) idempotency.ClaimResult {
	e.t.Helper()
	r := e.claim(req)
	if r.Status != want {
		e.t.Fatalf("Claim: status %q, want %q", r.Status, want)
	}
	return r
}

// claimed claims a new key and checks that attempt 1 was reserved.
func (e *env) claimed(req idempotency.ClaimRequest) idempotency.ClaimResult {
	e.t.Helper()
	r := e.claimWant(req, idempotency.StatusClaimed)
	if r.Token != 1 {
		e.t.Fatalf("Claim of a new key: token %d, want 1", r.Token)
	}
	return r
}

func (e *env) lookup(req idempotency.ClaimRequest) idempotency.Record {
	e.t.Helper()
	rec, err := e.s.Lookup(e.ctx, req.Scope, req.Key)
	if err != nil {
		e.t.Fatalf("Lookup: unexpected error: %v", err)
	}
	return rec
}

func (e *env) absent(req idempotency.ClaimRequest) {
	e.t.Helper()
	rec, err := e.s.Lookup(e.ctx, req.Scope, req.Key)
	if !errors.Is(err, idempotency.ErrNotFound) {
		e.t.Fatalf("Lookup: got record in state %q and error %v, want ErrNotFound", rec.State, err)
	}
}

func (e *env) finalize(req idempotency.ClaimRequest, token int, outcome effectspec.Outcome, res *idempotency.StoredResult) idempotency.Record {
	e.t.Helper()
	rec, err := e.s.Finalize(e.ctx, idempotency.FinalizeRequest{Scope: req.Scope, Key: req.Key, Token: token, Outcome: outcome, Result: res})
	if err != nil {
		e.t.Fatalf("Finalize(token %d, %s): unexpected error: %v", token, outcome, err)
	}
	return rec
}

func (e *env) reserve(req idempotency.ClaimRequest, token int) (idempotency.Reservation, error) {
	return e.s.Reserve(e.ctx, idempotency.ReserveRequest{Scope: req.Scope, Key: req.Key, Token: token})
}

func (e *env) decide(ticket string, approve bool) (idempotency.Ticket, error) {
	return e.s.Decide(e.ctx, idempotency.DecideRequest{Ticket: ticket, Approve: approve})
}

// unchanged runs f and checks that the record (or its absence) is the same
// afterwards.
func (e *env) unchanged(req idempotency.ClaimRequest, what string, f func()) {
	e.t.Helper()
	before, errBefore := e.s.Lookup(e.ctx, req.Scope, req.Key)
	f()
	after, errAfter := e.s.Lookup(e.ctx, req.Scope, req.Key)
	for _, err := range []error{errBefore, errAfter} {
		if err != nil && !errors.Is(err, idempotency.ErrNotFound) {
			e.t.Fatalf("Lookup around %s: %v", what, err)
		}
	}
	if (errBefore == nil) != (errAfter == nil) {
		e.t.Fatalf("%s changed the record: Lookup error %v before, %v after", what, errBefore, errAfter)
	}
	// A lease that lapsed between the two reads changes what Lookup shows
	// (in_progress reads unknown), not the record: on a loaded machine a
	// short lease can end while f runs. Any write would move more than the
	// state (the lease, the counts, the op).
	if before.State == effectspec.InProgress && after.State == effectspec.Unknown &&
		!before.LeaseDeadline.IsZero() && before.LeaseDeadline.Equal(after.LeaseDeadline) &&
		!time.Now().Before(before.LeaseDeadline) {
		before.State = effectspec.Unknown
	}
	if d := diffRecords(before, after); d != "" {
		e.t.Fatalf("%s changed the record: %s", what, d)
	}
}

// contender checks that a refused claim carries nothing of the owner's: an
// in_progress answer carries the attempt deadline and nothing else.
func contender(t *testing.T, r idempotency.ClaimResult) {
	t.Helper()
	if r.Status != idempotency.StatusInProgress && !r.AttemptDeadline.IsZero() {
		t.Fatalf("a %q answer carries an attempt deadline", r.Status)
	}
	if r.Token != 0 || !r.LeaseDeadline.IsZero() || r.Record != nil || r.AlreadyApplied || !r.VendorKey.IsZero() {
		t.Fatalf("a %q answer leaks owner data: token %d, lease %v, record %v, already applied %v",
			r.Status, r.Token, r.LeaseDeadline, r.Record != nil, r.AlreadyApplied)
	}
	if r.Status != idempotency.StatusHeld && r.Ticket != "" {
		t.Fatalf("a %q answer carries a ticket", r.Status)
	}
}

func result(status int, body string) *idempotency.StoredResult {
	return &idempotency.StoredResult{
		Status: status,
		Header: http.Header{"Content-Type": {"application/json"}, "Etag": {`"v1"`}},
		Body:   []byte(body),
	}
}

// diffRecords describes how two records differ, or returns "".
func diffRecords(a, b idempotency.Record) string {
	a, b = normRecord(a), normRecord(b)
	if reflect.DeepEqual(a, b) {
		return ""
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range va.NumField() {
		fa, fb := va.Field(i).Interface(), vb.Field(i).Interface()
		if !reflect.DeepEqual(fa, fb) {
			return va.Type().Field(i).Name + " differs"
		}
	}
	return "records differ"
}

func normRecord(r idempotency.Record) idempotency.Record {
	for _, p := range []*time.Time{&r.LeaseDeadline, &r.AttemptDeadline, &r.CreatedAt, &r.UpdatedAt, &r.FinalizedAt} {
		if p.IsZero() {
			*p = time.Time{}
		} else {
			*p = p.Round(0).UTC()
		}
	}
	if r.Result != nil {
		res := *r.Result
		if len(res.Header) == 0 {
			res.Header = nil
		}
		if len(res.Body) == 0 {
			res.Body = nil
		}
		r.Result = &res
	}
	return r
}

// sameResult checks a replayed result against what was finalized.
func sameResult(t *testing.T, got *idempotency.StoredResult, want *idempotency.StoredResult) {
	t.Helper()
	if got == nil {
		t.Fatal("replay carries no stored result")
	}
	if got.Status != want.Status || string(got.Body) != string(want.Body) || got.BodyDropped != want.BodyDropped {
		t.Fatalf("replayed result: status %d, %d body bytes, dropped %v; want status %d, %d body bytes, dropped %v",
			got.Status, len(got.Body), got.BodyDropped, want.Status, len(want.Body), want.BodyDropped)
	}
	for name, vals := range want.Header {
		if !reflect.DeepEqual(got.Header.Values(name), vals) {
			t.Fatalf("replayed header %s = %q, want %q", name, got.Header.Values(name), vals)
		}
	}
	for name := range got.Header {
		if _, ok := want.Header[name]; !ok {
			t.Fatalf("replayed header %s was never stored", name)
		}
	}
}

func isNotFound(err error) bool { return errors.Is(err, idempotency.ErrNotFound) }
