package lincheck

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/storereply"
)

// plan is what a worker does with an attempt it reserved, as a gateway
// would: send and finalize, try the one second attempt, renew through a
// long call, stall past its lease, or die.
type plan int

const (
	planFinalize plan = iota // finalize soon
	planReserve              // reserve the second attempt soon
	planRenew                // renew every lease/3 a few times, then finalize
	planSlow                 // stall past the lease, then renew and finalize
	planAbandon              // crash: never come back
)

// owned is an attempt a worker holds the token of.
type owned struct {
	k      keyRef
	token  int
	plan   plan
	due    time.Time
	renews int
}

// worker is one client of the lane. Its choices come from its own seeded
// generator; what it knows of tokens comes from the store's answers to it.
type worker struct {
	l    *Lane
	id   int
	rng  *rand.Rand
	held []*owned
	// last is the last mutating op, for re-sending it with its op id.
	last     *Input
	lastKey  keyRef
	seen     map[string]int // key name -> attempt count a lookup showed
	lastSeen keyRef
}

func (w *worker) run(ctx context.Context) {
	for ctx.Err() == nil {
		if o := w.due(); o != nil {
			w.serve(ctx, o)
			continue
		}
		w.background(ctx)
		w.pause(ctx)
	}
}

// due removes and returns the earliest attempt whose next step is due.
func (w *worker) due() *owned {
	now := time.Now()
	best := -1
	for i, o := range w.held {
		if !o.due.After(now) && (best < 0 || o.due.Before(w.held[best].due)) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	o := w.held[best]
	w.held = append(w.held[:best], w.held[best+1:]...)
	return o
}

func (w *worker) pause(ctx context.Context) {
	d := time.Duration(w.rng.Int64N(2*int64(w.l.cfg.Pause) + 1))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (w *worker) frac(f float64) time.Duration { return time.Duration(f * float64(w.l.cfg.Lease)) }

// adopt draws a plan for a token the store just reserved for this worker.
func (w *worker) adopt(k keyRef, token int) {
	for _, o := range w.held {
		if o.k.name == k.name && o.token == token {
			return // a re-sent op answered a token already held
		}
	}
	o := &owned{k: k, token: token}
	switch p := w.rng.IntN(100); {
	case p < 40:
		o.plan, o.due = planFinalize, time.Now().Add(w.frac(w.rng.Float64()/4))
	case p < 55:
		o.plan, o.due = planReserve, time.Now().Add(w.frac(w.rng.Float64()/4))
	case p < 75:
		o.plan, o.due, o.renews = planRenew, time.Now().Add(w.frac(1.0/3)), 1+w.rng.IntN(3)
	case p < 88:
		o.plan, o.due = planSlow, time.Now().Add(w.frac(1+w.rng.Float64()/2))
	default:
		return // planAbandon
	}
	w.held = append(w.held, o)
}

// serve takes the next step of an attempt it holds.
func (w *worker) serve(ctx context.Context, o *owned) {
	switch o.plan {
	case planFinalize:
		w.finalize(ctx, o.k, o.token)
	case planReserve:
		in := Input{Kind: Reserve, Token: o.token, NeverSent: w.rng.IntN(2) == 0, Timeout: w.timeout()}
		if out := w.do(ctx, o.k, in); out.Status == storereply.Reserved {
			w.adopt(o.k, out.Token)
		}
	case planRenew:
		out := w.do(ctx, o.k, Input{Kind: Renew, Token: o.token})
		if o.renews--; o.renews > 0 && out.Status == storereply.Renewed {
			o.due = time.Now().Add(w.frac(1.0 / 3))
			w.held = append(w.held, o)
			return
		}
		w.finalize(ctx, o.k, o.token)
	case planSlow:
		// Past its lease: the renewal must fail, the finalize applies only
		// if nobody took the slot over.
		w.do(ctx, o.k, Input{Kind: Renew, Token: o.token})
		w.finalize(ctx, o.k, o.token)
	}
}

func (w *worker) finalize(ctx context.Context, k keyRef, token int) {
	in := Input{Kind: Finalize, Token: token}
	switch p := w.rng.IntN(100); {
	case p < 25:
		in.Outcome = effectspec.Accepted
	case p < 40:
		in.Outcome = effectspec.DefinitelyRejected
	case p < 75:
		in.Outcome = effectspec.Unknown // keeps slots cycling
	default:
		in.Outcome, in.NeverSent = effectspec.Unknown, true
	}
	w.do(ctx, k, in)
}

// timeout draws an attempt timeout: shorter than the lease, a little
// longer (renewals reach it), or the default. It is whole milliseconds, as
// the store counts, so the model can tell the deadline it must make.
func (w *worker) timeout() int64 {
	switch w.rng.IntN(3) {
	case 0:
		return int64(max(w.l.cfg.Lease/2, time.Millisecond).Truncate(time.Millisecond))
	case 1:
		return int64(2 * w.l.cfg.Lease)
	}
	return int64(effectspec.DefaultAttemptTimeout)
}

// background is an operation of a client that holds nothing: a claim, a
// re-sent op, a lookup, an operator's settle, or a stray step with a token
// that may be stale.
func (w *worker) background(ctx context.Context) {
	k := w.l.pick(w.rng.IntN(len(w.l.slots)))
	switch p := w.rng.IntN(100); {
	case p < 40:
		in := Input{Kind: Claim, Timeout: w.timeout()}
		switch w.rng.IntN(30) {
		case 0:
			in.Req = 1
		case 1:
			in.Route = 1
		}
		if out := w.do(ctx, k, in); out.Status == "claimed" {
			w.adopt(k, out.Token)
		}
	case p < 48 && w.last != nil:
		in := *w.last
		if out := w.do(ctx, w.lastKey, in); (out.Status == "claimed" || out.Status == storereply.Reserved) && out.Token > 0 {
			w.adopt(w.lastKey, out.Token)
		}
	case p < 65:
		out := w.do(ctx, k, Input{Kind: Lookup})
		if out.Status == storereply.Found {
			w.seen[k.name], w.lastSeen = out.Attempts, k
		}
	case p < 77 && w.l.cfg.Settler != nil:
		in := Input{Kind: Settle, Outcome: effectspec.Accepted}
		if w.rng.IntN(2) == 0 {
			in.Outcome = effectspec.DefinitelyRejected
		}
		if w.lastSeen.name != "" && w.rng.IntN(4) != 0 {
			k = w.lastSeen // settle what a lookup showed, as an operator does
		}
		in.Attempts = w.seen[k.name]
		if in.Attempts == 0 || w.rng.IntN(5) == 0 {
			in.Attempts = 1 + w.rng.IntN(4)
		}
		if w.rng.IntN(2) == 0 {
			in.Body = "set" // replaced by the op id
		}
		w.do(ctx, k, in)
	default:
		tok := 1 + w.rng.IntN(w.seen[k.name]+2)
		switch w.rng.IntN(3) {
		case 0:
			w.do(ctx, k, Input{Kind: Renew, Token: tok})
		case 1:
			w.do(ctx, k, Input{Kind: Reserve, Token: tok, Timeout: w.timeout()})
		default:
			w.finalize(ctx, k, tok)
		}
	}
}

// do runs one op on k with a fresh op id (unless in re-sends one), records
// it, and remembers it for a later re-send.
func (w *worker) do(ctx context.Context, k keyRef, in Input) Output {
	in.Key, in.Unsupported = k.name, k.unsupported
	resent := in.Op != ""
	if !resent {
		in.Op = idempotency.NewOpID()
		if in.Body != "" || in.Kind == Finalize && !in.NeverSent {
			in.Body = in.Op // the stored result names the op that stored it
		}
	}
	out, ok := w.l.exec(ctx, w.id, k, in)
	if !ok {
		return Output{} // the key was sealed: act as a gateway that died
	}
	if out.State.Final() {
		w.l.retire(k)
	}
	if in.Kind != Lookup && (!resent || out.Status == statusAmbiguous) {
		cp := in
		w.last, w.lastKey = &cp, k
	}
	if out.Status == statusAmbiguous && in.Kind != Lookup && w.rng.IntN(2) == 0 {
		// A client that lost the answer sends the same op again.
		out, _ = w.l.exec(ctx, w.id, k, in)
	}
	return out
}
