package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// fakeQuotaStore is a QuotaStore whose bucket holds a fixed pool of tokens
// that never refills: the tests count what the gateway takes.
type fakeQuotaStore struct {
	mu      sync.Mutex
	pool    int
	taken   int
	calls   int
	stored  int64
	memFrac float64
	fail    error
}

func (f *fakeQuotaStore) TakeTokens(_ context.Context, _ string, _ float64, _, n int) (int, time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fail != nil {
		return 0, 0, f.fail
	}
	got := min(n, f.pool)
	f.pool -= got
	f.taken += got
	return got, 250 * time.Millisecond, nil
}

func (f *fakeQuotaStore) StoredBytes(context.Context, string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stored, f.fail
}

func (f *fakeQuotaStore) MemoryFraction(context.Context) (float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.memFrac, f.fail
}

func (f *fakeQuotaStore) set(fn func(*fakeQuotaStore)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

func startQuotas(t *testing.T, cfg Config) *quotas {
	t.Helper()
	if err := checkQuotas(&cfg); err != nil {
		t.Fatal(err)
	}
	qs := newQuotas(&cfg)
	if qs == nil {
		t.Fatal("no quotas")
	}
	t.Cleanup(qs.close)
	return qs
}

// eventually polls cond for up to 10s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("not within 10s: %s", what)
}

// TestQuotaRateFromFleetBucket: calls are admitted only with tokens taken
// from the shared bucket (never more than it granted, plus nothing on
// credit once repaid), and once it is empty a call is refused
// quota_exceeded with a retry_after, decided locally.
func TestQuotaRateFromFleetBucket(t *testing.T) {
	fs := &fakeQuotaStore{pool: 25}
	qs := startQuotas(t, Config{QuotaStore: fs, Quotas: map[string]Quota{"ws_a": {CallsPerSecond: 50, Burst: 25}}})
	admitted := 0
	eventually(t, "the pool is spent and calls are refused", func() bool {
		a := qs.admit("ws_a")
		if a.over == nil {
			admitted++
			a.done(retry.Answer{}, nil)
			return false
		}
		fs.mu.Lock()
		defer fs.mu.Unlock()
		return fs.pool == 0
	})
	// Once the pool is empty the local allowance drains too.
	for a := qs.admit("ws_a"); a.over == nil; a = qs.admit("ws_a") {
		admitted++
	}
	fs.mu.Lock()
	taken := fs.taken
	fs.mu.Unlock()
	if admitted != taken || taken != 25 {
		t.Fatalf("admitted %d calls, the store granted %d of 25", admitted, taken)
	}
	a := qs.admit("ws_a")
	if a.over == nil || a.over.reason != "quota_exceeded" || a.over.retryAfter <= 0 {
		t.Fatalf("over the bucket: %+v", a.over)
	}
	if a.token || a.slot {
		t.Fatal("a refused call holds a share")
	}
	var re *refusalError
	if !errors.As(a.noCreate(), &re) || re.r.status != 429 {
		t.Fatalf("NoCreate: %v", a.noCreate())
	}
	// Another workspace is unlimited and untouched.
	if b := qs.admit("ws_b"); b.over != nil || b.token {
		t.Fatalf("ws_b: %+v", b)
	}
}

// TestQuotaTokenBackOnReplay: a token spent on a call that replayed, or
// was refused with no record made, goes back to the allowance; one spent on
// a new record does not.
func TestQuotaTokenBackOnReplay(t *testing.T) {
	fs := &fakeQuotaStore{pool: 3}
	qs := startQuotas(t, Config{QuotaStore: fs, Quotas: map[string]Quota{"ws_a": {CallsPerSecond: 30, Burst: 3}}})
	w := qs.state("ws_a")
	eventually(t, "the pool is leased", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.tokens == 3 && w.owed == 0
	})
	tokens := func() int { w.mu.Lock(); defer w.mu.Unlock(); return w.tokens }
	a := qs.admit("ws_a")
	a.done(retry.Answer{Receipt: receipt.Receipt{Replayed: true}}, nil)
	b := qs.admit("ws_a")
	b.done(retry.Answer{}, idempotency.ErrInProgress)
	if n := tokens(); n != 3 {
		t.Fatalf("after a replay and an in_progress: %d tokens, want 3", n)
	}
	c := qs.admit("ws_a")
	c.done(retry.Answer{Receipt: receipt.Receipt{Outcome: effectspec.Unknown}}, nil)
	d := qs.admit("ws_a")
	d.done(retry.Answer{}, idempotency.ErrStoreUnavailable) // the claim may have been applied
	if n := tokens(); n != 1 {
		t.Fatalf("after a new record and a store failure: %d tokens, want 1", n)
	}
}

