package retry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/retry"
)

// One call and its replay: the first Do claims the key, sends one attempt
// and finalizes it; the second, with the same key and arguments, replays the
// stored answer without a request to the vendor.
func ExampleOrchestrator_Do() {
	ctx := context.Background()
	store, closeStore, err := embedded.New(ctx, redisstore.Options{})
	if err != nil {
		panic(err)
	}
	defer closeStore()

	var requests atomic.Int32
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"ch_1","status":"succeeded"}`)
	}))
	defer vendor.Close()

	// Specs come from effectspec.Parse (or ParseList, New): Do refuses one
	// that was not validated.
	spec, err := effectspec.Parse([]byte(`{"tool": "payments.create_charge", "effect": "write", "route": "native",
		"idempotency": {"binding": "header", "header": "Idempotency-Key"},
		"status": {"accepted": [200, 201], "definitely_rejected": [400, 402], "retryable": [503]}}`))
	if err != nil {
		panic(err)
	}

	o := &retry.Orchestrator{Store: store}
	target := &retry.HTTPTarget{URL: vendor.URL + "/v1/charges"}
	// Every fact the claim pins, from the spec and where the call goes.
	route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{
		Connection: "conn_pay", Provider: "demopay", URL: target.URL,
		Credential: idempotency.NoCredential, // this vendor takes no credential
	})
	if err != nil {
		panic(err)
	}
	key, source, _ := idempotency.FromHeader([]string{"idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60"})
	call := retry.Call{
		Scope:     idempotency.Scope{Workspace: "ws_acme", Connection: "conn_pay", Tool: spec.Tool},
		Key:       key,
		KeySource: source,
		Arguments: []byte(`{"amount":1200,"currency":"usd"}`),
		Spec:      spec,
		Route:     route,
		Target:    target,
	}
	for range 2 {
		out, err := o.Do(ctx, call)
		if err != nil {
			panic(err)
		}
		rc := out.Receipt
		fmt.Printf("outcome %s, attempt_count %d, replayed %t: %d %s\n",
			rc.Outcome, rc.AttemptCount, rc.Replayed, out.Result.Status, out.Result.Body)
	}
	fmt.Println("vendor requests:", requests.Load())
	// Output:
	// outcome accepted, attempt_count 1, replayed false: 201 {"id":"ch_1","status":"succeeded"}
	// outcome accepted, attempt_count 1, replayed true: 201 {"id":"ch_1","status":"succeeded"}
	// vendor requests: 1
}
