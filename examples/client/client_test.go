package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/refservertest"
	"github.com/obol-gateway/obol/receipt"
)

const (
	testAPIKey = "ob_client_test_workspace"
	testSecret = "vendor_sk_client_test_9b7e"
)

// testConfig points three tools at the test vendor ({{VENDOR}}): pay.charge
// answers at once, pay.flaky hangs up on the first request for a key, after
// acting on it, and pay.slow answers when the test releases it.
const testConfig = `{
  "key_prefix": "client:", "lease": "10s", "environment": "staging",
  "workspaces": [{"id": "ws_client", "api_keys": ["` + testAPIKey + `"]}],
  "approver_keys": [{"name": "client-test", "key": "ob_client_test_approver"}],
  "connections": [{"id": "conn_v", "provider": "testvendor", "base_url": "{{VENDOR}}", "secret_env": "CLIENT_TEST_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "method": "POST", "path": "/charge", "spec": {"tool": "pay.charge", "effect": "write", "route": "native",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"},
      "status": {"accepted": [201], "definitely_rejected": [402], "retryable": [503]}}},
    {"connection": "conn_v", "method": "POST", "path": "/flaky", "spec": {"tool": "pay.flaky", "effect": "write", "route": "native",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"},
      "status": {"accepted": [201], "definitely_rejected": [402], "retryable": [503]}}},
    {"connection": "conn_v", "method": "POST", "path": "/slow", "spec": {"tool": "pay.slow", "effect": "write", "route": "native",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}}
  ]
}`

// vendor deduplicates on the Idempotency-Key it receives, as a payments API
// does: the first request with a key charges and stores its answer, a later
// one gets the stored answer and charges nothing. It counts requests and
// charges per key; the gateway sends it a derived vendor key, never the
// client's (docs/DESIGN.md, "The key on the vendor hop").
type vendor struct {
	*httptest.Server
	mu       sync.Mutex
	requests map[string]int    // path + " " + key
	charged  map[string]string // path + " " + key -> stored answer
	seq      int
	slowGot  chan struct{} // a request reached /slow
	release  chan struct{} // closed: /slow answers
}

func newVendor(t *testing.T) *vendor {
	v := &vendor{requests: map[string]int{}, charged: map[string]string{},
		slowGot: make(chan struct{}, 8), release: make(chan struct{})}
	v.Server = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.Close)
	t.Cleanup(v.unblock) // runs first: Close waits for the handlers
	return v
}

func (v *vendor) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if r.Header.Get("Authorization") != "Bearer "+testSecret {
		http.Error(w, "bad credentials", http.StatusUnauthorized)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	slot := r.URL.Path + " " + key
	v.mu.Lock()
	v.requests[slot]++
	prev, seen := v.charged[slot]
	if !seen {
		v.seq++
		prev = fmt.Sprintf(`{"id":"ch_%d","args":%s}`, v.seq, body)
		v.charged[slot] = prev
	}
	v.mu.Unlock()
	if r.URL.Path == "/slow" {
		v.slowGot <- struct{}{}
		<-v.release
	}
	if !seen && r.URL.Path == "/flaky" {
		// Charged, then the connection drops before any answer: the gateway
		// cannot know whether the charge happened.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	io.WriteString(w, prev)
}

func (v *vendor) unblock() {
	v.mu.Lock()
	defer v.mu.Unlock()
	select {
	case <-v.release:
	default:
		close(v.release)
	}
}

// charges counts the charges made at path, over every key.
func (v *vendor) charges(path string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for slot := range v.charged {
		if strings.HasPrefix(slot, path+" ") {
			n++
		}
	}
	return n
}

func (v *vendor) count(path, key string) (requests int, answer string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.requests[path+" "+key], v.charged[path+" "+key]
}

func TestMain(m *testing.M) { refservertest.Main(m) }

// startGateway runs the reference gateway on its embedded store, with
// testConfig against v, or in demo mode if v is nil, and returns its base
// URL.
func startGateway(t *testing.T, v *vendor) string {
	t.Helper()
	var args []string
	if v != nil {
		cfg := filepath.Join(t.TempDir(), "gateway.json")
		if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(testConfig, "{{VENDOR}}", v.URL)), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-config", cfg)
	}
	return refservertest.Start(t, refservertest.Options{Args: args, Env: []string{"CLIENT_TEST_VENDOR_SECRET=" + testSecret}}).Base
}

