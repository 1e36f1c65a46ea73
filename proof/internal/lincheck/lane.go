package lincheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/storereply"
	"github.com/obol-gateway/obol/receipt"
)

// Defaults of a Config's zero fields.
const (
	DefaultWorkspace = "lin"
	DefaultKeys      = 16
	DefaultWorkers   = 8
	// DefaultEpsilon is the clock slack of lease judgements. The lane and
	// Redis read the same system clock (same machine), Redis to the
	// microsecond; the store's rounding to whole milliseconds is accounted
	// for exactly, apart from it.
	DefaultEpsilon   = time.Millisecond
	DefaultOpTimeout = 2 * time.Second
	DefaultPause     = time.Millisecond
	DefaultOpsPerKey = 400
)

// Errors of the lane's own use (never of the store under test, whose
// errors are recorded as ambiguous operations).
var (
	// ErrInvalidConfig: NewLane was given a Config it cannot run.
	ErrInvalidConfig = errors.New("lincheck: invalid config")
	// ErrRunTwice: Run was called on a lane that had run.
	ErrRunTwice = errors.New("lincheck: lane already ran")
)

// Config of a Lane. Zero fields mean the documented defaults.
type Config struct {
	Store     idempotency.Store   // required (a *redisstore.Store in the soak)
	Settler   idempotency.Settler // optional; nil = no settle operations
	Workspace string              // scope workspace id for the lane's keys (default "lin")
	Keys      int                 // sampled keys (partitions) in use at a time, default 16
	Workers   int                 // concurrent clients, default 8
	Seed      int64               // draws every operation; same seed, same choices
	Lease     time.Duration       // the store's lease (needed by the model); required
	// Epsilon is the clock slack of lease judgements (DefaultEpsilon).
	Epsilon time.Duration
	// OpTimeout bounds each store call; one that runs out is ambiguous
	// (DefaultOpTimeout).
	OpTimeout time.Duration
	// Pause is the mean pause of a worker between operations of its own
	// choosing, so that leases lapse under a modest load (DefaultPause).
	Pause time.Duration
	// OpsPerKey retires a key after that many operations for a fresh one, so
	// that each partition's history stays short enough to check and early
	// states recur (DefaultOpsPerKey).
	OpsPerKey int
}

// Lane drives a Store with concurrent clients and records a history that
// Check judges against the model of docs/DESIGN.md, "The record and its lifecycle".
type Lane struct {
	cfg   Config
	model model
	scope idempotency.Scope
	ran   atomic.Bool
	slots []*slot

	mu sync.Mutex // guards history
	history
	// sealMu is held while sealed partitions are checked, so that a Check
	// never misses one between its removal and its verdict.
	sealMu sync.Mutex
}

// keyRef is one partition: an idempotency key and its binding.
type keyRef struct {
	name        string
	key         idempotency.Key
	slot        int
	unsupported bool
	// binding is the key's binding: unsupported, or one the vendor
	// deduplicates on (header, meta), which the model does not tell apart.
	binding effectspec.BindingKind
}

// slot is one of the Keys in use; it moves to a fresh key every OpsPerKey
// operations.
type slot struct {
	mu  sync.Mutex
	cur keyRef
	gen int
	ops int
}

