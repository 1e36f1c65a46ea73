package mcpgateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// Quota is a workspace's fair share (docs/DESIGN.md, "refserver wire
// contract"). A zero field is unlimited. A call over any limit may not
// create a record: a key that has one (a replay, in_progress, a redispatch,
// an approved resume) proceeds; any other is refused quota_exceeded, with
// nothing written or sent.
type Quota struct {
	// CallsPerSecond and Burst are a token bucket shared by every gateway
	// on the store ([QuotaStore.TakeTokens]): each new record takes a
	// token. Burst zero is CallsPerSecond rounded up.
	CallsPerSecond float64
	Burst          int
	// StoredBytes bounds the bytes of the workspace's live records, fleet
	// wide, as [QuotaStore.StoredBytes] reads them.
	StoredBytes int64
	// InFlight bounds the calls of the workspace running at once in this
	// gateway.
	InFlight int
}

func (q Quota) zero() bool { return q == Quota{} }

// QuotaStore is what quotas read from the shared store: *redisstore.Store
// is one. The gateway calls it only from background goroutines, never on a
// call's path.
type QuotaStore interface {
	// TakeTokens takes up to n tokens from the workspace's bucket (rate
	// per second, burst deep), and says how long until the next one when
	// it grants fewer than n.
	TakeTokens(ctx context.Context, workspace string, rate float64, burst, n int) (granted int, retryAfter time.Duration, err error)
	// StoredBytes is the bytes of the workspace's live records.
	StoredBytes(ctx context.Context, workspace string) (int64, error)
	// MemoryFraction is the highest used/maxmemory over the store's
	// masters (0 when none has a maxmemory).
	MemoryFraction(ctx context.Context) (float64, error)
}

// DefaultStoreFullFraction is [Config.StoreFullFraction] when zero.
const DefaultStoreFullFraction = 0.9

// Pacing of the background readers of quotas.
const (
	// quotaRefresh is how often stored bytes and the store's memory are
	// read: the lag of both limits.
	quotaRefresh = 500 * time.Millisecond
	// quotaStoreWait bounds each background store call.
	quotaStoreWait = 2 * time.Second
	// leaseSpan is how many seconds of a workspace's rate one lease of
	// tokens holds: the most a gateway holds unused.
	leaseSpan = 0.1
	// inFlightRetry and storedRetry are the retry_after of an in_flight
	// and a stored_bytes refusal (records drain as they expire), and of
	// store_full.
	inFlightRetry  = 100 * time.Millisecond
	storedRetry    = 5 * time.Second
	storeFullRetry = time.Second
)

// quotas is a gateway's enforcement of [Config.Quotas]: local state read
// and written under a mutex on each call, and goroutines that lease tokens
// and read the store behind it.
type quotas struct {
	store    QuotaStore
	def      Quota
	per      map[string]Quota
	fullFrac float64
	// memFrac is math.Float64bits of the store's last MemoryFraction.
	memFrac atomic.Uint64

	mu sync.Mutex
	ws map[string]*wsQuota

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	onErr  func(op string, err error)
}

// wsQuota is one workspace's state in this gateway.
type wsQuota struct {
	name  string
	q     Quota
	burst int
	batch int // tokens leased at once
	kick  chan struct{}

	mu      sync.Mutex
	tokens  int       // the local allowance
	owed    int       // tokens spent on credit, repaid from the next lease
	retryAt time.Time // when the fleet's bucket has a token again
	running int       // calls in flight here
	stored  atomic.Int64
}

// checkQuotas checks the quotas of cfg.
func checkQuotas(cfg *Config) error {
	check := func(where string, q Quota) error {
		switch {
		case q.CallsPerSecond < 0 || math.IsNaN(q.CallsPerSecond) || math.IsInf(q.CallsPerSecond, 0):
			return fmt.Errorf("%w: %s: CallsPerSecond must be a finite number, 0 or more", ErrConfig, where)
		case q.Burst < 0 || q.StoredBytes < 0 || q.InFlight < 0:
			return fmt.Errorf("%w: %s: Burst, StoredBytes and InFlight must be 0 or more", ErrConfig, where)
		case q.Burst > 0 && q.CallsPerSecond == 0:
			return fmt.Errorf("%w: %s: Burst needs CallsPerSecond", ErrConfig, where)
		case cfg.QuotaStore == nil && (q.CallsPerSecond > 0 || q.StoredBytes > 0):
			return fmt.Errorf("%w: %s: CallsPerSecond and StoredBytes need a QuotaStore", ErrConfig, where)
		}
		return nil
	}
	if err := check("DefaultQuota", cfg.DefaultQuota); err != nil {
		return err
	}
	for ws, q := range cfg.Quotas {
		if err := check("Quotas["+strconv.Quote(ws)+"]", q); err != nil {
			return err
		}
	}
	if f := cfg.StoreFullFraction; f != 0 && !(f > 0 && f <= 1) {
		return fmt.Errorf("%w: StoreFullFraction must be above 0 and at most 1", ErrConfig)
	}
	return nil
}

