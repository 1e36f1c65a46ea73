package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
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
	gate    chan struct{} // if not nil, TakeTokens waits for it to close
}

func (f *fakeQuotaStore) TakeTokens(_ context.Context, _ string, _ float64, _, n int) (int, time.Duration, error) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
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

func (f *fakeQuotaStore) MemoryEstimate() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.memFrac
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
// quota_exceeded with a retry_after before its claim, decided locally.
func TestQuotaRateFromFleetBucket(t *testing.T) {
	fs := &fakeQuotaStore{pool: 25}
	qs := startQuotas(t, Config{QuotaStore: fs, Quotas: map[string]WorkspaceQuota{"ws_a": {CallsPerSecond: 50, Burst: 25}}})
	admitted := 0
	eventually(t, "the pool is spent and calls are refused", func() bool {
		a := qs.admit("ws_a")
		if a.over == nil {
			admitted++
			a.done()
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
	if r := a.refused(); r == nil || r.reason != "quota_exceeded" || r.retryAfter <= 0 || r.status != 429 {
		t.Fatalf("over the bucket: %+v", a.over)
	}
	if a.slot || a.refuse() != nil || a.noCreate() != nil {
		t.Fatal("a call refused before its claim holds a share or is claimed")
	}
	// Another workspace is unlimited and untouched.
	if b := qs.admit("ws_b"); b.over != nil || b.slot {
		t.Fatalf("ws_b: %+v", b)
	}
}

// TestQuotaBurstAtStart: calls that arrive together before a workspace's
// first lease returned wait for it (the first takes the token on credit)
// and are admitted on its tokens; when the bucket grants none, they are
// refused once it returned; and a lease that does not return within the
// wait (firstLeaseWait) refuses them then, before it returns.
func TestQuotaBurstAtStart(t *testing.T) {
	burst := func(t *testing.T, pool int, wait, hold time.Duration) (admitted, refused int) {
		gate := make(chan struct{})
		fs := &fakeQuotaStore{pool: pool, gate: gate}
		qs := startQuotas(t, Config{QuotaStore: fs, Quotas: map[string]WorkspaceQuota{"ws_a": {CallsPerSecond: 1000}}})
		qs.firstWait = wait
		release := sync.OnceFunc(func() { close(gate) })
		time.AfterFunc(hold, release)
		t.Cleanup(release) // before qs.close, which waits for the lease
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				a := qs.admit("ws_a")
				mu.Lock()
				defer mu.Unlock()
				if a.over != nil {
					refused++
					return
				}
				admitted++
				a.done()
			})
		}
		wg.Wait()
		return admitted, refused
	}
	// The waits are far longer than the holds, and the holds than the
	// waits: what a loaded machine delays does not change the outcome.
	if a, r := burst(t, 1000, time.Minute, 20*time.Millisecond); a != 8 || r != 0 {
		t.Errorf("a burst of 8 at start, the lease back after 20ms: %d admitted, %d refused; want 8, 0", a, r)
	}
	if a, r := burst(t, 0, time.Minute, 20*time.Millisecond); a != 1 || r != 7 {
		t.Errorf("a burst of 8 at start, an empty bucket: %d admitted, %d refused; want 1 (on credit), 7", a, r)
	}
	if a, r := burst(t, 1000, firstLeaseWait, time.Minute); a != 1 || r != 7 {
		t.Errorf("a burst of 8 at start, the lease back after a minute: %d admitted, %d refused; want 1, 7", a, r)
	}
}

// TestQuotaTokenForEveryCall: every call takes a token before its claim,
// whatever it turns out to be (a replay, in_progress, a new record, a
// store failure): none goes back, and the next call is refused before
// its claim.
func TestQuotaTokenForEveryCall(t *testing.T) {
	fs := &fakeQuotaStore{pool: 4}
	qs := startQuotas(t, Config{QuotaStore: fs, Quotas: map[string]WorkspaceQuota{"ws_a": {CallsPerSecond: 40, Burst: 4}}})
	w := qs.state("ws_a")
	eventually(t, "the pool is leased", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.tokens == 4 && w.owed == 0
	})
	tokens := func() int { w.mu.Lock(); defer w.mu.Unlock(); return w.tokens }
	for i := range 4 {
		a := qs.admit("ws_a")
		if a.over != nil {
			t.Fatalf("call %d: %+v", i, a.over)
		}
		a.done()
		if n := tokens(); n != 3-i {
			t.Fatalf("after %d calls: %d tokens, want %d", i+1, n, 3-i)
		}
	}
	if r := qs.admit("ws_a").refused(); r == nil || r.reason != "quota_exceeded" {
		t.Fatalf("a fifth call: %+v", r)
	}
}

