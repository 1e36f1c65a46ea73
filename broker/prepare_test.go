package broker_test

import (
	"context"
	"errors"
	"testing"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// refuser is a Broker whose Route refuses every routing.
type refuser struct{ recorder }

var errNoRoute = errors.New("no route")

func (*refuser) Route(string, map[string]string) (idempotency.Route, error) {
	return idempotency.Route{}, errNoRoute
}

// preparing is a Broker with its own Prepare, which broker.Prepare must use.
type preparing struct {
	recorder
	prepared int
}

func (p *preparing) Prepare(tool string, routing map[string]string) (retry.Target, idempotency.Route, error) {
	p.prepared++
	return broker.Target(p, tool, routing), idempotency.Route{Tool: tool, Broker: "preparing"}, nil
}

// TestPrepareFallsBack: a Broker without Prepare gets Route's route and a
// Target of a copy of routing; a Route error is Prepare's, with no target.
func TestPrepareFallsBack(t *testing.T) {
	rec := &recorder{}
	routing := map[string]string{"connection_id": "c1"}
	target, rt, err := broker.Prepare(rec, "github.create_issue", routing)
	if err != nil || rt.Broker != "recorder" || rt.Tool != "github.create_issue" {
		t.Fatalf("Prepare = %+v, %v", rt, err)
	}
	routing["connection_id"] = "changed later"
	a := retry.Attempt{Key: idempotency.NewKey(), Number: 1,
		Spec: spec(effectspec.RouteFederated, effectspec.Binding{Kind: effectspec.BindingUnsupported})}
	if res := target.Send(context.Background(), a); res.Phase != retry.Responded {
		t.Fatalf("Send = %+v", res)
	}
	if len(rec.calls) != 1 || rec.calls[0].Routing["connection_id"] != "c1" {
		t.Fatalf("calls = %+v", rec.calls)
	}

	target, _, err = broker.Prepare(&refuser{}, "t", nil)
	if !errors.Is(err, errNoRoute) || target != nil {
		t.Fatalf("Prepare of a refused routing = %v, %v", target, err)
	}
}

func TestPrepareUsesBrokersPrepare(t *testing.T) {
	p := &preparing{}
	_, rt, err := broker.Prepare(p, "t", nil)
	if err != nil || rt.Broker != "preparing" || p.prepared != 1 {
		t.Fatalf("Prepare = %+v, %v after %d calls of the broker's Prepare", rt, err, p.prepared)
	}
}
