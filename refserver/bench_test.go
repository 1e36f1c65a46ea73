package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/retry"
)

// benchServer serves the e2e configuration in process, on a store at addr.
func benchServer(b *testing.B, addr string, mini bool) (base string) {
	b.Helper()
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"obj_1","status":"ok"}`)
	}))
	b.Cleanup(vendor.Close)
	env := func(string) (string, bool) { return e2eSecret, true }
	cfg, err := loadConfig([]byte(strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendor.URL)), env, &retry.Executor{})
	if err != nil {
		b.Fatal(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(client.Close)
	st, err := redisstore.New(context.Background(), client, redisstore.Options{Prefix: cfg.Prefix, Lease: cfg.Lease, ReadTimeout: storeReadTimeout, SkipEvictionCheck: mini})
	if err != nil {
		b.Fatal(err)
	}
	s := newServer(cfg, st, st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	srv := httptest.NewServer(s.handler())
	b.Cleanup(srv.Close)
	return srv.URL
}

func postCall(b *testing.B, c *http.Client, base, key, body string) {
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+e2eKeyOne)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Idempotency-Key", key)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(out), `"outcome":"accepted"`) {
		b.Fatalf("%d %s", resp.StatusCode, out)
	}
}

const benchCapBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"cap.mail","arguments":{"to":"ada@example.com"}}}`

const benchBody = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge","arguments":{"amount":1200,"currency":"usd"}}}`

// benchCalls measures whole tools/call round trips over HTTP: a fresh key
// (claim, one vendor request, finalize) or a replay of one key.
func benchCalls(b *testing.B, base string) {
	c := &http.Client{}
	b.Run("fresh", func(b *testing.B) {
		keys := make([]string, b.N)
		for i := range keys {
			keys[i] = idempotency.NewKey().String()
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			postCall(b, c, base, keys[i], benchBody)
		}
	})
	b.Run("replay", func(b *testing.B) {
		k := idempotency.NewKey().String()
		postCall(b, c, base, k, benchBody)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			postCall(b, c, base, k, benchBody)
		}
	})
	// A capability replay adds the read of the shared pin (one GET) to the
	// claim.
	b.Run("capability-replay", func(b *testing.B) {
		k := idempotency.NewKey().String()
		postCall(b, c, base, k, benchCapBody)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			postCall(b, c, base, k, benchCapBody)
		}
	})
	b.Run("fresh-parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			c := &http.Client{}
			for pb.Next() {
				postCall(b, c, base, idempotency.NewKey().String(), benchBody)
			}
		})
	})
}

func BenchmarkToolsCallMiniredis(b *testing.B) {
	mr := miniredis.RunT(b)
	benchCalls(b, benchServer(b, mr.Addr(), true))
}

func BenchmarkToolsCallRedis(b *testing.B) {
	srv := redistest.Start(b)
	benchCalls(b, benchServer(b, srv.Addr(), false))
}

// BenchmarkFront measures the wrapper alone: auth, body read, key parse,
// peek.
func BenchmarkFront(b *testing.B) {
	s := newTestServer(b, &fakeStore{})
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