// TestQuotaInFlight: a gateway runs at most InFlight calls of a workspace
// that may create records; the next is over until one ends.
func TestQuotaInFlight(t *testing.T) {
	qs := startQuotas(t, Config{Quotas: map[string]Quota{"ws_a": {InFlight: 2}}})
	a, b := qs.admit("ws_a"), qs.admit("ws_a")
	c := qs.admit("ws_a")
	if a.over != nil || b.over != nil || c.over == nil || c.over.reason != "quota_exceeded" {
		t.Fatalf("a %+v b %+v c %+v", a.over, b.over, c.over)
	}
	c.done(retry.Answer{}, nil) // holds nothing: frees nothing
	if d := qs.admit("ws_a"); d.over == nil {
		t.Fatal("a refused call freed a slot")
	}
	a.done(retry.Answer{}, nil)
	if d := qs.admit("ws_a"); d.over != nil {
		t.Fatalf("after one ended: %+v", d.over)
	}
}

// TestQuotaStoredBytesAndStoreFull: stored bytes over the workspace's
// limit refuse quota_exceeded, and the store's memory above the headroom
// fraction refuses every workspace store_full, both read in the
// background; a failing read keeps the last reading.
func TestQuotaStoredBytesAndStoreFull(t *testing.T) {
	fs := &fakeQuotaStore{}
	qs := startQuotas(t, Config{QuotaStore: fs, Quotas: map[string]Quota{"ws_a": {StoredBytes: 1000}}})
	if a := qs.admit("ws_a"); a.over != nil {
		t.Fatalf("under: %+v", a.over)
	}
	fs.set(func(f *fakeQuotaStore) { f.stored = 1000 })
	eventually(t, "stored bytes refuse", func() bool { a := qs.admit("ws_a"); return a.over != nil && a.over.reason == "quota_exceeded" })
	if a := qs.admit("ws_b"); a.over != nil {
		t.Fatalf("ws_b is unlimited: %+v", a.over)
	}
	fs.set(func(f *fakeQuotaStore) { f.memFrac = 0.91 })
	eventually(t, "store_full", func() bool { a := qs.admit("ws_b"); return a.over != nil && a.over.reason == "store_full" })
	fs.set(func(f *fakeQuotaStore) { f.fail = errors.New("down") })
	time.Sleep(2 * quotaRefresh)
	if a := qs.admit("ws_b"); a.over == nil || a.over.reason != "store_full" {
		t.Fatalf("a failed read dropped the last reading: %+v", a.over)
	}
	fs.set(func(f *fakeQuotaStore) { f.fail = nil; f.memFrac = 0.5; f.stored = 10 })
	eventually(t, "room again", func() bool { return qs.admit("ws_a").over == nil })
}

