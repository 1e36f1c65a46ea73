package main

import (
	"context"
	"github.com/obol-gateway/obol/internal/nearmisstest"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
)

// nearMissVector is one published near-miss vector (DESIGN, section
// "refserver wire contract").
type nearMissVector = nearmisstest.Vector

func nearMissVectors(t testing.TB) []nearMissVector {
	t.Helper()
	return nearmisstest.Vectors(t, filepath.Join("..", "docs", "DESIGN.md"))
}

func nearMissBody(v nearMissVector, tool, key, ticket string) string {
	return nearmisstest.Body(v, tool, key, ticket, metaKey, metaTicket)
}

// TestNearMissThroughRefserver sends every published vector to the built
// refserver on a real Redis, as raw POSTs (so the names go on the wire
// exactly as written). A refused one is 400 malformed_key with no key in the
// answer, twice in a row: the vendor saw nothing and the store holds what it
// held before. An accepted one is served: the vendor acts once per call.
func TestNearMissThroughRefserver(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	vendor := newTestVendor(t)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendor.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())
	keys := func() []string {
		t.Helper()
		r, err := redis.Do("KEYS", "*")
		if err != nil {
			t.Fatal(err)
		}
		var ks []string
		for _, k := range r.([]any) {
			ks = append(ks, k.(string))
		}
		slices.Sort(ks)
		return ks
	}
	client := refservertest.Client{Base: p.base, APIKey: e2eKeyOne}
	post := func(v nearMissVector, key string) (*http.Response, []byte) {
		t.Helper()
		body := nearMissBody(v, "pay.charge", key, "apt_"+strings.TrimPrefix(idempotency.NewKey().String(), "idt_"))
		resp, b, err := client.Post(context.Background(), strings.NewReader(body), func(req *http.Request) {
			if v.Where == "header" {
				req.Header[v.Name] = []string{key} // on the wire as written
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}

	vs := nearMissVectors(t)
	before := keys()
	for _, v := range vs {
		if !v.Refused {
			continue
		}
		key := idempotency.NewKey().String()
		for i := range 2 { // the retry of a refused call is refused again
			resp, b := post(v, key)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("%s %q (try %d): %d %s", v.Where, v.Name, i+1, resp.StatusCode, b)
			}
			_, d := decodeWireError(t, b)
			if d.Reason != "malformed_key" || d.Status != 400 || d.IdempotencyKey != "" || resp.Header.Get(headerKey) != "" {
				t.Errorf("%s %q: data %+v, header %q", v.Where, v.Name, d, resp.Header.Get(headerKey))
			}
			if strings.Contains(string(b), key) {
				t.Errorf("%s %q: the refusal quotes the key: %s", v.Where, v.Name, b)
			}
		}
		if n := p.sent(t, vendor, "pay.charge", "/charge", key); n != 0 {
			t.Errorf("%s %q: the vendor saw %d requests", v.Where, v.Name, n)
		}
	}
	// The key as a trailer of a chunked request: on the wire, Go's server
	// announces it in r.Trailer.
	trailerKey := idempotency.NewKey().String()
	for range 2 {
		resp, b, err := client.Post(context.Background(), io.MultiReader(strings.NewReader(
			nearMissBody(nearMissVector{Where: "none"}, "pay.charge", "", ""))), func(req *http.Request) {
			req.Trailer = http.Header{headerKey: {trailerKey}}
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, d := decodeWireError(t, b); resp.StatusCode != http.StatusBadRequest || d.Reason != "malformed_key" || resp.Header.Get(headerKey) != "" {
			t.Errorf("trailer key: %d %s", resp.StatusCode, b)
		}
	}
	if n := vendor.count("/charge", ""); n != 0 {
		t.Fatalf("the vendor saw %d requests for refused calls", n)
	}
	if after := keys(); !slices.Equal(after, before) {
		t.Fatalf("refused calls changed the store: %v, before %v", after, before)
	}

	served := 0
	for _, v := range vs {
		if v.Refused {
			continue
		}
		key := idempotency.NewKey().String()
		resp, b := post(v, key)
		if v.Where == "_meta" && v.Name == metaTicket {
			// An unknown ticket: refused by the handler, for its own reason.
			if _, d := decodeWireError(t, b); d.Reason == "malformed_key" || d.Reason == "" {
				t.Errorf("%q: %d %s", v.Name, resp.StatusCode, b)
			}
			continue
		}
		served++
		if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"error"`) || strings.Contains(string(b), `"isError":true`) {
			t.Errorf("%s %q: %d %s", v.Where, v.Name, resp.StatusCode, b)
		}
		readsKey := v.Where == "header" && http.CanonicalHeaderKey(v.Name) == headerKey || v.Where == "_meta" && v.Name == metaKey
		if got := resp.Header.Get(headerKey); readsKey != (got == key) {
			t.Errorf("%s %q: effective key %s, the client's %s", v.Where, v.Name, got, key)
		}
		if n := vendor.count("/charge", ""); n != served {
			t.Errorf("%s %q: the vendor saw %d requests, want %d", v.Where, v.Name, n, served)
		}
	}
}
