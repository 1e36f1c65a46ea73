package composio_test

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
// its Target posts to exactly that path, whatever happens to the routing map
// afterwards.
func TestPrepare(t *testing.T) {
	f := newFake(t, answer(200, okReply))
	b := newBroker(t, f.URL+"/base/")
	routing := routing()
	want, err := b.Route("github.create_issue", routing)
	if err != nil {
		t.Fatal(err)
	}
	target, rt, err := broker.Prepare(b, "github.create_issue", routing)
	if err != nil {
		t.Fatal(err)
	}
	if rt != want {
		t.Fatalf("Prepare route %+v, Route %+v", rt, want)
	}
	routing["tool_slug"], routing["connected_account_id"] = "OTHER_TOOL", "ca_other"

	res := target.Send(context.Background(), retry.Attempt{Key: idempotency.NewKey(), Number: 1, Arguments: []byte(`{}`), Spec: federated()})
	if res.Phase != retry.Responded || res.Status != 200 {
		t.Fatalf("result %+v", res)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("fake saw %d requests, want 1", len(reqs))
	}
	if got := reqs[0]; got.Method != rt.Method || got.Path != rt.Path || got.Path != "/base/api/v3/tools/execute/GITHUB_CREATE_AN_ISSUE" {
		t.Errorf("sent %s %s, route pins %s %s", got.Method, got.Path, rt.Method, rt.Path)
	}
	if body := string(reqs[0].Body); body != `{"connected_account_id":"ca_123","user_id":"user-42","arguments":{}}` {
		t.Errorf("body %s", body)
	}
	h, ok := target.(retry.SecretHolder)
	if !ok || !slices.Contains(h.Secrets(), apiKey) {
		t.Errorf("the target does not report the API key")
	}
}

// TestPrepareRefuses: bad routing is an error and no target; a prepared
// target refuses a spec that is not federated, and sends nothing.
func TestPrepareRefuses(t *testing.T) {
	f := newFake(t, answer(200, okReply))
	b := newBroker(t, f.URL)
	target, rt, err := b.Prepare("t", map[string]string{"tool_slug": "A/../B", "user_id": "u"})
	if !errors.Is(err, broker.ErrInvalidRouting) || target != nil || !reflect.ValueOf(rt).IsZero() {
		t.Fatalf("Prepare = %v, %+v, %v; want no target and ErrInvalidRouting", target, rt, err)
	}
	target, _, err = b.Prepare("t", routing())
	if err != nil {
		t.Fatal(err)
	}
	native := federated()
	native.Route = effectspec.RouteNative
	res := target.Send(context.Background(), retry.Attempt{Key: idempotency.NewKey(), Number: 1, Spec: native})
	if res.Phase != retry.BeforeSend || !errors.Is(res.Err, broker.ErrNotFederated) {
		t.Errorf("result %+v, want before_send ErrNotFederated", res)
	}
	res = target.Send(context.Background(), retry.Attempt{Key: idempotency.NewKey(), Number: 1, Arguments: []byte(`[1]`), Spec: federated()})
	if res.Phase != retry.BeforeSend || !errors.Is(res.Err, broker.ErrInvalidArguments) {
		t.Errorf("result %+v, want before_send ErrInvalidArguments", res)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("fake saw %d requests", n)
	}
}
