package promhooks_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/mcpgateway/promhooks"
	"github.com/obol-gateway/obol/retry"
)

// A gateway counted in Prometheus metrics: one call sent twice under one key
// is one claim, one attempt and one replay; a call without credentials is a
// refusal, which the gateway's own hook still sees.
func Example() {
	store, closeStore, err := embedded.New(context.Background(), redisstore.Options{})
	if err != nil {
		panic(err)
	}
	defer closeStore()
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	defer vendor.Close()
	spec, _ := effectspec.Parse([]byte(`{"tool": "pay.charge", "effect": "write",
		"idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}`))
	target := &retry.HTTPTarget{URL: vendor.URL + "/v1/charges"}
	route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{Connection: "conn_pay", Provider: "pay",
		URL: target.URL, Credential: idempotency.NoCredential})
	if err != nil {
		panic(err)
	}

	refused := 0
	gc := mcpgateway.Config{
		Orchestrator: &retry.Orchestrator{Store: store},
		Authenticate: func(token string) (string, bool) { return "ws_acme", token == "ob_live_acme" },
		Tools:        []mcpgateway.Tool{{Spec: spec, Connection: "conn_pay", Route: route, Target: target}},
		OnRefusal:    func(string) { refused++ },
	}
	m := promhooks.New()
	m.Instrument(&gc)
	gw, err := mcpgateway.New(gc)
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()

	key := idempotency.NewKey().String()
	for _, token := range []string{"ob_live_acme", "ob_live_acme", "wrong"} {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge","arguments":{"amount":500}}}`
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, line := range strings.Split(rec.Body.String(), "\n") {
		for _, want := range []string{"obol_claims_total{", "obol_attempts_total{", "obol_outcomes_total{", "obol_replays_total ",
			"obol_refusals_total{", `obol_store_duration_seconds_count{op="claim"}`, `obol_call_duration_seconds_count{result="accepted"}`} {
			if strings.HasPrefix(line, want) {
				fmt.Println(line)
			}
		}
	}
	fmt.Println("refusals the gateway's hook saw:", refused)
	// Output:
	// obol_attempts_total{phase="responded"} 1
	// obol_call_duration_seconds_count{result="accepted"} 2
	// obol_claims_total{result="claimed"} 1
	// obol_claims_total{result="replay"} 1
	// obol_outcomes_total{outcome="accepted"} 2
	// obol_refusals_total{reason="unauthorized"} 1
	// obol_replays_total 1
	// obol_store_duration_seconds_count{op="claim"} 2
	// refusals the gateway's hook saw: 1
}
