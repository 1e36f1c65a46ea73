package retry_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/retry"
)

// charge is the README's "Using the library" snippet, line for line between
// the markers (TestREADMESnippet keeps the two the same), in a gateway's
// handler: r is the client's request, args its arguments, auth the
// vendor's Authorization header.
func charge(ctx context.Context, store idempotency.Store, r *http.Request, args []byte, spec effectspec.Spec,
	auth http.Header, stripeURL string) (retry.Answer, error) {
	// README begin
	// Once per gateway, and per tool at configuration:
	o := &retry.Orchestrator{Store: store} // store: redisstore.New(ctx, client, redisstore.Options{})
	target := &retry.HTTPTarget{URL: stripeURL + "/v1/charges", Header: auth}
	route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{
		Connection: "conn_stripe", Provider: "stripe", URL: target.URL,
		Credential: "STRIPE_SECRET_KEY", // names the vendor account, never holds its key
	})
	if err != nil {
		return retry.Answer{}, err
	}

	// Per call:
	key, source, err := idempotency.FromHeader(r.Header.Values("Idempotency-Key"))
	if err != nil {
		return retry.Answer{}, err // malformed_key: never replaced by a minted key
	}
	out, err := o.Do(ctx, retry.Call{
		Scope: idempotency.Scope{Workspace: "ws_acme", Connection: "conn_stripe", Tool: spec.Tool},
		Key:   key, KeySource: source,
		Arguments: args, Spec: spec, Route: route, Target: target,
	})
	// README end
	return out, err
}

// The README's snippet, run twice with one key against a stand-in vendor:
// one request reaches it, the second call replays.
func Example_readme() {
	ctx := context.Background()
	store, closeStore, err := embedded.New(ctx, redisstore.Options{})
	if err != nil {
		panic(err)
	}
	defer closeStore()
	var requests atomic.Int32
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"ch_1"}`)
	}))
	defer vendor.Close()
	spec, err := effectspec.Parse([]byte(`{"tool": "stripe.create_charge", "effect": "write", "route": "native",
		"idempotency": {"binding": "header", "header": "Idempotency-Key"},
		"status": {"accepted": [200, 201], "definitely_rejected": [400, 402], "retryable": [503]}}`))
	if err != nil {
		panic(err)
	}
	auth := http.Header{"Authorization": {"Bearer sk_test_0123456789abcdef"}}
	r := httptest.NewRequest(http.MethodPost, "/charges", nil)
	r.Header.Set("Idempotency-Key", "idt_5c1f0a9e2b7d4c3e8f6a1b2c3d4e5f60")
	for range 2 {
		out, err := charge(ctx, store, r, []byte(`{"amount":1200,"currency":"usd"}`), spec, auth, vendor.URL)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%s, replayed %t: %d %s\n", out.Receipt.Outcome, out.Receipt.Replayed, out.Result.Status, out.Result.Body)
	}
	fmt.Println("vendor requests:", requests.Load())
	// Output:
	// accepted, replayed false: 201 {"id":"ch_1"}
	// accepted, replayed true: 201 {"id":"ch_1"}
	// vendor requests: 1
}

// TestREADMESnippet: the README's library snippet is the code Example_readme
// runs, so it compiles and works as shown.
func TestREADMESnippet(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := bytes.Cut(readme, []byte("## Using the library\n\n```go\n"))
	if !ok {
		t.Fatal(`README.md: no "## Using the library" Go block`)
	}
	snippet, _, ok := bytes.Cut(after, []byte("```\n"))
	if !ok {
		t.Fatal("README.md: the library block does not end")
	}
	src, err := os.ReadFile("readme_example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := bytes.Cut(src, []byte("\t// README begin\n"))
	body, _, _ = bytes.Cut(body, []byte("\t// README end\n"))
	var want strings.Builder
	for line := range strings.Lines(string(body)) {
		want.WriteString(strings.TrimPrefix(line, "\t"))
	}
	if string(snippet) != want.String() {
		t.Errorf("README.md's library snippet differs from charge in readme_example_test.go:\n%s\nwant:\n%s", snippet, want.String())
	}
}