// TestQuotaInFlight: a gateway runs at most InFlight calls of a workspace
// at once that may dispatch; the next is claimed with Refuse (a final
// record replays, nothing is dispatched) until one ends.
func TestQuotaInFlight(t *testing.T) {
	qs := startQuotas(t, Config{Quotas: map[string]WorkspaceQuota{"ws_a": {InFlight: 2}}})
	a, b := qs.admit("ws_a"), qs.admit("ws_a")
	c := qs.admit("ws_a")
	if a.over != nil || b.over != nil || c.over == nil || c.over.reason != "quota_exceeded" {
		t.Fatalf("a %+v b %+v c %+v", a.over, b.over, c.over)
	}
	var re *refusalError
	if c.refused() != nil || !errors.As(c.refuse(), &re) || re.r.status != 429 || c.noCreate() != nil {
		t.Fatalf("in_flight refuses dispatches: refused %v refuse %v noCreate %v", c.refused(), c.refuse(), c.noCreate())
	}
	c.done() // holds nothing: frees nothing
	if d := qs.admit("ws_a"); d.over == nil {
		t.Fatal("a refused call freed a slot")
	}
	a.done()
	if d := qs.admit("ws_a"); d.over != nil {
		t.Fatalf("after one ended: %+v", d.over)
	}
}

// TestQuotaStoredBytesAndStoreFull: stored bytes over the workspace's
// limit (read in the background) refuse the creation of a record
// quota_exceeded, and the store's memory estimate above the headroom
// fraction refuses every workspace's dispatches store_full.
func TestQuotaStoredBytesAndStoreFull(t *testing.T) {
	fs := &fakeQuotaStore{}
	qs := startQuotas(t, Config{QuotaStore: fs, Quotas: map[string]WorkspaceQuota{"ws_a": {StoredBytes: 1000}}})
	if a := qs.admit("ws_a"); a.over != nil {
		t.Fatalf("under: %+v", a.over)
	}
	fs.set(func(f *fakeQuotaStore) { f.stored = 1000 })
	eventually(t, "stored bytes refuse", func() bool {
		a := qs.admit("ws_a")
		defer a.done()
		return a.over != nil && a.over.reason == "quota_exceeded" && a.noCreate() != nil && a.refuse() == nil
	})
	if a := qs.admit("ws_b"); a.over != nil {
		t.Fatalf("ws_b is unlimited: %+v", a.over)
	}
	fs.set(func(f *fakeQuotaStore) { f.memFrac = 0.91 })
	if a := qs.admit("ws_b"); a.over == nil || a.over.reason != "store_full" || a.refuse() == nil || a.noCreate() != nil {
		t.Fatalf("store_full refuses dispatches: %+v", a.over)
	}
	fs.set(func(f *fakeQuotaStore) { f.memFrac = 0.5; f.stored = 10 })
	eventually(t, "room again", func() bool { a := qs.admit("ws_a"); a.done(); return a.over == nil })
}

// TestMemoryInterval: the store's memory is read every quotaRefresh far
// from the headroom fraction, more often near it, and every
// memoryRefreshMin at or above it.
func TestMemoryInterval(t *testing.T) {
	for room, want := range map[float64]time.Duration{0.5: quotaRefresh, memoryNear: quotaRefresh,
		memoryNear / 2: quotaRefresh / 2, 0.001: memoryRefreshMin, 0: memoryRefreshMin, -0.3: memoryRefreshMin} {
		if got := memoryInterval(room); got != want {
			t.Errorf("room %v: %v, want %v", room, got, want)
		}
	}
}