// TestQuotaRefusalData: quota_exceeded and store_full carry status,
// retry_after_ms (rounded up), safe_new_key false and the key.
func TestQuotaRefusalData(t *testing.T) {
	for _, r := range []*refusal{quotaRefusal("calls_per_second", 1500*time.Microsecond),
		{reason: "store_full", status: 503, retryAfter: time.Second, msg: "store_full"}} {
		e := rpcError(*r, "k1")
		var d ErrorData
		if err := json.Unmarshal(e.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Reason != r.reason || d.Status != r.status || d.IdempotencyKey != "k1" || d.SafeNewKey == nil || *d.SafeNewKey ||
			d.RetryAfterMS == nil || *d.RetryAfterMS != (r.retryAfter+time.Millisecond-1).Milliseconds() {
			t.Fatalf("%s: %s", r.reason, e.Data)
		}
	}
	if d := quotaRefusal("in_flight", inFlightRetry); d.status != 429 {
		t.Fatalf("status %d", d.status)
	}
	for ms, want := range map[int64]string{1: "1", 1000: "1", 1001: "2", 0: "1"} {
		if got := retryAfterHeader(ms); got != want {
			t.Errorf("Retry-After of %dms: %s, want %s", ms, got, want)
		}
	}
}

// TestQuotaConfig: a quota New cannot serve is ErrConfig.
func TestQuotaConfig(t *testing.T) {
	fs := &fakeQuotaStore{}
	for name, cfg := range map[string]Config{
		"negative rate":      {QuotaStore: fs, DefaultQuota: Quota{CallsPerSecond: -1}},
		"burst alone":        {QuotaStore: fs, Quotas: map[string]Quota{"a": {Burst: 3}}},
		"negative in_flight": {Quotas: map[string]Quota{"a": {InFlight: -1}}},
		"rate, no store":     {DefaultQuota: Quota{CallsPerSecond: 1}},
		"stored, no store":   {Quotas: map[string]Quota{"a": {StoredBytes: 1}}},
		"fraction above 1":   {QuotaStore: fs, StoreFullFraction: 1.5},
		"negative fraction":  {QuotaStore: fs, StoreFullFraction: -0.1},
	} {
		if err := checkQuotas(&cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := checkQuotas(&Config{Quotas: map[string]Quota{"a": {InFlight: 1}}}); err != nil {
		t.Fatal(err)
	}
	if qs := newQuotas(&Config{}); qs != nil {
		t.Fatal("quotas without limits or a store")
	}
}

// TestQuotaOnTheWire: over its quota a workspace's new key is refused
// quota_exceeded (429 in error.data, retry_after_ms, a Retry-After header,
// safe_new_key false, the key), nothing sent; a key that holds a record
// replays all the same; above the headroom fraction new keys are refused
// store_full.
func TestQuotaOnTheWire(t *testing.T) {
	fs := &fakeQuotaStore{pool: 2}
	var sent atomic.Int64
	srv := httpToolGateway(t, func() []byte { sent.Add(1); return []byte(`{"ok": true}`) },
		Config{QuotaStore: fs, DefaultQuota: Quota{CallsPerSecond: 10, Burst: 2}})
	refusal := func(key, reason string, status int) {
		t.Helper()
		resp, b := rawCall(t, srv, key)
		var msg struct {
			Error struct {
				Data ErrorData `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatal(err)
		}
		d := msg.Error.Data
		if d.Reason != reason || d.Status != status || d.RetryAfterMS == nil || *d.RetryAfterMS <= 0 ||
			d.SafeNewKey == nil || *d.SafeNewKey || d.IdempotencyKey != key {
			t.Fatalf("%s: %s", key, b)
		}
		if ra := resp.Header.Get("Retry-After"); ra != retryAfterHeader(*d.RetryAfterMS) {
			t.Fatalf("Retry-After %q for retry_after_ms %d", ra, *d.RetryAfterMS)
		}
	}
	const k1 = "idt_00000000000000000000000000000001"
	keys := []string{k1, "idt_00000000000000000000000000000002"}
	eventually(t, "two calls accepted from the pool", func() bool {
		resp, b := rawCall(t, srv, keys[0])
		if resp.StatusCode == 200 && bytes.Contains(b, []byte(`"outcome":"accepted"`)) {
			keys = keys[1:]
		}
		return len(keys) == 0
	})
	if sent.Load() != 2 {
		t.Fatalf("vendor saw %d calls", sent.Load())
	}
	refusal("idt_00000000000000000000000000000003", "quota_exceeded", 429)
	if _, b := rawCall(t, srv, k1); !bytes.Contains(b, []byte(`"replayed":true`)) {
		t.Fatalf("a replay over the quota: %.300s", b)
	}
	// Tokens again, but the store nearly full: new keys are store_full
	// once the background read sees it (a new key admitted before that
	// is accepted; the loop takes a fresh key each time).
	fs.set(func(f *fakeQuotaStore) { f.pool = 100; f.memFrac = 0.95 })
	n := 10
	eventually(t, "store_full", func() bool {
		n++
		_, b := rawCall(t, srv, fmt.Sprintf("idt_%032d", n))
		return bytes.Contains(b, []byte(`"store_full"`))
	})
	accepted := sent.Load()
	if _, b := rawCall(t, srv, k1); !bytes.Contains(b, []byte(`"replayed":true`)) {
		t.Fatalf("a replay with the store full: %.300s", b)
	}
	refusal("idt_00000000000000000000000000000005", "store_full", 503)
	if sent.Load() != accepted {
		t.Fatalf("vendor saw %d calls, want the %d accepted", sent.Load(), accepted)
	}
}

// TestClassifyCarriesSafeNewKey: the exported refusal of an error carries
// the table's safe_new_key and the wait, for the REST answers.
func TestClassifyCarriesSafeNewKey(t *testing.T) {
	gw := newTestGateway(t, miniStore(t))
	r := gw.Classify(&refusalError{*quotaRefusal("calls_per_second", 2*time.Second)})
	if r.Reason != "quota_exceeded" || r.Status != 429 || r.SafeNewKey == nil || *r.SafeNewKey || r.RetryAfter != 2*time.Second {
		t.Fatalf("%+v", r)
	}
	if r := gw.Classify(idempotency.ErrStoreUnavailable); r.SafeNewKey == nil || *r.SafeNewKey {
		t.Fatalf("store_unavailable: %+v", r)
	}
	if r := gw.Classify(idempotency.ErrInvalidRequest); r.SafeNewKey != nil {
		t.Fatalf("invalid_request: %+v", r)
	}
}