// NewLane checks cfg and fills its defaults.
func NewLane(cfg Config) (*Lane, error) {
	switch {
	case cfg.Store == nil:
		return nil, fmt.Errorf("%w: no store", ErrInvalidConfig)
	case cfg.Lease <= 0:
		return nil, fmt.Errorf("%w: lease %v: the store's lease is required", ErrInvalidConfig, cfg.Lease)
	case cfg.Lease%time.Millisecond != 0:
		return nil, fmt.Errorf("%w: lease %v: the store counts whole milliseconds", ErrInvalidConfig, cfg.Lease)
	case cfg.Store.Lease() != cfg.Lease:
		return nil, fmt.Errorf("%w: lease %v, but the store's is %v", ErrInvalidConfig, cfg.Lease, cfg.Store.Lease())
	case cfg.Keys < 0 || cfg.Workers < 0 || cfg.OpsPerKey < 0:
		return nil, fmt.Errorf("%w: keys %d, workers %d, ops per key %d: must not be negative", ErrInvalidConfig, cfg.Keys, cfg.Workers, cfg.OpsPerKey)
	case cfg.Epsilon < 0 || cfg.OpTimeout < 0 || cfg.Pause < 0:
		return nil, fmt.Errorf("%w: epsilon, op timeout and pause must not be negative", ErrInvalidConfig)
	}
	if cfg.Workspace == "" {
		cfg.Workspace = DefaultWorkspace
	}
	if cfg.Keys == 0 {
		cfg.Keys = DefaultKeys
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.Epsilon == 0 {
		cfg.Epsilon = DefaultEpsilon
	}
	if cfg.OpTimeout == 0 {
		cfg.OpTimeout = DefaultOpTimeout
	}
	if cfg.Pause == 0 {
		cfg.Pause = DefaultPause
	}
	if cfg.OpsPerKey == 0 {
		cfg.OpsPerKey = DefaultOpsPerKey
	}
	scope := idempotency.Scope{Workspace: cfg.Workspace, Connection: "conn_lin", Tool: "lin.call"}
	if err := scope.Validate(); err != nil {
		return nil, fmt.Errorf("%w: workspace: %w", ErrInvalidConfig, err)
	}
	l := &Lane{
		cfg:   cfg,
		model: model{lease: int64(cfg.Lease), eps: int64(cfg.Epsilon)},
		scope: scope,
		history: history{
			parts:  map[string]*partition{},
			sealed: map[string]bool{},
			stats:  map[string]int{},
		},
	}
	for i := range cfg.Keys {
		s := &slot{}
		s.cur = l.fresh(i, 0)
		l.slots = append(l.slots, s)
	}
	return l, nil
}

// fresh makes the key of generation gen of slot i. Keys are random, not
// drawn from the seed: a store that still holds a previous run's records
// would otherwise meet the model with records it does not know. Odd slots
// have the unsupported binding, even ones header or (every other one) meta:
// the record's binding letter, h or m, is on the claim's redispatch
// allow-list either way.
func (l *Lane) fresh(i, gen int) keyRef {
	b := effectspec.BindingHeader
	switch {
	case i%2 == 1:
		b = effectspec.BindingUnsupported
	case i%4 == 2:
		b = effectspec.BindingMeta
	}
	return keyRef{name: fmt.Sprintf("k%d.%d", i, gen), key: idempotency.NewKey(), slot: i, unsupported: i%2 == 1, binding: b}
}

// pick returns the current key of slot i, counting one operation on it.
func (l *Lane) pick(i int) keyRef {
	s := l.slots[i]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ops >= l.cfg.OpsPerKey {
		l.retireKey(s.cur.name)
		s.gen++
		s.ops = 0
		s.cur = l.fresh(i, s.gen)
	}
	s.ops++
	return s.cur
}

// finalDrain is how many more operations a slot's key gets once a record
// is seen final: enough to replay it, not so many that the run idles on it.
const finalDrain = 24

// retire moves slot k's key towards its end once its record is final.
func (l *Lane) retire(k keyRef) {
	s := l.slots[k.slot]
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur.name == k.name && s.ops < l.cfg.OpsPerKey-finalDrain {
		s.ops = l.cfg.OpsPerKey - finalDrain
	}
}

// Run drives operations until ctx is done and records each as a porcupine
// operation. Store errors/timeouts are recorded as ambiguous (the op may or
// may not have happened), never fatal. Safe to call once: a second call is
// ErrRunTwice. Operations in flight when ctx ends run to their own
// OpTimeout, so the end of a run does not make them ambiguous.
func (l *Lane) Run(ctx context.Context) error {
	if l.ran.Swap(true) {
		return ErrRunTwice
	}
	stop, sealed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sealed)
		t := time.NewTicker(max(l.cfg.Lease, 100*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				l.seal(time.Now().Add(-l.quiet()), sealTimeout)
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range l.cfg.Workers {
		w := &worker{l: l, id: i, rng: rand.New(rand.NewPCG(uint64(l.cfg.Seed), uint64(i))), seen: map[string]int{}}
		wg.Go(func() { w.run(ctx) })
	}
	wg.Wait()
	close(stop)
	<-sealed
	return nil
}

// Stats counts the recorded operations by "kind:status" (a re-sent op
// answered as already applied adds "+applied").
func (l *Lane) Stats() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int, len(l.stats))
	for k, v := range l.stats {
		out[k] = v
	}
	return out
}

// exec runs one op of client on k, unless k is sealed, and records it;
// Call and Return are the lane's wall clock around the store's call.
func (l *Lane) exec(ctx context.Context, client int, k keyRef, in Input) (Output, bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.cfg.OpTimeout)
	defer cancel()
	in.Call = time.Now().UnixNano()
	ticket, ok := l.begin(client, k, in)
	if !ok {
		return Output{}, false
	}
	out := l.answer(ctx, k, in)
	l.record(ticket, k, out)
	return out, true
}

// answer calls the store for in; Return is the lane's wall clock after
// the call, never for an ambiguous answer.
func (l *Lane) answer(ctx context.Context, k keyRef, in Input) Output {
	out := l.call(ctx, k, in)
	out.Return = time.Now().UnixNano()
	if out.Status == statusAmbiguous {
		out.Return = never
	}
	return out
}

