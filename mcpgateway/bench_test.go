package mcpgateway

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