// newQuotas starts the quotas of cfg, which checkQuotas passed; nil when
// nothing is limited.
func newQuotas(cfg *Config) *quotas {
	limited := !cfg.DefaultQuota.zero()
	for _, q := range cfg.Quotas {
		limited = limited || !q.zero()
	}
	if !limited && cfg.QuotaStore == nil {
		return nil
	}
	frac := cfg.StoreFullFraction
	if frac == 0 {
		frac = DefaultStoreFullFraction
	}
	ctx, cancel := context.WithCancel(context.Background())
	qs := &quotas{store: cfg.QuotaStore, def: cfg.DefaultQuota, per: cfg.Quotas, fullFrac: frac,
		ws: map[string]*wsQuota{}, ctx: ctx, cancel: cancel, onErr: cfg.OnQuotaError}
	for ws := range cfg.Quotas {
		qs.state(ws)
	}
	if qs.store != nil {
		qs.wg.Add(1)
		go qs.refresh()
	}
	return qs
}

// close stops the background goroutines and waits for them.
func (qs *quotas) close() {
	qs.cancel()
	qs.wg.Wait()
}

// state is the workspace's state, made (and its lessor started) on first
// use; nil when the workspace is unlimited.
func (qs *quotas) state(ws string) *wsQuota {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	if w, ok := qs.ws[ws]; ok {
		return w
	}
	q, ok := qs.per[ws]
	if !ok {
		q = qs.def
	}
	if q.zero() {
		qs.ws[ws] = nil
		return nil
	}
	w := &wsQuota{name: ws, q: q, kick: make(chan struct{}, 1)}
	if q.CallsPerSecond > 0 {
		w.burst = q.Burst
		if w.burst == 0 {
			w.burst = int(math.Ceil(q.CallsPerSecond))
		}
		w.batch = min(max(int(math.Ceil(q.CallsPerSecond*leaseSpan)), 1), w.burst)
		// One token on credit, so that the first call of a workspace
		// never waits for a lease; the first lease repays it.
		w.tokens, w.owed = 1, 1
		qs.wg.Add(1)
		go qs.lease(w)
		w.wake()
	}
	qs.ws[ws] = w
	return w
}

func (w *wsQuota) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// need is how many tokens to lease now: none while more than half a batch
// is left.
func (w *wsQuota) need() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tokens > w.batch/2 && w.owed == 0 {
		return 0
	}
	return max(w.batch-w.tokens, 0) + w.owed
}

