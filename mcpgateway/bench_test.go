package mcpgateway

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// benchServer serves the e2e configuration in process, on a store at addr.
// BenchmarkFront measures the wrapper alone: auth, body read, key parse,
// peek.
func BenchmarkFront(b *testing.B) {
	s := newTestGateway(b, &fakeStore{})
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	h := s.mcpFront(next)
	for _, tc := range []struct{ name, key string }{{"supplied", goodKey}, {"minted", ""}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(callBody))
				req.Header.Set("Authorization", acmeAuth)
				if tc.key != "" {
					req.Header.Set("Idempotency-Key", tc.key)
				}
				h.ServeHTTP(httptest.NewRecorder(), req)
			}
		})
	}
}

// envelopeCall is a tools/call message as an MCP client sends it, whose
// arguments (an order with line items, some text with escapes) are about
// argBytes long. (The same body as internal/strictjson's benchmarks.)
func envelopeCall(argBytes int) []byte {
	var args strings.Builder
	args.WriteString(`{"customer":{"id":"cus_9f8e7d6c5b4a","email":"ada@example.com","name":"Ada Lovelace"},"currency":"eur","amount":12999,"note":"Leave at the door \u2014 ring twice.\nThanks!","items":[`)
	for i := 0; args.Len() < argBytes-40; i++ {
		if i > 0 {
			args.WriteByte(',')
		}
		fmt.Fprintf(&args, `{"sku":"SKU-%05d","qty":%d,"price":%d.99,"title":"Item %d \"deluxe\"","tags":["blue","size-m"],"gift":%v}`, i, i%4+1, 10+i, i, i%2 == 0)
	}
	args.WriteString(`],"metadata":{"source":"agent","attempt":1}}`)
	return []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"shop.place_order","arguments":` + args.String() +
		`,"_meta":{"progressToken":"p-42","dev.obol/idempotency-key":"idt_0123456789abcdef0123456789abcdef"}}}`)
}

// BenchmarkParseEnvelope measures the front's one strict reading of a
// tools/call message.
func BenchmarkParseEnvelope(b *testing.B) {
	for _, sz := range []struct {
		name string
		args int
	}{{"300B", 300}, {"4KiB", 4096}} {
		body := envelopeCall(sz.args)
		b.Run(sz.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if env, ferr := parseEnvelope(body); ferr != nil || !env.call || env.metaKey == nil {
					b.Fatalf("%+v %v", env, ferr)
				}
			}
		})
	}
}

// benchVendorBody is the vendor's answer of examples/bench.
const benchVendorBody = `{"id":"ch_1","object":"charge","amount":1200,"currency":"usd","status":"succeeded"}`

// BenchmarkToolsCall measures a whole tools/call through the gateway's HTTP
// handler on miniredis, with a target that answers 201 at once: the claim,
// the finalize, the SDK and the front. "new" sends a fresh key each time,
// "replay" one key again.
func BenchmarkToolsCall(b *testing.B) {
	sp, err := effectspec.Parse([]byte(`{"tool": "shop.place_order", "effect": "write", "idempotency": {"binding": "header", "header": "Idempotency-Key"},
		"status": {"accepted": [200, 201], "definitely_rejected": [400], "retryable": [503]}}`))
	if err != nil {
		b.Fatal(err)
	}
	rt, err := idempotency.NewRoute(sp, idempotency.RouteTarget{Connection: "conn_shop", Provider: "shop", URL: "http://127.0.0.1:9/charges", Credential: idempotency.NoCredential})
	if err != nil {
		b.Fatal(err)
	}
	target := retry.TargetFunc(func(context.Context, retry.Attempt) retry.Result {
		return retry.Result{Phase: retry.Responded, Status: http.StatusCreated, Body: []byte(benchVendorBody)}
	})
	gateway := func(st idempotency.Store) *Gateway {
		gw, err := New(Config{
			Orchestrator: &retry.Orchestrator{Store: st},
			Logger:       slog.New(slog.DiscardHandler),
			Tools:        []Tool{{Spec: sp, Connection: rt.Connection, Route: rt, Target: target}},
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(gw.Close)
		return gw
	}
	st := miniStore(b)
	gw := gateway(st)
	body := envelopeCall(300)
	// The envelope's _meta key is replaced by the header's.
	body = bytes.Replace(body, []byte(`,"dev.obol/idempotency-key":"idt_0123456789abcdef0123456789abcdef"`), nil, 1)
	call := func(b *testing.B, gw *Gateway, key string) {
		req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(HeaderKey, key)
		w := httptest.NewRecorder()
		gw.ServeHTTP(w, req)
		if w.Code != http.StatusOK || !bytes.Contains(w.Body.Bytes(), []byte(`"structuredContent"`)) {
			b.Fatalf("%d %s", w.Code, w.Body.Bytes())
		}
	}
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		i := 0
		for b.Loop() {
			i++
			call(b, gw, fmt.Sprintf("idt_%032x", i))
		}
	})
	const replayKey = "idt_ffffffffffffffffffffffffffffffff"
	b.Run("replay", func(b *testing.B) {
		b.ReportAllocs()
		call(b, gw, replayKey)
		defer reportCPU(b)()
		for b.Loop() {
			call(b, gw, replayKey)
		}
	})
	// Without Redis: every claim answers the record replayKey left, so
	// what is measured is the gateway's own work on a replay.
	call(b, gw, replayKey)
	k, _ := idempotency.ParseKey(replayKey)
	rec, err := st.Lookup(context.Background(), idempotency.Scope{Workspace: unauthenticatedWorkspace, Connection: rt.Connection, Tool: sp.Tool}, k)
	if err != nil {
		b.Fatal(err)
	}
	fixed := gateway(&replayStore{rec: rec})
	b.Run("replay-nostore", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			call(b, fixed, replayKey)
		}
	})
}

// replayStore answers every claim with rec, a final record.
type replayStore struct {
	fakeStore
	rec idempotency.Record
}

func (s *replayStore) Claim(context.Context, idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	rec := s.rec
	return idempotency.ClaimResult{Status: idempotency.StatusReplay, Record: &rec}, nil
}

// reportCPU starts counting the process's CPU time; the function it returns
// reports it per op as cpu-ns/op (miniredis and the GC included), the
// figure to compare on a machine other work shares.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() { b.ReportMetric(float64(processCPU()-start)/float64(b.N), "cpu-ns/op") }
}