func (l *Lane) call(ctx context.Context, k keyRef, in Input) Output {
	st := l.cfg.Store
	switch in.Kind {
	case Claim:
		b := k.binding
		res, err := st.Claim(ctx, idempotency.ClaimRequest{
			Scope: l.scope, Key: k.key, KeySource: idempotency.KeySupplied,
			RequestHash: fmt.Sprintf("sha256:%064x", 2*k.slot+in.Req),
			Binding:     b,
			Route:       receipt.RouteRecord{Connection: l.scope.Connection, Provider: "lin", Tool: l.scope.Tool, Method: "POST", Host: "lin.invalid", Path: fmt.Sprintf("/r%d", in.Route), Fingerprint: fmt.Sprintf("sha256:%064x", 1<<20+2*k.slot+in.Route)},
			Timeout:     time.Duration(in.Timeout),
			OpID:        in.Op,
		})
		if err != nil {
			return ambiguous(err)
		}
		out := Output{Status: res.Status, Applied: res.AlreadyApplied}
		switch res.Status {
		case idempotency.StatusClaimed:
			out.Token, out.Lease, out.Deadline, out.VendorKey = res.Token, unixNano(res.LeaseDeadline), unixNano(res.AttemptDeadline), res.VendorKey.String()
		case idempotency.StatusInProgress:
			out.Deadline = unixNano(res.AttemptDeadline)
		case idempotency.StatusReplay:
			if res.Record == nil {
				return Output{Status: statusAmbiguous, Err: "replay without a record"}
			}
			fill(&out, *res.Record)
		}
		return out
	case Reserve:
		r, err := st.Reserve(ctx, idempotency.ReserveRequest{Scope: l.scope, Key: k.key, Token: in.Token,
			Timeout: time.Duration(in.Timeout), PreviousNeverSent: in.NeverSent, OpID: in.Op})
		if err != nil {
			return refusal(err)
		}
		return Output{Status: storereply.Reserved, Token: r.Token, Applied: r.AlreadyApplied, Lease: unixNano(r.LeaseDeadline), Deadline: unixNano(r.AttemptDeadline)}
	case Renew:
		d, err := st.Renew(ctx, idempotency.RenewRequest{Scope: l.scope, Key: k.key, Token: in.Token, OpID: in.Op})
		if err != nil {
			return refusal(err)
		}
		return Output{Status: storereply.Renewed, Lease: unixNano(d)}
	case Finalize:
		req := idempotency.FinalizeRequest{Scope: l.scope, Key: k.key, Token: in.Token, Outcome: in.Outcome, NeverSent: in.NeverSent, OpID: in.Op}
		if in.Body != "" {
			req.Result = &idempotency.StoredResult{Status: statusCode(in.Outcome), Body: []byte(in.Body)}
		}
		rec, err := st.Finalize(ctx, req)
		if err != nil {
			return refusal(err)
		}
		out := Output{Status: storereply.Finalized}
		fill(&out, rec)
		out.Body, out.Settled = "", false // Finalize returns no body
		return out
	case Settle:
		req := idempotency.SettleRequest{Scope: l.scope, Key: k.key, Attempts: in.Attempts, Outcome: in.Outcome,
			By: "lincheck", Note: "settled by the lane", OpID: in.Op}
		if in.Body != "" {
			req.Result = &idempotency.StoredResult{Status: statusCode(in.Outcome), Body: []byte(in.Body)}
		}
		rec, err := l.cfg.Settler.Settle(ctx, req)
		if err != nil {
			return refusal(err)
		}
		out := Output{Status: storereply.Settled}
		fill(&out, rec)
		out.Body, out.Settled = "", false
		return out
	case Lookup:
		rec, err := st.Lookup(ctx, l.scope, k.key)
		if err != nil {
			return refusal(err)
		}
		out := Output{Status: storereply.Found}
		fill(&out, rec)
		return out
	}
	return Output{Status: statusAmbiguous, Err: "unknown kind"}
}

// fill copies what the model checks of a returned record.
func fill(out *Output, rec idempotency.Record) {
	out.State, out.Attempts, out.Sent, out.Settled = rec.State, rec.AttemptCount, rec.SentAttempts, rec.Resolution != nil
	if rec.State == effectspec.InProgress {
		out.Lease = unixNano(rec.LeaseDeadline)
	}
	if rec.Result != nil {
		out.Body = string(rec.Result.Body)
	}
}

func statusCode(s effectspec.Outcome) int {
	switch s {
	case effectspec.Accepted:
		return 201
	case effectspec.DefinitelyRejected:
		return 400
	}
	return 502
}

// refusal maps the sentinels of a refused step to their status; any other
// error leaves the step ambiguous.
func refusal(err error) Output {
	switch {
	case errors.Is(err, idempotency.ErrStale):
		return Output{Status: storereply.Stale}
	case errors.Is(err, idempotency.ErrNotFound):
		return Output{Status: storereply.NotFound}
	case errors.Is(err, idempotency.ErrNotUnknown):
		return Output{Status: storereply.NotUnknown}
	case errors.Is(err, idempotency.ErrInProgress):
		// A settle of a record whose attempt may still run.
		return Output{Status: idempotency.StatusInProgress}
	}
	return ambiguous(err)
}

func ambiguous(err error) Output { return Output{Status: statusAmbiguous, Err: err.Error()} }

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
