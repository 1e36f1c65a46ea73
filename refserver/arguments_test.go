package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"

	"github.com/obol-gateway/obol/idempotency"
)

// TestNullArgumentsAreEmpty: "arguments": null hashes as {} (as absent
// arguments do), so it is accepted and sent as {} with the key at the body
// pointer, and a retry of the same key with {} or without arguments is a
// replay, not a request mismatch.
func TestNullArgumentsAreEmpty(t *testing.T) {
	mr := miniredis.RunT(t)
	vendor := newGateVendor(t)
	p := gateway(t, mr, vendor.URL)
	key := idempotency.NewKey().String()
	for i, params := range []string{
		`{"name":"mail.b","arguments":null}`,
		`{"name":"mail.b","arguments":{}}`,
		`{"name":"mail.b"}`,
		`{"name":"mail.b","arguments": null }`,
	} {
		resp, b := rawPost(t, p.base, http.MethodPost, e2eKeyOne, key,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":`+params+`}`)
		want := `"replayed":true`
		if i == 0 {
			want = `"replayed":false`
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Fatalf("%s: %d %s, want %s", params, resp.StatusCode, b, want)
		}
	}
	if n := vendor.requests(); n != 1 {
		t.Fatalf("the vendor saw %d requests, want 1", n)
	}
}
