package retry

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/obol-gateway/obol/idempotency"
)

// Defaults of the Orchestrator's claim settings (see their fields).
const (
	defaultClaimWait          = 2 * time.Second
	defaultMaxClaimRecoveries = 256
	defaultClaimRecoveryFor   = 7 * 24 * time.Hour // redisstore's default unknown retention
)

// ClaimRecovery is what happened to a claim settled in the background,
// reported to [Orchestrator].OnClaimRecovery.
type ClaimRecovery string

const (
	// RecoveryStarted: the claim's outcome was unknown (its reply lost, or
	// its caller gone with a token); a re-sender took it.
	RecoveryStarted ClaimRecovery = "started"
	// RecoveryGivenBack: the claim had reserved an attempt; it was given
	// back unsent ([idempotency.Store].GiveBack), so the slot is open again.
	RecoveryGivenBack ClaimRecovery = "given_back"
	// RecoverySettled: the store answered the claim without a reservation
	// (in_progress, replay, outcome_unknown, a refusal): nothing to give
	// back.
	RecoverySettled ClaimRecovery = "settled"
	// RecoveryStale: the give-back was refused: the record moved on (a
	// client's retry took the slot after the lease, an operator settled
	// it). Nothing was sent under the token; the slot is as the record says.
	RecoveryStale ClaimRecovery = "stale"
	// RecoveryDropped: no re-sender took the claim (MaxClaimRecoveries were
	// busy, or Close was called); it is not settled, and if Redis ran it,
	// its slot reads unknown after the lease, as after a gateway that died
	// before sending.
	RecoveryDropped ClaimRecovery = "dropped"
	// RecoveryAbandoned: a started re-sender stopped before the store
	// answered: Close was called, or ClaimRecoveryFor passed.
	RecoveryAbandoned ClaimRecovery = "abandoned"
)

func (o *Orchestrator) claimWait() time.Duration {
	if o.ClaimWait > 0 {
		return o.ClaimWait
	}
	return defaultClaimWait
}

// recoveries are the background re-senders of an Orchestrator, made on
// first use.
type recoveries struct {
	ctx    context.Context // ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	running int
	closed  bool
}

func (o *Orchestrator) recoveries() *recoveries {
	o.recOnce.Do(func() {
		ctx, cancel := context.WithCancel(context.Background())
		o.rec = &recoveries{ctx: ctx, cancel: cancel}
	})
	return o.rec
}

// Close stops the background re-senders of claims (see ClaimWait) and
// waits for them to return (each within ClaimWait). A claim still
// unsettled then stays as Redis has it: if Redis ran it, its slot reads
// unknown after the lease, as after a gateway that died before sending.
// Do may still be called; a claim that would need a re-sender after Close
// is reported [RecoveryDropped]. Close is safe to call more than once.
func (o *Orchestrator) Close() {
	r := o.recoveries()
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// claimRecoveries returns how many claims are being settled in the
// background now.
func (o *Orchestrator) claimRecoveries() int {
	r := o.recoveries()
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

func (o *Orchestrator) reportRecovery(call *Call, ev ClaimRecovery) {
	if o.OnClaimRecovery != nil {
		o.OnClaimRecovery(call, ev)
	}
}

// settleClaim hands a claim whose outcome is not known to a background
// re-sender. With token 0 the claim's reply was lost: it is re-sent with
// the same op id until the store answers, and a claimed answer's token is
// given back. With a token (a claimed answer whose caller went away, inc
// its incarnation) only the give-back remains. It returns at once.
func (o *Orchestrator) settleClaim(call *Call, req idempotency.ClaimRequest, token int, inc string) {
	r := o.recoveries()
	limit := o.MaxClaimRecoveries
	if limit == 0 {
		limit = defaultMaxClaimRecoveries
	}
	r.mu.Lock()
	if r.closed || limit < 0 || r.running >= limit {
		r.mu.Unlock()
		o.reportRecovery(call, RecoveryDropped)
		return
	}
	r.running++
	r.wg.Add(1)
	r.mu.Unlock()
	o.reportRecovery(call, RecoveryStarted)
	// The call is copied: the caller's may change once Do returned.
	c := *call
	go func() {
		defer r.wg.Done()
		ev := o.runRecovery(r.ctx, &c, req, token, inc)
		r.mu.Lock()
		r.running--
		r.mu.Unlock()
		o.reportRecovery(&c, ev)
	}()
}

// runRecovery re-sends the claim (unless token is known) and gives the
// token back, each until the store answers, ctx ends or ClaimRecoveryFor
// passes.
func (o *Orchestrator) runRecovery(ctx context.Context, call *Call, req idempotency.ClaimRequest, token int, inc string) ClaimRecovery {
	recoverFor := o.ClaimRecoveryFor
	if recoverFor <= 0 {
		recoverFor = defaultClaimRecoveryFor
	}
	ctx, cancel := context.WithTimeout(ctx, recoverFor)
	defer cancel()
	wait := o.claimWait()
	for i := 0; token == 0; i++ {
		cctx, ccancel := context.WithTimeout(ctx, wait)
		res, err := o.Store.Claim(cctx, req)
		ccancel()
		switch {
		case err == nil && res.Status == idempotency.StatusClaimed:
			token, inc = res.Token, res.Incarnation
			continue
		case err == nil || !errors.Is(err, idempotency.ErrStoreUnavailable):
			// Answered without a reservation, or refused: no attempt to
			// give back.
			return RecoverySettled
		}
		if !pause(ctx, i) {
			return RecoveryAbandoned
		}
	}
	gb := idempotency.GiveBackRequest{Scope: call.Scope, Key: call.Key, Token: token, ClaimOpID: req.OpID, Incarnation: inc, OpID: idempotency.NewOpID()}
	for i := 0; ; i++ {
		gctx, gcancel := context.WithTimeout(ctx, wait)
		err := o.Store.GiveBack(gctx, gb)
		gcancel()
		switch {
		case err == nil:
			return RecoveryGivenBack
		case !errors.Is(err, idempotency.ErrStoreUnavailable):
			return RecoveryStale
		}
		if !pause(ctx, i) {
			return RecoveryAbandoned
		}
	}
}

// pause waits before re-send i: 100ms, doubling up to 5s. It reports false
// when ctx ended.
func pause(ctx context.Context, i int) bool {
	d := 5 * time.Second
	if i < 6 {
		d = min(d, 100*time.Millisecond<<i)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
