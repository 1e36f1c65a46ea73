package retry_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// countingStore counts every method called on it, and forwards none.
type countingStore struct{ calls atomic.Int64 }

func (s *countingStore) Claim(context.Context, idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	s.calls.Add(1)
	return idempotency.ClaimResult{}, idempotency.ErrStoreUnavailable
}
func (s *countingStore) Reserve(context.Context, idempotency.ReserveRequest) (idempotency.Reservation, error) {
	s.calls.Add(1)
	return idempotency.Reservation{}, idempotency.ErrStoreUnavailable
}
func (s *countingStore) Renew(context.Context, idempotency.RenewRequest) (time.Time, error) {
	s.calls.Add(1)
	return time.Time{}, idempotency.ErrStoreUnavailable
}
func (s *countingStore) Finalize(context.Context, idempotency.FinalizeRequest) (idempotency.Record, error) {
	s.calls.Add(1)
	return idempotency.Record{}, idempotency.ErrStoreUnavailable
}
func (s *countingStore) GiveBack(context.Context, idempotency.GiveBackRequest) error {
	s.calls.Add(1)
	return idempotency.ErrStoreUnavailable
}
func (s *countingStore) Lookup(context.Context, idempotency.Scope, idempotency.Key) (idempotency.Record, error) {
	s.calls.Add(1)
	return idempotency.Record{}, idempotency.ErrStoreUnavailable
}
func (s *countingStore) Ticket(context.Context, string) (idempotency.Ticket, error) {
	s.calls.Add(1)
	return idempotency.Ticket{}, idempotency.ErrStoreUnavailable
}
func (s *countingStore) Decide(context.Context, idempotency.DecideRequest) (idempotency.Ticket, error) {
	s.calls.Add(1)
	return idempotency.Ticket{}, idempotency.ErrStoreUnavailable
}
func (s *countingStore) Lease() time.Duration {
	s.calls.Add(1)
	return 5 * time.Second
}

// A Route missing a fact its fingerprint needs is refused by Do with
// ErrWeakRoute before the store (or the vendor) sees anything: the Route the
// README's snippet used to build (no scheme, binding name or vendor account)
// among them.
func TestWeakRouteRefusedBeforeTheStore(t *testing.T) {
	header := spec(effectspec.BindingHeader)
	full := payRoute(header)
	if err := full.Check(); err != nil {
		t.Fatal(err)
	}
	federated := effectspec.MustNew(effectspec.Spec{Tool: "pay.charge", Effect: effectspec.EffectWrite,
		Route: effectspec.RouteFederated, Status: effectspec.Statuses{Accepted: []int{200}}})
	fedRoute, err := idempotency.NewRoute(federated, idempotency.RouteTarget{Broker: "nango", Connection: "user-1",
		Provider: "hubspot", URL: "https://api.nango.dev/proxy/crm"})
	if err != nil {
		t.Fatal(err)
	}
	without := func(mut func(r *idempotency.Route)) idempotency.Route {
		r := full
		mut(&r)
		return r
	}
	for name, tc := range map[string]struct {
		spec  effectspec.Spec
		route idempotency.Route
	}{
		"zero": {header, idempotency.Route{}},
		"readme before NewRoute": {header, idempotency.Route{Connection: "conn_pay", Provider: "pay", Tool: header.Tool,
			Method: "POST", Host: "vendor", Path: "/charge"}},
		"no scheme":                    {header, without(func(r *idempotency.Route) { r.Scheme = "" })},
		"no credential":                {header, without(func(r *idempotency.Route) { r.Credential = "" })},
		"no binding name":              {header, without(func(r *idempotency.Route) { r.BindingName = "" })},
		"other binding name":           {header, without(func(r *idempotency.Route) { r.BindingName = "x-other-key" })},
		"no host":                      {header, without(func(r *idempotency.Route) { r.Host = "" })},
		"no method":                    {header, without(func(r *idempotency.Route) { r.Method = "" })},
		"no path":                      {header, without(func(r *idempotency.Route) { r.Path = "" })},
		"no provider":                  {header, without(func(r *idempotency.Route) { r.Provider = "" })},
		"no connection":                {header, without(func(r *idempotency.Route) { r.Connection = "" })},
		"native spec, federated route": {header, fedRoute},
		"federated spec, native route": {federated, payRoute(spec(effectspec.BindingUnsupported))},
		"federated without broker host": {federated, func() idempotency.Route {
			r := fedRoute
			r.Host = ""
			return r
		}()},
	} {
		st := &countingStore{}
		o := &retry.Orchestrator{Store: st, Policy: effectspec.Policy{Environment: effectspec.Development}}
		var sent atomic.Int64
		target := retry.TargetFunc(func(context.Context, retry.Attempt) retry.Result {
			sent.Add(1)
			return retry.Result{Phase: retry.Responded, Status: 200}
		})
		for _, ticket := range []string{"", "apt_0123456789abcdef0123456789abcdef"} {
			c := retry.Call{Scope: idempotency.Scope{Workspace: "ws_acme", Connection: "conn_pay", Tool: tc.spec.Tool},
				Key: idempotency.NewKey(), KeySource: idempotency.KeySupplied, Spec: tc.spec, Route: tc.route,
				Target: target, Ticket: ticket}
			_, err := o.Do(context.Background(), c)
			if !errors.Is(err, idempotency.ErrWeakRoute) {
				t.Errorf("%s (ticket %q): %v, want ErrWeakRoute", name, ticket, err)
			}
		}
		if n := st.calls.Load(); n != 0 || sent.Load() != 0 {
			t.Errorf("%s: the store saw %d calls and the vendor %d before the refusal", name, n, sent.Load())
		}
	}
}

// A retry of an unknown call whose vendor account (credential id) or scheme
// changed since is destination_conflict, with nothing sent; the same route
// then still redispatches (the vendor deduplicates on the header).
func TestRouteChangeOfUnknownIsDestinationConflict(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		o := orch(b.open(t, 5*time.Second), 5*time.Second)
		v := newVendor(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
					conn.Close() // read, then hung up: the outcome is unknown
				}
				return
			}
			status(201)(n, w, r)
		})
		sp := spec(effectspec.BindingHeader)
		routeOf := func(scheme, credential string) idempotency.Route {
			rt, err := idempotency.NewRoute(sp, idempotency.RouteTarget{Connection: "conn_pay", Provider: "pay",
				URL: scheme + "://vendor/charge", Credential: credential})
			if err != nil {
				t.Fatal(err)
			}
			return rt
		}
		c := call(v.URL, sp, idempotency.NewKey(), &retry.Executor{})
		c.Route = routeOf("https", "PAY_ACCOUNT_A")
		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Unknown, 1, v.seen.Load())
		for name, rt := range map[string]idempotency.Route{
			"vendor account": routeOf("https", "PAY_ACCOUNT_B"),
			"scheme":         routeOf("http", "PAY_ACCOUNT_A"),
			"no credential":  routeOf("https", idempotency.NoCredential),
		} {
			changed := c
			changed.Route = rt
			_, err := o.Do(context.Background(), changed)
			if !errors.Is(err, idempotency.ErrDestinationConflict) {
				t.Errorf("%s changed: %v, want ErrDestinationConflict", name, err)
			}
			if r, _ := idempotency.Reason(err); r != "destination_conflict" {
				t.Errorf("%s changed: reason %q", name, r)
			}
		}
		if n := v.seen.Load(); n != 1 {
			t.Fatalf("vendor saw %d requests after the conflicts, want 1", n)
		}
		out, err = o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Accepted, 2, v.seen.Load())
	})
}
