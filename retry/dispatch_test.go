package retry_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/secrettest"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// NewDispatch refuses what Do refuses of a call's own Spec, Route, Target
// and Secrets, so a gateway learns of a bad tool when it registers it.
func TestNewDispatchRefuses(t *testing.T) {
	sp := spec(effectspec.BindingHeader)
	good := call("http://vendor", sp, idempotency.NewKey(), nil)
	weak := good.Route
	weak.BindingName = "x-other-key"
	short := &retry.HTTPTarget{URL: "http://vendor/charge"}
	short.Header = map[string][]string{"Authorization": {"Bearer s3cr3t"}}
	for name, tc := range map[string]struct {
		spec   effectspec.Spec
		route  idempotency.Route
		target retry.Target
		secret []string
		want   error
	}{
		"unvalidated spec": {effectspec.Spec{Tool: "pay.charge"}, good.Route, good.Target, nil, effectspec.ErrUnvalidated},
		"weak route":       {sp, weak, good.Target, nil, idempotency.ErrWeakRoute},
		"no route":         {sp, idempotency.Route{}, good.Target, nil, idempotency.ErrWeakRoute},
		"short secret":     {sp, good.Route, good.Target, []string{"s3cr3t"}, receipt.ErrShortSecret},
		"short target":     {sp, good.Route, short, nil, receipt.ErrShortSecret},
	} {
		d, err := retry.NewDispatch(tc.spec, tc.route, tc.target, tc.secret...)
		if d != nil || !errors.Is(err, tc.want) || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: %v, %v; want %v", name, d, err, tc.want)
		}
	}
	if d, err := retry.NewDispatch(sp, good.Route, nil); d != nil || err == nil {
		t.Errorf("nil target: %v, %v", d, err)
	}
}

// A call through a Dispatch is the call through its fields: the same
// record, route fingerprint and receipt, its answers scrubbed of the
// Dispatch's secrets and of its Target's; hooks see the Spec and Target.
// A Call that names a Dispatch and the fields too is refused unsent.
func TestDispatchCall(t *testing.T) {
	v, seen := echoVendor(t)
	m := miniredis.RunT(t)
	st := openStore(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true}, 5*time.Second, true)
	o := orch(st, 5*time.Second)
	var hooked []string
	o.OnAttempt = func(c *retry.Call, n int, res retry.Result, d time.Duration) {
		hooked = append(hooked, c.Spec.Tool)
		if c.Target == nil || !c.Spec.Validated() {
			t.Errorf("hook sees Spec %v Target %v", c.Spec.Validated(), c.Target)
		}
	}
	const bodySecret = "body_secret_0123456789"
	fields := call(v.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
	fields.Arguments = []byte(`{"amount": 100, "note": "` + bodySecret + `"}`)
	d, err := retry.NewDispatch(fields.Spec, fields.Route, fields.Target, bodySecret)
	if err != nil {
		t.Fatal(err)
	}
	viaD := retry.Call{Scope: fields.Scope, Key: idempotency.NewKey(), KeySource: fields.KeySource, Arguments: fields.Arguments, Dispatch: d}
	fields.Secrets = []string{bodySecret}

	a, err := o.Do(context.Background(), fields)
	if err != nil {
		t.Fatal(err)
	}
	b, err := o.Do(context.Background(), viaD)
	if err != nil {
		t.Fatal(err)
	}
	if a.Receipt.Route != b.Receipt.Route || a.Receipt.Route.Fingerprint == "" || a.Receipt.RequestHash != b.Receipt.RequestHash ||
		a.Receipt.Binding != b.Receipt.Binding || b.Receipt.Outcome != effectspec.Accepted {
		t.Errorf("receipts differ:\n%+v\n%+v", a.Receipt, b.Receipt)
	}
	for what, body := range map[string][]byte{"fields": a.Result.Body, "dispatch": b.Result.Body, "redis": secrettest.DumpRedis(t, m)} {
		if l := secrettest.Leak(body, "sk_test_secret", bodySecret); l != "" {
			t.Errorf("%s holds a secret (%s): %s", what, l, body)
		}
	}
	if !bytes.Contains(b.Result.Body, []byte(receipt.Redacted)) {
		t.Errorf("the echo was not scrubbed: %s", b.Result.Body)
	}
	again, err := o.Do(context.Background(), viaD)
	if err != nil || !again.Receipt.Replayed || secrettest.Leak(again.Result.Body, "sk_test_secret", bodySecret) != "" {
		t.Errorf("replay: %v %+v %s", err, again.Receipt, again.Result.Body)
	}
	if len(hooked) != 2 || hooked[1] != "pay.charge" {
		t.Errorf("hooks saw %v", hooked)
	}

	for name, mutate := range map[string]func(*retry.Call){
		"Spec":    func(c *retry.Call) { c.Spec = d.Spec() },
		"Route":   func(c *retry.Call) { c.Route = fields.Route },
		"Target":  func(c *retry.Call) { c.Target = fields.Target },
		"Secrets": func(c *retry.Call) { c.Secrets = []string{bodySecret} },
	} {
		c := viaD
		c.Key = idempotency.NewKey()
		mutate(&c)
		if _, err := o.Do(context.Background(), c); err == nil || !strings.Contains(err.Error(), "Dispatch") {
			t.Errorf("Dispatch and %s: %v", name, err)
		}
		if _, err := st.Lookup(context.Background(), c.Scope, c.Key); !errors.Is(err, idempotency.ErrNotFound) {
			t.Errorf("Dispatch and %s: a record was written: %v", name, err)
		}
	}
	if seen.Load() != 2 {
		t.Errorf("the vendor saw %d requests, want 2", seen.Load())
	}
}

