package gatewayconfig_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/mcpgateway/gatewayconfig"
	"github.com/obol-gateway/obol/retry"
)

// A configuration file served as a gateway: the same call sent twice under
// one key reaches the vendor once, and the second answer is the replay.
func Example() {
	charges := 0
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		charges++
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id": "ch_1"}`)
	}))
	defer vendor.Close()
	file := `{"environment": "production", "lease": "10s",
	  "workspaces": [{"id": "ws_acme", "api_keys": ["ob_live_acme"]}],
	  "connections": [{"id": "conn_pay", "provider": "pay", "base_url": "` + vendor.URL + `", "secret_env": "PAY_KEY"}],
	  "tools": [{"connection": "conn_pay", "path": "/v1/charges",
	    "spec": {"tool": "pay.charge", "effect": "write", "route": "native",
	      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}}]}`
	getenv := func(string) (string, bool) { return "sk_example_0123456789", true }
	cfg, err := gatewayconfig.Load([]byte(file), gatewayconfig.Options{Getenv: getenv})
	if err != nil {
		panic(err)
	}

	store, closeStore, err := embedded.New(context.Background(), cfg.Store)
	if err != nil {
		panic(err)
	}
	defer closeStore()
	gc := cfg.Gateway()
	gc.Orchestrator = &retry.Orchestrator{Store: store, Policy: cfg.Policy}
	gw, err := mcpgateway.New(gc)
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()

	key := idempotency.NewKey().String()
	for range 2 {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge","arguments":{"amount":500}}}`
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer ob_live_acme")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, strings.Contains(string(answer), `"replayed":true`))
	}
	fmt.Println("vendor charges:", charges)
	// Output:
	// 200 false
	// 200 true
	// vendor charges: 1
}

// A file with problems is refused whole: every problem, by field path, and
// never a value (a value may be a key). Production and staging refuse a
// key that holds the template's REPLACE_ME placeholder.
func ExampleError() {
	_, err := gatewayconfig.Load([]byte(`{"environment": "production", "lease": "soon",
	  "workspaces": [{"id": "ws acme", "api_keys": ["short", "ob_live_REPLACE_ME_acme"]}]}`),
		gatewayconfig.Options{})
	fmt.Println(err)
	// Output:
	// gatewayconfig: lease: "soon" is not a positive duration such as "30s"
	//   workspaces[0].id: must be 1 to 128 of [A-Za-z0-9_.-]
	//   workspaces[0].api_keys[0]: must be 8 to 256 bytes
	//   workspaces[0].api_keys[1]: the template's REPLACE_ME placeholder: replace it with a key of your own (production refuses it)
	//   tools: at least one is required
}
