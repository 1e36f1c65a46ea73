package mcpgateway

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-gateway/obol/idempotency"
)

// WorkspaceQuota is a workspace's fair share (docs/DESIGN.md, "Quotas and
// headroom"). A zero field is unlimited. Quotas count what costs: the
// rate every call's claim, InFlight every dispatch, StoredBytes every new
// record. Nothing refuses a finalize, a renewal or a settle.
type WorkspaceQuota struct {
	// CallsPerSecond and Burst are a token bucket shared by every gateway
	// on the store ([idempotency.QuotaStore.TakeTokens]): every tools/call takes a
	// token before its claim (a new call, a replay, a redispatch), and
	// one over it is refused quota_exceeded before its claim. Burst zero
	// is CallsPerSecond rounded up.
	CallsPerSecond float64
	Burst          int
	// StoredBytes bounds the bytes of the workspace's live records, fleet
	// wide, as [idempotency.QuotaStore.StoredBytes] reads them: a call over it may not
	// create a record (a key that has one proceeds).
	StoredBytes int64
	// InFlight bounds the calls of the workspace running at once in this
	// gateway: a call over it may not dispatch (a final record replays;
	// a first attempt, a redispatch, an approved resume are refused).
	InFlight int
}

func (q WorkspaceQuota) zero() bool { return q == WorkspaceQuota{} }

// DefaultStoreFullFraction is [Config.StoreFullFraction] when zero.
const DefaultStoreFullFraction = 0.9

// Pacing of the background readers of quotas.
const (
	// quotaRefresh is how often stored bytes are read, and the store's
	// memory while far from the headroom fraction: the lag of both
	// limits.
	quotaRefresh = 500 * time.Millisecond
	// memoryNear is how close to the headroom fraction the store's
	// memory is read more often: the interval shrinks with the room
	// left, down to memoryRefreshMin at and above the fraction.
	memoryNear       = 0.1
	memoryRefreshMin = 20 * time.Millisecond
	// memoryGrowthShare: a read of the store's memory is due once this
	// gateway's estimate grew by this share of the room the last read
	// left, so that up to this many gateways writing at its pace leave
	// the room unfilled between two reads.
	memoryGrowthShare = 8
	// quotaStoreWait bounds each background store call.
	quotaStoreWait = 2 * time.Second
	// leaseSpan is how many seconds of a workspace's rate one lease of
	// tokens holds: the most a gateway holds unused.
	leaseSpan = 0.1
	// firstLeaseWait bounds how long a call that finds no token waits for
	// its workspace's first lease (one store call): a burst at start is
	// not refused for a lease not yet taken.
	firstLeaseWait = 100 * time.Millisecond
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
	store    idempotency.QuotaStore
	def      WorkspaceQuota
	per      map[string]WorkspaceQuota
	fullFrac float64

	mu sync.Mutex
	ws map[string]*wsQuota

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	onErr  func(op string, err error)
	// firstWait is firstLeaseWait (a test's own).
	firstWait time.Duration
}

// wsQuota is one workspace's state in this gateway.
type wsQuota struct {
	name  string
	q     WorkspaceQuota
	burst int
	batch int // tokens leased at once
	kick  chan struct{}
	// leased is closed once the first lease returned (tokens or not).
	leased chan struct{}

	mu      sync.Mutex
	tokens  int       // the local allowance
	owed    int       // tokens spent on credit, repaid from the next lease
	retryAt time.Time // when the fleet's bucket has a token again
	running int       // calls in flight here
	stored  atomic.Int64
}