func dial(t *testing.T, base string) *Client {
	t.Helper()
	c, err := Dial(context.Background(), base, testAPIKey, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

var charge = map[string]any{"amount": 1200, "currency": "usd"}

func TestOwnKeyRetryIsReplayed(t *testing.T) {
	v := newVendor(t)
	c := dial(t, startGateway(t, v))
	var out bytes.Buffer
	a, err := RetryOwnKey(context.Background(), c, &out, "pay.charge", charge)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	rc := a.Receipt
	if !rc.Replayed || rc.Outcome != effectspec.Accepted || rc.AttemptCount != 1 || rc.KeySource != "supplied" || a.IsError {
		t.Errorf("retry receipt %+v", rc)
	}
	if k, err := a.Key(); err != nil || k != rc.IdempotencyKey {
		t.Errorf("answer key %q (%v), receipt key %s", k, err, rc.IdempotencyKey)
	}
	if rc.VendorKey == "" || rc.VendorKey == rc.IdempotencyKey {
		t.Fatalf("vendor_key %q: want a derived key", rc.VendorKey)
	}
	n, stored := v.count("/charge", rc.VendorKey)
	if n != 1 || v.charges("/charge") != 1 {
		t.Errorf("vendor saw %d requests for the vendor key and made %d charges, want 1 and 1", n, v.charges("/charge"))
	}
	if a.Text != stored {
		t.Errorf("replayed %q, the vendor answered %q", a.Text, stored)
	}
	if n, _ := v.count("/charge", rc.IdempotencyKey); n != 0 {
		t.Errorf("the client's key reached the vendor %d times", n)
	}
	if !strings.Contains(out.String(), "replayed true") {
		t.Errorf("output:\n%s", out.String())
	}
}

// A retry under a new key is a new call: the lost reply's charge and the
// retry's are two. This is what RetryOwnKey prevents, and what its test
// would count if the retry changed the key.
func TestNewKeyAfterLostReplyChargesTwice(t *testing.T) {
	v := newVendor(t)
	c := dial(t, startGateway(t, v))
	ctx := context.Background()
	_, err := c.Call(ctx, Call{Tool: "pay.charge", Arguments: charge, Key: idempotency.NewKey().String(), LoseReply: true})
	if !errors.Is(err, ErrReplyLost) {
		t.Fatalf("first call: %v, want ErrReplyLost", err)
	}
	a, err := c.Call(ctx, Call{Tool: "pay.charge", Arguments: charge, Key: idempotency.NewKey().String()})
	if err != nil {
		t.Fatal(err)
	}
	if a.Receipt.Replayed {
		t.Errorf("a new key was replayed: %+v", a.Receipt)
	}
	if n := v.charges("/charge"); n != 2 {
		t.Errorf("vendor made %d charges, want 2", n)
	}
}

func TestMintedKeySettlesUnknown(t *testing.T) {
	v := newVendor(t)
	c := dial(t, startGateway(t, v))
	ctx := context.Background()
	var out bytes.Buffer
	first, retry, err := RetryMintedKey(ctx, c, &out, "pay.flaky", charge)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	frc := first.Receipt
	if frc.Outcome != effectspec.Unknown || !first.IsError || frc.KeySource != "minted" || frc.AttemptCount != 1 || frc.Replayed {
		t.Errorf("first receipt %+v isError %t", frc, first.IsError)
	}
	if first.HeaderKey == "" || first.HeaderKey != first.MetaKey || first.MetaKey != frc.IdempotencyKey {
		t.Errorf("minted key: header %q, _meta %q, receipt %q", first.HeaderKey, first.MetaKey, frc.IdempotencyKey)
	}
	if _, err := idempotency.ParseKey(first.HeaderKey); err != nil {
		t.Errorf("minted key does not parse: %v", err)
	}
	rrc := retry.Receipt
	if rrc.Outcome != effectspec.Accepted || retry.IsError || rrc.AttemptCount != 2 || rrc.Replayed ||
		rrc.IdempotencyKey != frc.IdempotencyKey || rrc.VendorKey == "" || rrc.VendorKey != frc.VendorKey {
		t.Errorf("retry receipt %+v, first %+v", rrc, frc)
	}
	// Two requests reached the vendor, both with the one vendor key: one charge.
	n, stored := v.count("/flaky", rrc.VendorKey)
	if n != 2 || v.charges("/flaky") != 1 {
		t.Errorf("vendor saw %d requests for the vendor key and made %d charges, want 2 and 1", n, v.charges("/flaky"))
	}
	if retry.Text != stored {
		t.Errorf("retry answered %q, the vendor's charge is %q", retry.Text, stored)
	}

	// Settled now: the key replays and the vendor sees nothing more.
	again, err := c.Call(ctx, Call{Tool: "pay.flaky", Arguments: charge, Key: first.HeaderKey})
	if err != nil {
		t.Fatal(err)
	}
	if !again.Receipt.Replayed || again.Receipt.AttemptCount != 2 || again.Text != retry.Text {
		t.Errorf("replay %+v %q", again.Receipt, again.Text)
	}
	if n, _ := v.count("/flaky", rrc.VendorKey); n != 2 {
		t.Errorf("vendor saw %d requests after the replay, want 2", n)
	}
}

// Calling again without the minted key after an unknown outcome charges a
// second time: the minted key is what makes the retry safe.
func TestUnknownRetriedWithoutKeyChargesTwice(t *testing.T) {
	v := newVendor(t)
	c := dial(t, startGateway(t, v))
	ctx := context.Background()
	first, err := c.Call(ctx, Call{Tool: "pay.flaky", Arguments: charge})
	if err != nil {
		t.Fatal(err)
	}
	if first.Receipt.Outcome != effectspec.Unknown {
		t.Fatalf("first outcome %s, want unknown", first.Receipt.Outcome)
	}
	second, err := c.Call(ctx, Call{Tool: "pay.flaky", Arguments: charge})
	if err != nil {
		t.Fatal(err)
	}
	if second.HeaderKey == first.HeaderKey {
		t.Fatalf("the gateway minted the same key twice")
	}
	if n := v.charges("/flaky"); n != 2 {
		t.Errorf("vendor made %d charges, want 2", n)
	}
}

func TestRefusal(t *testing.T) {
	v := newVendor(t)
	c := dial(t, startGateway(t, v))
	ctx := context.Background()
	key := idempotency.NewKey().String()
	if _, err := c.Call(ctx, Call{Tool: "pay.charge", Arguments: charge, Key: key}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Call(ctx, Call{Tool: "pay.charge", Arguments: map[string]any{"amount": 9900, "currency": "usd"}, Key: key})
	var r *Refusal
	if !errors.As(err, &r) || r.Reason != "request_mismatch" || r.Status != 422 || r.Key != key || r.SafeNewKey == nil || *r.SafeNewKey {
		t.Fatalf("other arguments under the key: %v (%+v), want request_mismatch 422, safe_new_key false", err, r)
	}
	if n := v.charges("/charge"); n != 1 {
		t.Errorf("vendor made %d charges, want 1", n)
	}
	_, err = c.Call(ctx, Call{Tool: "pay.charge", Arguments: charge, Key: "idt_not-a-key"})
	if !errors.As(err, &r) || r.Reason != "malformed_key" || r.Status != 400 || r.Key != "" {
		t.Fatalf("a malformed key: %v (%+v), want malformed_key 400 and no key", err, r)
	}
	if strings.Contains(err.Error(), "not-a-key") {
		t.Errorf("the error quotes the key: %v", err)
	}
}

// A second call with the key while the first is still at the vendor is
// refused in_progress, naming the key to call again with; nothing is sent.
func TestInProgressRefusal(t *testing.T) {
	v := newVendor(t)
	base := startGateway(t, v)
	c1, c2 := dial(t, base), dial(t, base)
	ctx := context.Background()
	key := idempotency.NewKey().String()
	type result struct {
		a   *Answer
		err error
	}
	firstDone := make(chan result, 1)
	go func() {
		a, err := c1.Call(ctx, Call{Tool: "pay.slow", Arguments: charge, Key: key})
		firstDone <- result{a, err}
	}()
	<-v.slowGot
	_, err := c2.Call(ctx, Call{Tool: "pay.slow", Arguments: charge, Key: key})
	var r *Refusal
	if !errors.As(err, &r) || r.Reason != "in_progress" || r.Status != 409 || r.Key != key {
		t.Errorf("second call while the first runs: %v (%+v), want in_progress 409 with the key", err, r)
	}
	v.unblock()
	first := <-firstDone
	if first.err != nil || first.a.Receipt.Outcome != effectspec.Accepted || first.a.Receipt.Replayed {
		t.Fatalf("first call: %v %+v", first.err, first.a)
	}
	again, err := c2.Call(ctx, Call{Tool: "pay.slow", Arguments: charge, Key: key})
	if err != nil || !again.Receipt.Replayed {
		t.Fatalf("retry after the first finished: %v %+v", err, again)
	}
	if n := v.charges("/slow"); n != 1 {
		t.Errorf("vendor made %d charges, want 1", n)
	}
	if n, _ := v.count("/slow", first.a.Receipt.VendorKey); n != 1 {
		t.Errorf("vendor saw %d requests, want 1", n)
	}
}

func TestAnswerKeyMismatch(t *testing.T) {
	const k1, k2 = "idt_11111111111111111111111111111111", "idt_22222222222222222222222222222222"
	for _, a := range []Answer{
		{},
		{HeaderKey: k1, MetaKey: k2, Receipt: receipt.Receipt{IdempotencyKey: k1}},
		{HeaderKey: k1, MetaKey: k1, Receipt: receipt.Receipt{IdempotencyKey: k2}},
		{HeaderKey: "", MetaKey: k1, Receipt: receipt.Receipt{IdempotencyKey: k1}},
	} {
		if k, err := a.Key(); !errors.Is(err, ErrKeyMismatch) || k != "" {
			t.Errorf("%+v: Key() = %q, %v, want ErrKeyMismatch", a, k, err)
		}
	}
	a := Answer{HeaderKey: k1, MetaKey: k1, Receipt: receipt.Receipt{IdempotencyKey: k1}}
	if k, err := a.Key(); err != nil || k != k1 {
		t.Errorf("Key() = %q, %v", k, err)
	}
}

// The program as documented, against `go run ./refserver` (demo mode).
func TestRunAgainstDemo(t *testing.T) {
	base := startGateway(t, nil)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-gateway", base}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{
		"the gateway answered but the reply was lost",
		"retry with the same key: outcome accepted, status 201, attempt_count 1, replayed true",
		"outcome accepted, status 201, attempt_count 2, replayed false",
		"attempt_count 2, replayed true",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRunInvalidArgs(t *testing.T) {
	for _, args := range [][]string{
		{"-args", `[1,2]`},
		{"-args", `{"card":"4242424242424242"`},
		{"-minted-args", `null`},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append([]string{"-gateway", "http://127.0.0.1:1"}, args...), &out)
		if !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("%v: %v, want ErrInvalidArgs", args, err)
		}
		if err != nil && strings.Contains(err.Error(), "4242") {
			t.Errorf("the error quotes the arguments: %v", err)
		}
		if out.Len() != 0 {
			t.Errorf("%v: output %q before refusing", args, out.String())
		}
	}
}

// Dial fails cleanly when nothing listens.
func TestDialNoGateway(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	if _, err := Dial(ctx, url, testAPIKey, nil); err == nil {
		t.Fatal("Dial succeeded with no gateway")
	}
}
