package broker_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// recorder is a Broker that records its calls and answers 200.
type recorder struct{ calls []broker.Call }

func (r *recorder) Dispatch(_ context.Context, c broker.Call) retry.Result {
	r.calls = append(r.calls, c)
	return retry.Result{Phase: retry.Responded, Status: 200}
}

func (r *recorder) Route(tool string, _ map[string]string) (idempotency.Route, error) {
	return idempotency.Route{Tool: tool, Binding: effectspec.BindingUnsupported, Broker: "recorder"}, nil
}

func spec(route effectspec.RouteKind, b effectspec.Binding) effectspec.Spec {
	return effectspec.Spec{Tool: "github.create_issue", Route: route, Idempotency: b}
}

func TestTarget(t *testing.T) {
	rec := &recorder{}
	routing := map[string]string{"connection_id": "c1"}
	target := broker.Target(rec, "github.create_issue", routing)
	routing["connection_id"] = "changed later" // Target keeps its own copy

	a := retry.Attempt{
		Key:       idempotency.NewKey(),
		Number:    2,
		Arguments: json.RawMessage(`{"title":"x"}`),
		Spec:      spec(effectspec.RouteFederated, effectspec.Binding{Kind: effectspec.BindingUnsupported}),
	}
	for range 2 {
		if res := target.Send(context.Background(), a); res.Phase != retry.Responded || res.Status != 200 {
			t.Fatalf("Send = %+v", res)
		}
	}
	if len(rec.calls) != 2 {
		t.Fatalf("Dispatch called %d times, want once per Send", len(rec.calls))
	}
	c := rec.calls[0]
	if c.Tool != "github.create_issue" || string(c.Arguments) != `{"title":"x"}` || c.Attempt != 2 || c.Routing["connection_id"] != "c1" {
		t.Errorf("call = %+v", c)
	}
	c.Routing["connection_id"] = "mutated by a broker"
	if rec.calls[1].Routing["connection_id"] != "c1" {
		t.Errorf("a broker's change to one call's routing leaked into the next")
	}
}

func TestTargetRefusesBeforeSending(t *testing.T) {
	for name, s := range map[string]effectspec.Spec{
		"native":         spec(effectspec.RouteNative, effectspec.Binding{}),
		"zero route":     spec("", effectspec.Binding{}),
		"header binding": spec(effectspec.RouteFederated, effectspec.Binding{Kind: effectspec.BindingHeader, Header: "Idempotency-Key"}),
		"pointer":        spec(effectspec.RouteFederated, effectspec.Binding{Kind: effectspec.BindingBodyPointer, Pointer: "/key"}),
	} {
		t.Run(name, func(t *testing.T) {
			rec := &recorder{}
			res := broker.Target(rec, "t", nil).Send(context.Background(), retry.Attempt{Number: 1, Spec: s})
			if res.Phase != retry.BeforeSend || len(rec.calls) != 0 {
				t.Fatalf("Send = %+v after %d dispatches, want before_send and none", res, len(rec.calls))
			}
			var re *retry.Error
			if !errors.As(res.Err, &re) || re.Phase != retry.BeforeSend || !errors.Is(res.Err, idempotency.ErrInvalidRequest) {
				t.Errorf("err = %v, want a before_send retry.Error with ErrInvalidRequest", res.Err)
			}
			var fe *effectspec.FieldError
			if !errors.As(res.Err, &fe) || fe.Subject != "github.create_issue" {
				t.Errorf("err = %v, want a FieldError of the spec", res.Err)
			}
		})
	}
}

func TestValidateSpec(t *testing.T) {
	tests := []struct {
		name string
		spec effectspec.Spec
		want error
	}{
		{"unsupported", spec(effectspec.RouteFederated, effectspec.Binding{Kind: effectspec.BindingUnsupported}), nil},
		{"zero binding", spec(effectspec.RouteFederated, effectspec.Binding{}), nil},
		{"native", spec(effectspec.RouteNative, effectspec.Binding{Kind: effectspec.BindingUnsupported}), broker.ErrNotFederated},
		{"zero route reads native", spec("", effectspec.Binding{}), broker.ErrNotFederated},
		{"header", spec(effectspec.RouteFederated, effectspec.Binding{Kind: effectspec.BindingHeader, Header: "Idempotency-Key"}), broker.ErrVendorBinding},
		{"body pointer", spec(effectspec.RouteFederated, effectspec.Binding{Kind: effectspec.BindingBodyPointer, Pointer: "/k"}), broker.ErrVendorBinding},
		{"stray header", spec(effectspec.RouteFederated, effectspec.Binding{Kind: effectspec.BindingUnsupported, Header: "X-Key"}), broker.ErrVendorBinding},
		{"unknown kind", spec(effectspec.RouteFederated, effectspec.Binding{Kind: "query"}), broker.ErrVendorBinding},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := broker.ValidateSpec(tc.spec)
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("ValidateSpec = %v, want %v", err, tc.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "broker: github.create_issue: ") {
				t.Errorf("message %q does not name the tool", err)
			}
		})
	}
	// A parsed federated spec passes, and it propagates nothing.
	s, err := effectspec.Parse([]byte(`{"tool":"github.create_issue","effect":"write","route":"federated",
		"idempotency":{"binding":"unsupported"},"status":{"accepted":[200]},"approval":"none"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := broker.ValidateSpec(s); err != nil || s.Propagation() != effectspec.PropagationNone {
		t.Errorf("ValidateSpec = %v, propagation %s", err, s.Propagation())
	}
}

func TestErrorMessages(t *testing.T) {
	fe := &effectspec.FieldError{Err: broker.ErrRetriesEnabled, Subject: "nango", Field: "Retries", Problem: "is 3, must be 0"}
	if got := fe.Error(); got != "broker: nango: Retries: is 3, must be 0" {
		t.Errorf("FieldError = %q", got)
	}
	if !errors.Is(fe, broker.ErrRetriesEnabled) {
		t.Errorf("FieldError does not unwrap to its sentinel")
	}
	long := strings.Repeat("x", 100) + "\n\"forged\""
	se := broker.ValidateSpec(effectspec.Spec{Tool: long, Route: effectspec.RouteFederated, Idempotency: effectspec.Binding{Kind: effectspec.BindingHeader}})
	if msg := se.Error(); strings.Contains(msg, "\n") || strings.Contains(msg, long) || !strings.Contains(msg, "binding: must be \"unsupported\"") {
		t.Errorf("spec error = %q", msg)
	}
	res := broker.Refused(fe)
	if res.Phase != retry.BeforeSend || !errors.Is(res.Err, broker.ErrRetriesEnabled) || !errors.Is(res.Err, idempotency.ErrInvalidRequest) {
		t.Errorf("Refused = %+v", res)
	}
	if res.Err.Error() != "retry: before_send: request: invalid request" {
		t.Errorf("Refused message = %q", res.Err)
	}
}