// checkQuotas checks the quotas of cfg.
func checkQuotas(cfg *Config) error {
	check := func(where string, q WorkspaceQuota) error {
		switch {
		case q.CallsPerSecond < 0 || math.IsNaN(q.CallsPerSecond) || math.IsInf(q.CallsPerSecond, 0):
			return fmt.Errorf("%w: %s: CallsPerSecond must be a finite number, 0 or more", ErrInvalidConfig, where)
		case q.Burst < 0 || q.StoredBytes < 0 || q.InFlight < 0:
			return fmt.Errorf("%w: %s: Burst, StoredBytes and InFlight must be 0 or more", ErrInvalidConfig, where)
		case q.Burst > 0 && q.CallsPerSecond == 0:
			return fmt.Errorf("%w: %s: Burst needs CallsPerSecond", ErrInvalidConfig, where)
		case cfg.QuotaStore == nil && (q.CallsPerSecond > 0 || q.StoredBytes > 0):
			return fmt.Errorf("%w: %s: CallsPerSecond and StoredBytes need a QuotaStore", ErrInvalidConfig, where)
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
		return fmt.Errorf("%w: StoreFullFraction must be above 0 and at most 1", ErrInvalidConfig)
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
		ws: map[string]*wsQuota{}, ctx: ctx, cancel: cancel, onErr: cfg.OnQuotaError, firstWait: firstLeaseWait}
	for ws := range cfg.Quotas {
		qs.state(ws)
	}
	if qs.store != nil {
		qs.wg.Add(2)
		go qs.refresh()
		go qs.watchMemory()
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
	w := &wsQuota{name: ws, q: q, kick: make(chan struct{}, 1), leased: make(chan struct{})}
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
// quota, unless the first lease has not returned yet (admit waits for it,
// at most firstLeaseWait).
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
			select {
			case <-w.leased:
			default:
				close(w.leased) // only this goroutine closes it
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

// refresh reads every limited workspace's stored bytes every
// quotaRefresh.
func (qs *quotas) refresh() {
	defer qs.wg.Done()
	tick := time.NewTicker(quotaRefresh)
	defer tick.Stop()
	for {
		qs.mu.Lock()
		var ws []*wsQuota
		for _, w := range qs.ws {
			if w != nil && w.q.StoredBytes > 0 {
				ws = append(ws, w)
			}
		}
		qs.mu.Unlock()
		ctx, cancel := context.WithTimeout(qs.ctx, quotaStoreWait)
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

// watchMemory reads the store's memory, every quotaRefresh while the
// estimate is far below the headroom fraction and more often as it comes
// near: between two reads a gateway refuses on the estimate, which adds
// its own writes, so only the other gateways' writes since the last read
// go unseen (docs/DESIGN.md, "Quotas and headroom"). Every
// memoryRefreshMin it checks the estimate (no store call): a read is due
// early once this gateway's own writes took a memoryGrowthShare of the
// room the last read left, since the others may be writing as fast.
func (qs *quotas) watchMemory() {
	defer qs.wg.Done()
	tick := time.NewTicker(memoryRefreshMin)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(qs.ctx, quotaStoreWait)
		if _, err := qs.store.MemoryFraction(ctx); err != nil && qs.ctx.Err() == nil {
			qs.reportErr("memory_fraction", err)
		}
		cancel()
		read, at := time.Now(), qs.memory()
		for {
			select {
			case <-qs.ctx.Done():
				return
			case <-tick.C:
			}
			if memoryReadDue(time.Since(read), qs.fullFrac, at, qs.memory()) {
				break
			}
		}
	}
}

// memoryReadDue tells whether the store's memory is to be read again,
// elapsed after a read whose estimate was at and is now now, with fullFrac
// the headroom fraction: after memoryInterval of the room left, or once
// the estimate grew by a memoryGrowthShare of the room the read left
// (none left: memoryRefreshMin, the caller's tick).
func memoryReadDue(elapsed time.Duration, fullFrac, at, now float64) bool {
	return elapsed >= memoryInterval(fullFrac-now) || now-at >= max(fullFrac-at, 0)/memoryGrowthShare
}

// memoryInterval is the wait before the next read of the store's memory
// with room (a fraction of maxmemory) left below the headroom fraction:
// quotaRefresh beyond memoryNear, shrinking linearly to memoryRefreshMin.
func memoryInterval(room float64) time.Duration {
	if room >= memoryNear {
		return quotaRefresh
	}
	return max(time.Duration(float64(quotaRefresh)*max(room, 0)/memoryNear), memoryRefreshMin)
}

// awaitFirstLease waits, at most firstLeaseWait, for w's first lease to
// return; at once if it has.
func (qs *quotas) awaitFirstLease(w *wsQuota) {
	select {
	case <-w.leased:
		return
	default:
	}
	t := time.NewTimer(qs.firstWait)
	defer t.Stop()
	select {
	case <-w.leased:
	case <-t.C:
	case <-qs.ctx.Done():
	}
}

// memory is the store's estimated used/maxmemory now.
func (qs *quotas) memory() float64 { return qs.store.MemoryEstimate() }

func (qs *quotas) reportErr(op string, err error) {
	if qs.onErr != nil {
		qs.onErr(op, err)
	}
}

// admission is a call's share: what it holds of its workspace's quota, and
// the refusal it gets, if any, and where.
type admission struct {
	w    *wsQuota
	slot bool // holds one of InFlight
	// over is the call's refusal, nil when it may go on as without
	// quotas; scope says what it refuses.
	over  *refusal
	scope overScope
}

// overScope is what a refusal of an admission refuses (docs/DESIGN.md,
// "Quotas and headroom").
type overScope int

const (
	// overCall refuses the call before its claim: the rate, whose token
	// every tools/call takes.
	overCall overScope = iota
	// overDispatch refuses every dispatch, the first attempt and a
	// redispatch (in_flight, store_full): the call is claimed with
	// retry.Call.Refuse, so that a final record still replays and
	// anything else is refused, with nothing written or sent.
	overDispatch
	// overCreate refuses only the creation of a record (stored_bytes):
	// the call is claimed with retry.Call.NoCreate.
	overCreate
)

// admit decides locally, without a store call, what a call of ws may do.
// Every call takes a token of the rate before its claim (a new record, a
// replay, a redispatch all cost a claim); with none left it is refused
// there. In_flight and store_full refuse every dispatch, stored_bytes only
// a new record. A nil admission is an unlimited call.
func (qs *quotas) admit(ws string) *admission {
	if qs == nil {
		return nil
	}
	a := &admission{}
	w := qs.state(ws)
	now := time.Now()
	if w != nil && w.q.CallsPerSecond > 0 {
		w.mu.Lock()
		if w.tokens == 0 {
			w.mu.Unlock()
			qs.awaitFirstLease(w)
			w.mu.Lock()
		}
		if w.tokens == 0 {
			wait := time.Duration(float64(time.Second) / w.q.CallsPerSecond)
			if w.retryAt.After(now) {
				wait = w.retryAt.Sub(now)
			}
			w.wake()
			w.mu.Unlock()
			a.over, a.scope = quotaRefusal("calls_per_second", wait), overCall
			return a
		}
		w.tokens--
		if w.tokens <= w.batch/2 {
			w.wake()
		}
		w.mu.Unlock()
	}
	if qs.store != nil && qs.memory() > qs.fullFrac {
		a.over, a.scope = &refusal{reason: "store_full", status: http.StatusServiceUnavailable, retryAfter: storeFullRetry,
			msg: "store_full: the idempotency store is nearly full and dispatches no calls; a retry with the same key of a completed call replays"}, overDispatch
		return a
	}
	if w == nil {
		return a
	}
	a.w = w
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.q.InFlight > 0 {
		if w.running >= w.q.InFlight {
			a.over, a.scope = quotaRefusal("in_flight", inFlightRetry), overDispatch
			return a
		}
		w.running++
		a.slot = true
	}
	if w.q.StoredBytes > 0 && w.stored.Load() >= w.q.StoredBytes {
		a.over, a.scope = quotaRefusal("stored_bytes", storedRetry), overCreate
	}
	return a
}

func quotaRefusal(limit string, wait time.Duration) *refusal {
	return &refusal{reason: "quota_exceeded", status: http.StatusTooManyRequests, retryAfter: max(wait, time.Millisecond),
		msg: "quota_exceeded: the workspace is over its " + limit + " quota; retry later with the same key"}
}

// refused is the refusal of a call refused before its claim; nil when the
// call is claimed.
func (a *admission) refused() *refusal {
	if a == nil || a.scope != overCall {
		return nil
	}
	return a.over
}

// refuse is what the call carries as retry.Call.Refuse: nil when it may
// dispatch.
func (a *admission) refuse() error {
	if a == nil || a.over == nil || a.scope != overDispatch {
		return nil
	}
	return &refusalError{*a.over}
}

// noCreate is what the call carries as retry.Call.NoCreate: nil when it
// may create a record.
func (a *admission) noCreate() error {
	if a == nil || a.over == nil || a.scope != overCreate {
		return nil
	}
	return &refusalError{*a.over}
}

// done ends the call's share: its InFlight slot is freed. A token it took
// is spent whatever the call did: the claim cost the store all the same.
func (a *admission) done() {
	if a == nil || a.w == nil || !a.slot {
		return
	}
	a.w.mu.Lock()
	a.w.running--
	a.w.mu.Unlock()
}

// retryAfterHeader is the Retry-After value of a wait: whole seconds,
// rounded up.
func retryAfterHeader(ms int64) string {
	return strconv.FormatInt(max((ms+999)/1000, 1), 10)
}
