package refunds

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// t0 is where the tests pin Redis's clock. The store never reads the
// gateway's clock: every lease deadline and timestamp comes from Redis TIME
// inside its scripts, and miniredis answers TIME with the time SetTime set.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

const lease = 30 * time.Second

// newStore opens a redisstore.Store on a fresh miniredis. Copy this.
func newStore(t testing.TB) (*redisstore.Store, *miniredis.Miniredis) {
	t.Helper()
	mr := miniredis.RunT(t) // closed when the test ends
	// One clock for everything: SetTime drives TIME (leases, receipts), and
	// ClockTTL makes key TTLs (retention) follow the same clock. Without
	// ClockTTL, TTLs move only with FastForward.
	mr.SetTime(t0)
	mr.ClockTTL(true)
	// embedded.On sets what miniredis needs (no client-side caching, no
	// eviction check); against Redis, open the store with
	// redisstore.ParseURL and redisstore.New.
	store, closeStore, err := embedded.On(context.Background(), mr, redisstore.Options{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	return store, mr
}

// vendor is a fake retry.Target. It answers each attempt with the next of
// statuses (the last repeats; 0 is a connection that failed after the
// request left) and records what the real vendor would have received.
type vendor struct {
	mu       sync.Mutex
	statuses []int
	bodies   []string // each attempt's body, with our key propagated into it
	numbers  []int    // each attempt's number (its fencing token)
}

func (v *vendor) Send(ctx context.Context, a retry.Attempt) retry.Result {
	// Propagate the key as retry.HTTPTarget would, to check the binding.
	body, _, err := a.Spec.Apply(http.Header{}, a.Arguments, a.Key.String())
	if err != nil {
		return retry.Result{Phase: retry.BeforeSend, Err: err}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.bodies = append(v.bodies, string(body))
	v.numbers = append(v.numbers, a.Number)
	status := 201
	if len(v.statuses) > 0 {
		status = v.statuses[min(len(v.bodies), len(v.statuses))-1]
	}
	if status == 0 {
		return retry.Result{Phase: retry.PostSend, Err: errors.New("connection reset")}
	}
	return retry.Result{Phase: retry.Responded, Status: status,
		Header: http.Header{"Content-Type": {"application/json"}, "Set-Cookie": {"s=secret"}},
		Body:   []byte(`{"id":"re_` + strconv.Itoa(len(v.bodies)) + `","status":` + strconv.Itoa(status) + `}`)}
}

func (v *vendor) attempts() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.bodies)
}

func newHandler(store idempotency.Store, v retry.Target) *Handler {
	return &Handler{Orchestrator: &retry.Orchestrator{Store: store}, Vendor: v}
}

type reply struct {
	code    int
	header  http.Header
	reason  string
	refund  json.RawMessage
	receipt receipt.Receipt
}

func post(t *testing.T, h http.Handler, key, body string) reply {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/refunds", strings.NewReader(body))
	if key != "" {
		r.Header.Set("Idempotency-Key", key)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var v struct {
		Reason  string          `json:"reason"`
		Refund  json.RawMessage `json:"refund"`
		Receipt receipt.Receipt `json:"receipt"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("reply %d %q: %v", w.Code, w.Body, err)
	}
	return reply{w.Code, w.Header(), v.Reason, v.Refund, v.Receipt}
}

// storedReceipt is the receipt as a receipts endpoint would serve it: built
// from the record, read without changing it.
func storedReceipt(t *testing.T, store idempotency.Store, key string) receipt.Receipt {
	t.Helper()
	k, err := idempotency.ParseKey(key)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.Lookup(context.Background(), scope, k)
	if err != nil {
		t.Fatalf("lookup: %v", err)
	}
	return rec.Receipt(scope, false)
}

func TestSpecIsValid(t *testing.T) {
	if _, err := effectspec.New(spec); err != nil {
		t.Fatal(err)
	}
}

func TestReplay(t *testing.T) {
	store, _ := newStore(t)
	v := &vendor{}
	h := newHandler(store, v)
	key := idempotency.NewKey().String()

	first := post(t, h, key, `{"charge":"ch_1","amount":500}`)
	if first.code != 201 || first.receipt.Outcome != effectspec.Accepted || first.receipt.AttemptCount != 1 || first.receipt.Replayed {
		t.Fatalf("first call: %d %+v", first.code, first.receipt)
	}
	// The vendor gets the slot's vendor key (the receipt shows it), never the
	// client's key: two tenants on one vendor account never meet there.
	if want := `"idempotency_key":"` + first.receipt.VendorKey + `"`; first.receipt.VendorKey == "" ||
		!strings.Contains(v.bodies[0], want) || strings.Contains(v.bodies[0], key) {
		t.Errorf("vendor body %s: want %s and never the client's key %s", v.bodies[0], want, key)
	}
	if first.receipt.IdempotencyKey != key || first.receipt.KeySource != "supplied" || !first.receipt.CreatedAt.Equal(t0) {
		t.Errorf("receipt %+v: want key %s, supplied, created at Redis TIME %v", first.receipt, key, t0)
	}

	again := post(t, h, key, `{"amount":500,"charge":"ch_1"}`) // same request, other member order
	if again.code != 201 || !again.receipt.Replayed || again.header.Get("Idempotent-Replayed") != "true" ||
		string(again.refund) != string(first.refund) {
		t.Fatalf("replay: %d %s %+v", again.code, again.refund, again.receipt)
	}
	if n := v.attempts(); n != 1 {
		t.Fatalf("vendor saw %d attempts, want 1", n)
	}

	mismatch := post(t, h, key, `{"charge":"ch_1","amount":501}`)
	if mismatch.code != 422 || mismatch.reason != "request_mismatch" || v.attempts() != 1 {
		t.Fatalf("other amount, same key: %d %q, %d attempts", mismatch.code, mismatch.reason, v.attempts())
	}
}

// TestReceipts checks what each vendor answer turns into: the HTTP reply,
// its receipt, and the stored record (which a receipts endpoint serves).
func TestReceipts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		code     int
		outcome  effectspec.Outcome
		attempts int
	}{
		{"accepted", []int{201}, 201, effectspec.Accepted, 1},
		{"rejected", []int{402}, 402, effectspec.DefinitelyRejected, 1},
		{"retryable then accepted", []int{503, 200}, 200, effectspec.Accepted, 2},
		{"retryable twice", []int{503, 503}, 503, effectspec.Unknown, 2},
		{"unlisted status", []int{500}, 500, effectspec.Unknown, 1},
		{"no answer", []int{0}, 502, effectspec.Unknown, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, _ := newStore(t)
			v := &vendor{statuses: tc.statuses}
			key := idempotency.NewKey().String()
			got := post(t, newHandler(store, v), key, `{"charge":"ch_1","amount":500}`)
			rc := got.receipt
			if got.code != tc.code || rc.Outcome != tc.outcome || rc.AttemptCount != tc.attempts || v.attempts() != tc.attempts {
				t.Fatalf("got %d %s after %d attempts (vendor saw %d), want %d %s after %d",
					got.code, rc.Outcome, rc.AttemptCount, v.attempts(), tc.code, tc.outcome, tc.attempts)
			}
			if tc.code == 502 && (rc.Status != 0 || got.refund != nil) {
				t.Errorf("no answer, yet status %d refund %s", rc.Status, got.refund)
			}
			for i, n := range v.numbers {
				if n != i+1 {
					t.Errorf("attempt %d had fencing token %d", i+1, n)
				}
			}
			if len(v.bodies) == 2 && v.bodies[0] != v.bodies[1] {
				t.Errorf("second attempt differs from the first: %s vs %s", v.bodies[1], v.bodies[0])
			}
			b1, _ := json.Marshal(rc)
			b2, _ := json.Marshal(storedReceipt(t, store, key))
			if string(b1) != string(b2) {
				t.Errorf("reply receipt  %s\nstored receipt %s", b1, b2)
			}
			if strings.Contains(string(b1), "secret") {
				t.Errorf("receipt holds a vendor header value: %s", b1)
			}
		})
	}
}

// crashAfterSend is a store through which a gateway dies after its attempt
// left: the finalize never reaches Redis, so the record stays in flight
// under its lease.
type crashAfterSend struct{ idempotency.Store }

func (crashAfterSend) Finalize(context.Context, idempotency.FinalizeRequest) (idempotency.Record, error) {
	return idempotency.Record{}, errors.New("gateway crashed")
}

// TestLeaseExpiry moves Redis TIME past a dead gateway's lease: the record
// reads unknown, and because the vendor deduplicates on our key, the next
// call makes attempt 2 with the same key.
func TestLeaseExpiry(t *testing.T) {
	store, mr := newStore(t)
	v := &vendor{}
	key := idempotency.NewKey().String()
	k, _ := idempotency.ParseKey(key)
	body := `{"charge":"ch_1","amount":500}`

	if got := post(t, newHandler(crashAfterSend{store}, v), key, body); got.code != 500 || v.attempts() != 1 {
		t.Fatalf("crashing gateway: %d %q, %d attempts", got.code, got.reason, v.attempts())
	}
	h := newHandler(store, v)
	if got := post(t, h, key, body); got.code != 409 || got.reason != "in_progress" {
		t.Fatalf("during the lease: %d %q, want 409 in_progress", got.code, got.reason)
	}
	if rec, err := store.Lookup(context.Background(), scope, k); err != nil || rec.State != effectspec.InProgress {
		t.Fatalf("during the lease: %v %v, want in_progress", rec.State, err)
	}

	mr.SetTime(t0.Add(lease)) // the lease ends
	if rec, err := store.Lookup(context.Background(), scope, k); err != nil || rec.State != effectspec.Unknown {
		t.Fatalf("after the lease: %v %v, want unknown", rec.State, err)
	}
	got := post(t, h, key, body)
	if got.code != 201 || got.receipt.AttemptCount != 2 || got.receipt.Outcome != effectspec.Accepted {
		t.Fatalf("after the lease: %d %+v", got.code, got.receipt)
	}
	if v.attempts() != 2 || v.bodies[0] != v.bodies[1] || v.numbers[1] != 2 {
		t.Fatalf("vendor saw %q with tokens %v: want the same body (and key) twice, token 2 last", v.bodies, v.numbers)
	}
}

// TestRetention moves the clock past the retention: the record is gone and
// the key is free again.
func TestRetention(t *testing.T) {
	defaults, _ := redisstore.Options{}.Resolve()
	retention := defaults.Retention
	store, mr := newStore(t)
	v := &vendor{}
	h := newHandler(store, v)
	key := idempotency.NewKey().String()
	post(t, h, key, `{"charge":"ch_1"}`)

	mr.SetTime(t0.Add(retention - time.Second))
	if got := post(t, h, key, `{"charge":"ch_1"}`); !got.receipt.Replayed {
		t.Fatalf("within the retention: %+v, want a replay", got.receipt)
	}
	// The replay changed nothing, so the record still ends 24h after its
	// finalize.
	mr.SetTime(t0.Add(retention))
	if k, _ := idempotency.ParseKey(key); len(records(mr)) != 0 {
		_, err := store.Lookup(context.Background(), scope, k)
		t.Fatalf("after the retention: keys %v, lookup %v", mr.Keys(), err)
	}
	if got := post(t, h, key, `{"charge":"ch_1"}`); got.receipt.Replayed || v.attempts() != 2 {
		t.Fatalf("after the retention: %+v with %d attempts, want a new call", got.receipt, v.attempts())
	}
}

func TestRefusalsTouchNothing(t *testing.T) {
	store, mr := newStore(t)
	v := &vendor{}
	h := newHandler(store, v)
	for _, tc := range []struct{ key, body, reason string }{
		{"idt_nope", `{}`, "malformed_key"},
		{idempotency.NewKey().String(), `{"amount":`, "invalid_arguments"},
	} {
		if got := post(t, h, tc.key, tc.body); got.code != 400 || got.reason != tc.reason {
			t.Errorf("%s: %d %q, want 400 %s", tc.body, got.code, got.reason, tc.reason)
		}
	}
	if v.attempts() != 0 || len(records(mr)) != 0 {
		t.Fatalf("refusals reached the vendor (%d) or the store (%v)", v.attempts(), mr.Keys())
	}
}

func TestMintedKey(t *testing.T) {
	store, _ := newStore(t)
	got := post(t, newHandler(store, &vendor{}), "", `{"charge":"ch_1"}`)
	key := got.header.Get("Idempotency-Key")
	if _, err := idempotency.ParseKey(key); err != nil || got.receipt.KeySource != "minted" || got.receipt.IdempotencyKey != key {
		t.Fatalf("no key supplied: header %q, receipt %+v", key, got.receipt)
	}
}

// records lists the claim records in mr: the store keeps the fleet's
// deployment id under {prefix}meta: from its start.
func records(mr *miniredis.Miniredis) []string {
	var out []string
	for _, k := range mr.Keys() {
		if strings.Contains(k, ":idem:") {
			out = append(out, k)
		}
	}
	return out
}
