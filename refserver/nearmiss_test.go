package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

// nearMissVector is one row of the test vectors docs/DESIGN.md, "refserver wire
// contract" publishes: where the name goes, the name as a JSON string (escapes
// as written) and its verdict.
type nearMissVector struct {
	where   string // "_meta", "params" or "header"
	raw     string // the name as a JSON string literal
	name    string // raw unescaped
	refused bool
}

// nearMissVectors reads the published vectors, so the document and the
// tests cannot drift apart.
func nearMissVectors(t testing.TB) []nearMissVector {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	var vs []nearMissVector
	count := map[string]int{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) != 5 || cells[0] != "" || cells[4] != "" {
			continue
		}
		where := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if where != "_meta" && where != "params" && where != "header" {
			continue
		}
		v := nearMissVector{where: where, raw: strings.Trim(strings.TrimSpace(cells[2]), "`")}
		if err := json.Unmarshal([]byte(v.raw), &v.name); err != nil {
			t.Fatalf("vector %s: %v", v.raw, err)
		}
		switch verdict := strings.TrimSpace(cells[3]); {
		case strings.HasPrefix(verdict, "refused"):
			v.refused = true
		case !strings.HasPrefix(verdict, "accepted"):
			t.Fatalf("vector %s: verdict %q", v.raw, verdict)
		}
		vs = append(vs, v)
		count[fmt.Sprintf("%s %v", where, v.refused)]++
	}
	// A table that no longer parses must not pass as an empty one.
	for _, k := range []string{"_meta true", "_meta false", "params true", "header true", "header false"} {
		if count[k] < 2 {
			t.Fatalf("DESIGN.md has %d near-miss vectors for %q; the table did not parse", count[k], k)
		}
	}
	return vs
}

// nearMissBody is a tools/call of tool (or, when tool is "", a tools/list)
// that carries v with key (or, for the ticket's name, ticket) as its value.
func nearMissBody(v nearMissVector, tool, key, ticket string) string {
	params := ``
	switch v.where {
	case "_meta":
		val := `"` + key + `"`
		if v.name == metaTicket {
			val = `"` + ticket + `"`
		}
		params = `"_meta":{` + v.raw + `:` + val + `}`
	case "params":
		params = v.raw + `:{"` + metaKey + `":"` + key + `"}`
	}
	if tool == "" {
		if params == "" {
			return `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
		}
		return `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{` + params + `}}`
	}
	if params != "" {
		params = "," + params
	}
	return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"amount":1}` + params + `}}`
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
	p := startRefserver(t, buildRefserver(t), "-config", cfgPath, "-redis", "redis://"+redis.Addr())
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
	post := func(v nearMissVector, key string) (*http.Response, []byte) {
		t.Helper()
		body := nearMissBody(v, "pay.charge", key, "apt_"+strings.TrimPrefix(idempotency.NewKey().String(), "idt_"))
		req, _ := http.NewRequest(http.MethodPost, p.base+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e2eKeyOne)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if v.where == "header" {
			req.Header[v.name] = []string{key} // on the wire as written
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, b
	}

	vs := nearMissVectors(t)
	before := keys()
	for _, v := range vs {
		if !v.refused {
			continue
		}
		key := idempotency.NewKey().String()
		for i := range 2 { // the retry of a refused call is refused again
			resp, b := post(v, key)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("%s %q (try %d): %d %s", v.where, v.name, i+1, resp.StatusCode, b)
			}
			_, d := decodeWireError(t, b)
			if d.Reason != "malformed_key" || d.Status != 400 || d.IdempotencyKey != "" || resp.Header.Get(headerKey) != "" {
				t.Errorf("%s %q: data %+v, header %q", v.where, v.name, d, resp.Header.Get(headerKey))
			}
			if strings.Contains(string(b), key) {
				t.Errorf("%s %q: the refusal quotes the key: %s", v.where, v.name, b)
			}
		}
		if n := p.sent(t, vendor, "pay.charge", "/charge", key); n != 0 {
			t.Errorf("%s %q: the vendor saw %d requests", v.where, v.name, n)
		}
	}
	// The key as a trailer of a chunked request: on the wire, Go's server
	// announces it in r.Trailer.
	trailerKey := idempotency.NewKey().String()
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, p.base+"/mcp", io.MultiReader(strings.NewReader(
			nearMissBody(nearMissVector{where: "none"}, "pay.charge", "", ""))))
		req.Header.Set("Authorization", "Bearer "+e2eKeyOne)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Trailer = http.Header{headerKey: {trailerKey}}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
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
		if v.refused {
			continue
		}
		key := idempotency.NewKey().String()
		resp, b := post(v, key)
		if v.where == "_meta" && v.name == metaTicket {
			// An unknown ticket: refused by the handler, for its own reason.
			if _, d := decodeWireError(t, b); d.Reason == "malformed_key" || d.Reason == "" {
				t.Errorf("%q: %d %s", v.name, resp.StatusCode, b)
			}
			continue
		}
		served++
		if resp.StatusCode != http.StatusOK || strings.Contains(string(b), `"error"`) || strings.Contains(string(b), `"isError":true`) {
			t.Errorf("%s %q: %d %s", v.where, v.name, resp.StatusCode, b)
		}
		readsKey := v.where == "header" && http.CanonicalHeaderKey(v.name) == headerKey || v.where == "_meta" && v.name == metaKey
		if got := resp.Header.Get(headerKey); readsKey != (got == key) {
			t.Errorf("%s %q: effective key %s, the client's %s", v.where, v.name, got, key)
		}
		if n := vendor.count("/charge", ""); n != served {
			t.Errorf("%s %q: the vendor saw %d requests, want %d", v.where, v.name, n, served)
		}
	}
}
