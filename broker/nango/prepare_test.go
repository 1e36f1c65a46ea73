package nango_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// TestPrepare: the Route that Prepare returns is the one Route returns, and
// its Target sends to exactly that method and path, whatever happens to the
// routing map afterwards.
func TestPrepare(t *testing.T) {
	f := newFake(t, nil)
	b := newBroker(t, f.URL+"/base")
	key := idempotency.NewKey()
	for _, tc := range []struct {
		name    string
		routing map[string]string
	}{
		{"proxy", proxyRouting("PATCH", "/crm/v3/objects/contacts/9")},
		{"action", actionRouting("create-issue")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := b.Route("crm.create_contact", tc.routing)
			if err != nil {
				t.Fatal(err)
			}
			target, rt, err := broker.Prepare(b, "crm.create_contact", tc.routing)
			if err != nil {
				t.Fatal(err)
			}
			if rt != want {
				t.Fatalf("Prepare route %+v, Route %+v", rt, want)
			}
			// Another routing in the same map must not move the target.
			tc.routing["path"], tc.routing["method"] = "/elsewhere", "DELETE"
			delete(tc.routing, "action")

			before := len(f.requests())
			res := target.Send(context.Background(), retry.Attempt{Key: key, Number: 1, Arguments: []byte(`{"a":1}`), Spec: federated()})
			if res.Phase != retry.Responded || res.Status != 200 {
				t.Fatalf("result %+v", res)
			}
			reqs := f.requests()[before:]
			if len(reqs) != 1 {
				t.Fatalf("fake saw %d requests, want 1", len(reqs))
			}
			got := reqs[0]
			wantPath := rt.Path
			if tc.name == "action" {
				wantPath = "/base/action/trigger" // the action name is in the body
			}
			if got.Method != rt.Method || got.Path != wantPath {
				t.Errorf("sent %s %s, route pins %s %s", got.Method, got.Path, rt.Method, rt.Path)
			}
			if got.Header.Get("Idempotency-Key") != "" || got.Header.Get("Connection-Id") != rt.Connection {
				t.Errorf("headers %v", got.Header)
			}
			h, ok := target.(retry.SecretHolder)
			if !ok || !slices.Contains(h.Secrets(), secret) {
				t.Errorf("the target does not report the secret")
			}
		})
	}
}

// TestPrepareRefuses: bad routing is an error and no target; a prepared
// target refuses a spec that is not federated, and sends nothing.
func TestPrepareRefuses(t *testing.T) {
	f := newFake(t, nil)
	b := newBroker(t, f.URL)
	target, rt, err := b.Prepare("t", map[string]string{"connection_id": "c", "provider_config_key": "p", "path": "/a", "action": "x"})
	if !errors.Is(err, broker.ErrInvalidRouting) || target != nil || !reflect.ValueOf(rt).IsZero() {
		t.Fatalf("Prepare = %v, %+v, %v; want no target and ErrInvalidRouting", target, rt, err)
	}
	target, _, err = b.Prepare("t", proxyRouting("POST", "/a"))
	if err != nil {
		t.Fatal(err)
	}
	native := federated()
	native.Route = effectspec.RouteNative
	res := target.Send(context.Background(), retry.Attempt{Key: idempotency.NewKey(), Number: 1, Spec: native})
	if res.Phase != retry.BeforeSend || !errors.Is(res.Err, broker.ErrNotFederated) {
		t.Errorf("result %+v, want before_send ErrNotFederated", res)
	}
	res = target.Send(context.Background(), retry.Attempt{Key: idempotency.NewKey(), Number: 1, Arguments: []byte(`{"a":`), Spec: federated()})
	if res.Phase != retry.BeforeSend || !errors.Is(res.Err, broker.ErrInvalidArguments) {
		t.Errorf("result %+v, want before_send ErrInvalidArguments", res)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("fake saw %d requests", n)
	}
}