// What NewDispatch proves once stands for the per-call checks it replaces:
// a call through a Dispatch is refused or run as the same call through its
// fields, for every Policy and scope.
func TestDispatchProvedChecks(t *testing.T) {
	m := miniredis.RunT(t)
	st := openStore(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true}, 5*time.Second, true)
	v := newVendor(t, status(201))
	production := &retry.Orchestrator{Store: st}
	waived := &retry.Orchestrator{Store: st, Policy: effectspec.Policy{AllowUnsupportedWrites: true}}
	dispatch := func(b effectspec.BindingKind) (*retry.Dispatch, idempotency.Scope) {
		c := call(v.URL, spec(b), idempotency.NewKey(), nil)
		d, err := retry.NewDispatch(c.Spec, c.Route, c.Target)
		if err != nil {
			t.Fatal(err)
		}
		return d, c.Scope
	}
	header, scope := dispatch(effectspec.BindingHeader)
	unsupported, _ := dispatch(effectspec.BindingUnsupported)
	do := func(o *retry.Orchestrator, d *retry.Dispatch, s idempotency.Scope) error {
		_, err := o.Do(context.Background(), retry.Call{Scope: s, Key: idempotency.NewKey(), KeySource: idempotency.KeyMinted, Dispatch: d})
		return err
	}
	capability := idempotency.Scope{Workspace: "ws_acme", Tool: "cap.pay"}
	for name, tc := range map[string]struct {
		o     *retry.Orchestrator
		d     *retry.Dispatch
		scope idempotency.Scope
		want  error
	}{
		"binding in production":      {production, header, scope, nil},
		"unsupported in production":  {production, unsupported, scope, effectspec.ErrPolicyDenied},
		"unsupported waived":         {waived, unsupported, scope, nil},
		"capability":                 {production, header, capability, nil},
		"bad workspace":              {production, header, idempotency.Scope{Workspace: "ws:acme", Connection: scope.Connection, Tool: scope.Tool}, idempotency.ErrInvalidScope},
		"no workspace":               {production, header, idempotency.Scope{Connection: scope.Connection, Tool: scope.Tool}, idempotency.ErrInvalidScope},
		"bad connection":             {production, header, idempotency.Scope{Workspace: "ws_acme", Connection: "conn pay", Tool: scope.Tool}, idempotency.ErrInvalidScope},
		"capability with connection": {production, header, idempotency.Scope{Workspace: "ws_acme", Connection: scope.Connection, Tool: "cap.pay"}, idempotency.ErrInvalidScope},
		"other tool":                 {production, header, idempotency.Scope{Workspace: "ws_acme", Connection: scope.Connection, Tool: "pay.refund"}, nil},
		"no tool":                    {production, header, idempotency.Scope{Workspace: "ws_acme", Connection: scope.Connection}, idempotency.ErrInvalidScope},
	} {
		before := v.seen.Load()
		err := do(tc.o, tc.d, tc.scope)
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
		if sent := v.seen.Load() - before; (tc.want == nil) != (sent == 1) {
			t.Errorf("%s: the vendor saw %d requests", name, sent)
		}
	}
}
