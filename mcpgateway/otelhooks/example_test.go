package otelhooks_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/mcpgateway"
	"github.com/obol-gateway/obol/mcpgateway/otelhooks"
	"github.com/obol-gateway/obol/retry"
)

// A traced call: the tools/call span is a root whatever the client sends,
// the vendor sees the traceparent of the gateway's attempt, and no span
// holds the key.
func Example() {
	store, closeStore, err := embedded.New(context.Background(), redisstore.Options{})
	if err != nil {
		panic(err)
	}
	defer closeStore()
	var vendorTrace string
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vendorTrace = r.Header.Get("Traceparent")
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

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	gc := mcpgateway.Config{
		Orchestrator: &retry.Orchestrator{Store: store},
		Authenticate: func(token string) (string, bool) { return "ws_acme", token == "ob_live_acme" },
		Tools:        []mcpgateway.Tool{{Spec: spec, Connection: "conn_pay", Route: route, Target: target}},
	}
	otelhooks.Instrument(&gc, tp)
	gw, err := mcpgateway.New(gc)
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()

	key := idempotency.NewKey().String()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge","arguments":{"amount":500}}}`
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer ob_live_acme")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()

	for _, s := range spans.Ended() {
		if s.Name() != "tools/call" {
			continue
		}
		var attrs []string
		for _, a := range s.Attributes() {
			attrs = append(attrs, string(a.Key)+"="+a.Value.String())
		}
		sort.Strings(attrs)
		fmt.Println(s.Name(), "root:", !s.Parent().IsValid(), "links:", len(s.Links()))
		fmt.Println(strings.Join(attrs, "\n"))
		fmt.Println("vendor in this trace:", strings.Contains(vendorTrace, s.SpanContext().TraceID().String()))
		fmt.Println("key in a span:", strings.Contains(fmt.Sprint(s.Attributes()), key))
	}
	// Output:
	// tools/call root: true links: 1
	// mcp.method.name=tools/call
	// obol.attempt_count=1
	// obol.key_source=supplied
	// obol.outcome=accepted
	// obol.replayed=false
	// obol.tool=pay.charge
	// obol.vendor.status=201
	// obol.workspace=ws_acme
	// vendor in this trace: true
	// key in a span: false
}
