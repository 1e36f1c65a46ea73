package mcpgateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/retry"
)

// exampleStore is a store on an in-process miniredis.
func exampleStore() (*redisstore.Store, func()) {
	store, closeStore, err := embedded.New(context.Background(), redisstore.Options{})
	if err != nil {
		panic(err)
	}
	return store, closeStore
}

// A gateway in front of a vendor that deduplicates on the Idempotency-Key
// header: the same call sent twice under one key reaches the vendor once,
// and the second answer is the replay.
func Example() {
	store, closeStore := exampleStore()
	defer closeStore()
	charges := 0
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		charges++
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id": "ch_1"}`)
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
	gw, err := mcpgateway.New(mcpgateway.Config{
		Orchestrator: &retry.Orchestrator{Store: store},
		Authenticate: func(token string) (string, bool) { return "ws_acme", token == "ob_live_acme" },
		Tools:        []mcpgateway.Tool{{Spec: spec, Connection: "conn_pay", Route: route, Target: target}},
	})
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
		fmt.Println(resp.StatusCode, resp.Header.Get("Idempotency-Key") == key,
			strings.Contains(string(answer), `"replayed":true`))
	}
	fmt.Println("vendor charges:", charges)
	// Output:
	// 200 true false
	// 200 true true
	// vendor charges: 1
}

// An in-process tool of a go-sdk server: its handler runs as the call's one
// attempt. The same key twice runs it once; the second answer is the replay.
func ExampleInProcess() {
	store, closeStore := exampleStore()
	defer closeStore()
	var notes []string
	spec, _ := effectspec.Parse([]byte(`{"tool": "notes.create", "effect": "write", "idempotency": {"binding": "in_process"}}`))
	tool, err := mcpgateway.InProcess(mcpgateway.InProcessTool{Spec: spec,
		Handler: func(_ context.Context, a retry.Attempt) (*mcp.CallToolResult, error) {
			notes = append(notes, string(a.Arguments))
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "saved"}}}, nil
		}})
	if err != nil {
		panic(err)
	}
	// The production policy denies in_process writes (an unknown one can
	// never be retried); a development server runs them.
	gw, err := mcpgateway.New(mcpgateway.Config{Tools: []mcpgateway.Tool{tool},
		Orchestrator: &retry.Orchestrator{Store: store, Policy: effectspec.Policy{Environment: effectspec.Development}}})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		panic(err)
	}
	defer session.Close()
	key := idempotency.NewKey().String()
	for range 2 {
		res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "notes.create",
			Arguments: map[string]any{"text": "buy milk"}, Meta: mcp.Meta{mcpgateway.MetaKey: key}})
		if err != nil {
			panic(err)
		}
		rc, _ := res.Meta[mcpgateway.MetaReceipt].(map[string]any)
		fmt.Println(res.Content[0].(*mcp.TextContent).Text, rc["outcome"], rc["replayed"])
	}
	fmt.Println("notes:", len(notes))
	// Output:
	// saved accepted false
	// saved accepted true
	// notes: 1
}

// A gateway in front of an upstream MCP server whose tool takes an
// idempotency_key argument: each attempt is one tools/call with the slot's
// key there, and Import lists the tool with the upstream's description
// and schema, less that argument. The same key twice runs the tool once.
func ExampleGateway_Import() {
	store, closeStore := exampleStore()
	defer closeStore()
	runs := map[string]int{} // by the idempotency_key the upstream got
	upstreamServer := mcp.NewServer(&mcp.Implementation{Name: "payco", Version: "1"}, nil)
	upstreamServer.AddTool(&mcp.Tool{Name: "create", Description: "Creates a payment.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer"},"idempotency_key":{"type":"string"}},` +
			`"required":["amount","idempotency_key"]}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args struct {
				IdempotencyKey string `json:"idempotency_key"`
			}
			json.Unmarshal(req.Params.Arguments, &args)
			runs[args.IdempotencyKey]++
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "paid"}}}, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer }, nil))
	defer up.Close()

	upstream := &retry.MCPUpstream{URL: up.URL}
	spec, _ := effectspec.Parse([]byte(`{"tool": "pay.create", "effect": "write", "idempotency": {"binding": "body_pointer", "pointer": "/idempotency_key"}}`))
	route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{Connection: "conn_payco", Provider: "payco",
		URL: upstream.URL, Credential: idempotency.NoCredential, UpstreamTool: "create"})
	if err != nil {
		panic(err)
	}
	gw, err := mcpgateway.New(mcpgateway.Config{Orchestrator: &retry.Orchestrator{Store: store},
		Tools: []mcpgateway.Tool{{Spec: spec, Connection: "conn_payco", Route: route, Target: upstream.Target("create"), Upstream: upstream}}})
	if err != nil {
		panic(err)
	}
	if err := gw.Import(context.Background()); err != nil {
		panic(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()

	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	session, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL}, nil)
	if err != nil {
		panic(err)
	}
	defer session.Close()
	tools, _ := session.ListTools(context.Background(), nil)
	schema, _ := json.Marshal(tools.Tools[0].InputSchema)
	fmt.Println(strings.SplitN(tools.Tools[0].Description, " Retry:", 2)[0], string(schema))
	key := idempotency.NewKey().String()
	for range 2 {
		res, err := session.CallTool(context.Background(), &mcp.CallToolParams{Name: "pay.create",
			Arguments: map[string]any{"amount": 500}, Meta: mcp.Meta{mcpgateway.MetaKey: key}})
		if err != nil {
			panic(err)
		}
		rc, _ := res.Meta[mcpgateway.MetaReceipt].(map[string]any)
		fmt.Println(res.Content[0].(*mcp.TextContent).Text, rc["outcome"], rc["replayed"])
	}
	for _, n := range runs {
		fmt.Println("upstream runs under the key:", n)
	}
	// Output:
	// Creates a payment. {"properties":{"amount":{"type":"integer"}},"required":["amount"],"type":"object"}
	// paid accepted false
	// paid accepted true
	// upstream runs under the key: 1
}
