package broker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/broker/nango"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// A federated tool through Nango: one request per attempt, Nango's retries
// off, and no key on the wire.
func Example() {
	fakeNango := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Printf("nango saw: %s %s Retries=%s X-Async=%s\n  body %s\n",
			r.Method, r.URL.Path, r.Header.Get("Retries"), r.Header.Get("X-Async"), body)
		w.WriteHeader(http.StatusCreated)
	}))
	defer fakeNango.Close()

	nb, err := nango.New(nango.Config{BaseURL: fakeNango.URL, Secret: "read-from-the-environment"})
	if err != nil {
		fmt.Println(err)
		return
	}
	spec, err := effectspec.Parse([]byte(`{"tool": "github.create_issue", "effect": "write",
		"route": "federated", "idempotency": {"binding": "unsupported"},
		"status": {"accepted": [200, 201], "definitely_rejected": [400, 404]}, "approval": "none"}`))
	if err == nil {
		err = broker.ValidateSpec(spec)
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	routing := map[string]string{"connection_id": "user-42", "provider_config_key": "github", "action": "create-issue"}
	target, route, err := broker.Prepare(nb, spec.Tool, routing)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("route:", route.Broker, route.Provider, route.Connection, route.Path)

	res := target.Send(context.Background(), retry.Attempt{
		Key:       idempotency.NewKey(),
		Number:    1,
		Arguments: json.RawMessage(`{"title": "Hello"}`),
		Spec:      spec,
	})
	fmt.Println(res.Phase, res.Status, spec.Classify(res.Status), "propagation", spec.Propagation())
	// Output:
	// route: nango github user-42 /action/trigger/create-issue
	// nango saw: POST /action/trigger Retries=0 X-Async=false
	//   body {"action_name":"create-issue","input":{"title": "Hello"}}
	// responded 201 accepted propagation none
}