// TestMemoryReadDue: a read is due after the interval of the room left,
// or early once the gateway's own estimate grew by a memoryGrowthShare of
// the room the last read left (a flood right after a read far from the
// fraction), and at every tick with no room left.
func TestMemoryReadDue(t *testing.T) {
	const full = 0.9
	share := (full - 0.1) / memoryGrowthShare
	for _, c := range []struct {
		elapsed time.Duration
		at, now float64
		want    bool
	}{
		{memoryRefreshMin, 0.1, 0.1, false},
		{quotaRefresh - memoryRefreshMin, 0.1, 0.1 + share*0.99, false},
		{quotaRefresh, 0.1, 0.1, true},
		{memoryRefreshMin, 0.1, 0.1 + share, true},
		{memoryRefreshMin, 0.1, 0.85, true},  // near the fraction: a short interval
		{memoryRefreshMin, 0.95, 0.95, true}, // above it: every tick
		{memoryRefreshMin, 0.95, 0.92, true},
	} {
		if got := memoryReadDue(c.elapsed, full, c.at, c.now); got != c.want {
			t.Errorf("after %v, at %v now %v: due %v, want %v", c.elapsed, c.at, c.now, got, c.want)
		}
	}
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

// TestQuotaConfig: a quota New cannot serve is ErrInvalidConfig.
func TestQuotaConfig(t *testing.T) {
	fs := &fakeQuotaStore{}
	for name, cfg := range map[string]Config{
		"negative rate":      {QuotaStore: fs, DefaultQuota: WorkspaceQuota{CallsPerSecond: -1}},
		"burst alone":        {QuotaStore: fs, Quotas: map[string]WorkspaceQuota{"a": {Burst: 3}}},
		"negative in_flight": {Quotas: map[string]WorkspaceQuota{"a": {InFlight: -1}}},
		"rate, no store":     {DefaultQuota: WorkspaceQuota{CallsPerSecond: 1}},
		"stored, no store":   {Quotas: map[string]WorkspaceQuota{"a": {StoredBytes: 1}}},
		"fraction above 1":   {QuotaStore: fs, StoreFullFraction: 1.5},
		"negative fraction":  {QuotaStore: fs, StoreFullFraction: -0.1},
	} {
		if err := checkQuotas(&cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := checkQuotas(&Config{Quotas: map[string]WorkspaceQuota{"a": {InFlight: 1}}}); err != nil {
		t.Fatal(err)
	}
	if qs := newQuotas(&Config{}); qs != nil {
		t.Fatal("quotas without limits or a store")
	}
}

// TestQuotaOnTheWire: over its rate a workspace's call is refused
// quota_exceeded (429 in error.data, retry_after_ms, a Retry-After header,
// safe_new_key false, the key) before its claim, a replay as well as a
// new key, nothing sent; above the headroom fraction a new key is refused
// store_full while a key that holds a final record replays.
func TestQuotaOnTheWire(t *testing.T) {
	fs := &fakeQuotaStore{pool: 2}
	var sent atomic.Int64
	srv := httpToolGateway(t, func() []byte { sent.Add(1); return []byte(`{"ok": true}`) },
		Config{QuotaStore: fs, DefaultQuota: WorkspaceQuota{CallsPerSecond: 10, Burst: 2}})
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
	refusal(k1, "quota_exceeded", 429) // a replay costs a claim too
	// Tokens again, but the store nearly full: a new key is store_full,
	// a final record replays.
	fs.set(func(f *fakeQuotaStore) { f.pool = 100; f.memFrac = 0.95 })
	eventually(t, "tokens again", func() bool {
		_, b := rawCall(t, srv, k1)
		return bytes.Contains(b, []byte(`"replayed":true`))
	})
	refusal("idt_00000000000000000000000000000005", "store_full", 503)
	if sent.Load() != 2 {
		t.Fatalf("vendor saw %d calls, want the 2 accepted", sent.Load())
	}
}

// TestQuotaInFlightBoundsRedispatch: 40 unknown records of a header-bound
// tool retried at once reach the vendor at most InFlight at a time; a
// retry over the limit is refused quota_exceeded with nothing sent.
func TestQuotaInFlightBoundsRedispatch(t *testing.T) {
	const inFlight, records = 4, 40
	var hangUp atomic.Bool
	hangUp.Store(true)
	var running, most, sent atomic.Int64
	release := make(chan struct{})
	vendor := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if hangUp.Load() {
			// Read, then no answer: the outcome is unknown.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		sent.Add(1)
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		running.Add(-1)
		w.Write([]byte(`{"ok": true}`))
	})
	srv := httpToolGatewayOf(t, vendor, Config{DefaultQuota: WorkspaceQuota{InFlight: inFlight}})
	key := func(i int) string { return fmt.Sprintf("idt_%032d", i+1) }
	for i := range records {
		if _, b := rawCall(t, srv, key(i)); !bytes.Contains(b, []byte(`"outcome":"unknown"`)) {
			t.Fatalf("call %d: %.300s", i, b)
		}
	}
	hangUp.Store(false)
	var wg sync.WaitGroup
	var answered atomic.Int64
	answers := make([][]byte, records)
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	for i := range records {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, answers[i] = rawCall(t, srv, key(i))
			answered.Add(1)
		}()
	}
	// Every retry is either answered or held by the vendor.
	eventually(t, "every retry answered or at the vendor", func() bool { return answered.Load()+running.Load() == records })
	unblock()
	wg.Wait()
	accepted, refused := 0, 0
	for i, b := range answers {
		switch {
		case bytes.Contains(b, []byte(`"outcome":"accepted"`)):
			accepted++
		case bytes.Contains(b, []byte(`"reason":"quota_exceeded"`)):
			refused++
		default:
			t.Fatalf("retry %d: %.300s", i, b)
		}
	}
	if most.Load() > inFlight || int(sent.Load()) != accepted || accepted < inFlight || accepted+refused != records {
		t.Fatalf("vendor ran %d at once (in_flight %d), saw %d; %d accepted, %d refused", most.Load(), inFlight, sent.Load(), accepted, refused)
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
