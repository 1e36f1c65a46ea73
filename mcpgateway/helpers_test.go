package mcpgateway

import (
	"encoding/json"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// The tokens of the test gateway: two workspaces, acme with two keys.
var testTokens = map[string]string{
	"ob_live_acme_1": "ws_acme",
	"ob_live_acme_2": "ws_acme",
	"ob_live_globex": "ws_globex",
}

// newTestGateway serves, on st, a header tool, a body_pointer tool, a
// second header tool and a capability over the last two, each with an
// HTTP target no test reaches.
func newTestGateway(t testing.TB, st idempotency.Store) *Gateway {
	t.Helper()
	tool := func(spec, url, credential string) Tool {
		sp, err := effectspec.Parse([]byte(spec))
		if err != nil {
			t.Fatal(err)
		}
		rt, err := idempotency.NewRoute(sp, idempotency.RouteTarget{Connection: "conn_" + sp.Tool[:4], Provider: sp.Tool[:4], URL: url, Credential: credential})
		if err != nil {
			t.Fatal(err)
		}
		return Tool{Spec: sp, Connection: rt.Connection, Route: rt, Target: &retry.HTTPTarget{URL: url}}
	}
	charge := tool(`{"tool": "stripe.create_charge", "effect": "write", "idempotency": {"binding": "header", "header": "Idempotency-Key"},
		"status": {"accepted": [200, 201], "definitely_rejected": [400, 402], "retryable": [429, 503]}}`, "http://127.0.0.1:9/api/v1/charges", "VENDOR_KEY")
	sc, err := ParseInputSchema(json.RawMessage(`{"type":"object","properties":{"amount":{"type":"integer","minimum":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	charge.InputSchema = sc
	gw, err := New(Config{
		Orchestrator: &retry.Orchestrator{Store: st},
		Authenticate: func(tok string) (string, bool) { ws, ok := testTokens[tok]; return ws, ok },
		Tools: []Tool{
			charge,
			tool(`{"tool": "open.send", "idempotency": {"binding": "body_pointer", "pointer": "/meta/key"}, "status": {"accepted": [200]}}`,
				"https://open.example/send", idempotency.NoCredential),
			tool(`{"tool": "open.send2", "idempotency": {"binding": "header", "header": "X-Key"}, "status": {"accepted": [200]}}`,
				"https://open.example/send2", idempotency.NoCredential),
		},
		Capabilities: []Capability{{Name: "cap.send", Providers: []string{"open.send", "open.send2"}, Pin: "open.send2"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return gw
}