// lease keeps w's local allowance filled from the fleet's bucket. It never
// runs on a call's path: a call that finds the allowance empty is over its
// quota.
func (qs *quotas) lease(w *wsQuota) {
	defer qs.wg.Done()
	for {
		select {
		case <-qs.ctx.Done():
			return
		case <-w.kick:
		}
		for n := w.need(); n > 0; n = w.need() {
			ctx, cancel := context.WithTimeout(qs.ctx, quotaStoreWait)
			got, wait, err := qs.store.TakeTokens(ctx, w.name, w.q.CallsPerSecond, w.burst, n)
			cancel()
			if qs.ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			if err == nil {
				repay := min(got, w.owed)
				w.owed -= repay
				w.tokens += got - repay
				w.retryAt = time.Time{}
				if got < n {
					w.retryAt = time.Now().Add(wait)
				}
			}
			w.mu.Unlock()
			if err != nil {
				qs.reportErr("take_tokens", err)
				wait = 200 * time.Millisecond
			}
			if err == nil && got >= n {
				continue
			}
			t := time.NewTimer(min(max(wait, 5*time.Millisecond), time.Second))
			select {
			case <-qs.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}
}

// refresh reads the store's memory and every limited workspace's stored
// bytes every quotaRefresh.
func (qs *quotas) refresh() {
	defer qs.wg.Done()
	tick := time.NewTicker(quotaRefresh)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(qs.ctx, quotaStoreWait)
		if f, err := qs.store.MemoryFraction(ctx); err == nil {
			qs.memFrac.Store(math.Float64bits(f))
		} else if qs.ctx.Err() == nil {
			qs.reportErr("memory_fraction", err)
		}
		qs.mu.Lock()
		var ws []*wsQuota
		for _, w := range qs.ws {
			if w != nil && w.q.StoredBytes > 0 {
				ws = append(ws, w)
			}
		}
		qs.mu.Unlock()
		for _, w := range ws {
			if n, err := qs.store.StoredBytes(ctx, w.name); err == nil {
				w.stored.Store(n)
			} else if qs.ctx.Err() == nil {
				qs.reportErr("stored_bytes", err)
			}
		}
		cancel()
		select {
		case <-qs.ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (qs *quotas) reportErr(op string, err error) {
	if qs.onErr != nil {
		qs.onErr(op, err)
	}
}

// admission is a call's share: what it holds of its workspace's quota, and
// the refusal it gets if it would create a record.
type admission struct {
	w     *wsQuota
	token bool // took a token of the local allowance
	slot  bool // holds one of InFlight
	// over refuses the creation of a record (retry.Call.NoCreate); nil
	// when the call may create one.
	over *refusal
}

// admit decides locally, without a store call, whether a call of ws may
// create a record. A nil admission is an unlimited call.
func (qs *quotas) admit(ws string) *admission {
	if qs == nil {
		return nil
	}
	a := &admission{}
	if qs.store != nil {
		if f := math.Float64frombits(qs.memFrac.Load()); f > qs.fullFrac {
			a.over = &refusal{reason: "store_full", status: http.StatusServiceUnavailable, retryAfter: storeFullRetry,
				msg: "store_full: the idempotency store is nearly full and takes no new calls; a retry with the same key of a call already recorded proceeds"}
			return a
		}
	}
	w := qs.state(ws)
	if w == nil {
		return a
	}
	a.w = w
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.q.InFlight > 0 && w.running >= w.q.InFlight:
		a.over = quotaRefusal("in_flight", inFlightRetry)
		return a
	case w.q.StoredBytes > 0 && w.stored.Load() >= w.q.StoredBytes:
		a.over = quotaRefusal("stored_bytes", storedRetry)
		return a
	}
	if w.q.CallsPerSecond > 0 {
		if w.tokens == 0 {
			wait := time.Duration(float64(time.Second) / w.q.CallsPerSecond)
			if w.retryAt.After(now) {
				wait = w.retryAt.Sub(now)
			}
			w.wake()
			a.over = quotaRefusal("calls_per_second", wait)
			return a
		}
		w.tokens--
		a.token = true
		if w.tokens <= w.batch/2 {
			w.wake()
		}
	}
	if w.q.InFlight > 0 {
		w.running++
		a.slot = true
	}
	return a
}

func quotaRefusal(limit string, wait time.Duration) *refusal {
	return &refusal{reason: "quota_exceeded", status: http.StatusTooManyRequests, retryAfter: max(wait, time.Millisecond),
		msg: "quota_exceeded: the workspace is over its " + limit + " quota; retry later with the same key"}
}

// noCreate is what the call carries as retry.Call.NoCreate: nil when it
// may create a record.
func (a *admission) noCreate() error {
	if a == nil || a.over == nil {
		return nil
	}
	return &refusalError{*a.over}
}

// done ends the call's share: its InFlight slot is freed, and a token it
// took goes back to the allowance when the call created no record (a
// replay, a refusal of a key that holds one, or one decided before the
// claim).
func (a *admission) done(out retry.Answer, err error) {
	if a == nil || a.w == nil || !a.token && !a.slot {
		return
	}
	w := a.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if a.slot {
		w.running--
	}
	if a.token && createdNothing(out, err) {
		w.tokens++
	}
}

// createdNothing reports whether a call that ended with out and err wrote
// no record: a replay, or a refusal that answers without one.
func createdNothing(out retry.Answer, err error) bool {
	if err == nil {
		return out.Receipt.Replayed
	}
	var re *refusalError
	if errors.As(err, &re) {
		return true
	}
	switch reason, _ := idempotency.Reason(err); reason {
	case "malformed_key", "request_mismatch", "in_progress", "destination_conflict", "approval_key_mismatch",
		"outcome_unknown", "denied", "invalid_arguments", "invalid_request", "policy_denied", "not_found":
		return true
	}
	return false
}

// retryAfterHeader is the Retry-After value of a wait: whole seconds,
// rounded up.
func retryAfterHeader(ms int64) string {
	return strconv.FormatInt(max((ms+999)/1000, 1), 10)
}
