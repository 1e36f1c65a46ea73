package proof

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/receipt"
)

// The linearizability check records concurrent histories of claim, reserve,
// finalize, lookup and an explicit lease expiry against real Redis, and
// checks them with porcupine against a sequential model of docs/DESIGN.md,
// "The record and its lifecycle" with fencing tokens.
//
// Lease expiry as an operation: the store runs with a one-hour lease, so no
// lease ever runs out by the clock during the test. The "expire" operation
// is one atomic EVAL on the record that sets its lease deadline (field "l",
// milliseconds of Redis time, present only while an attempt is in flight)
// to 1 ms after the epoch, if it is still in the future. Every script of
// the store judges a lease by comparing "l" with Redis TIME, so for them
// this is indistinguishable from the clock passing the deadline at that
// instant, and it gives the expiry a single linearization point that the
// model can name. It is the one place where the suite knows the record's
// layout (schema 2: one string, a version byte, then fields of a tag byte,
// a LEB128 length and a value; "l" as big-endian bytes); if the layout
// changes, the expire answers "noop" while the model expects "expired" and
// the check fails loudly rather than passing.
const expireScript = `
local raw = redis.call('GET', KEYS[1])
if not raw or string.byte(raw, 1) ~= 2 then
  return 0
end
local i = 2
while i <= #raw do
  local tag, n, mul, j = string.sub(raw, i, i), 0, 1, i + 1
  while true do
    local b = string.byte(raw, j)
    j = j + 1
    if b < 128 then
      n = n + b * mul
      break
    end
    n, mul = n + (b - 128) * mul, mul * 128
  end
  if tag == 'l' then
    local l = 0
    for k = j, j + n - 1 do
      l = l * 256 + string.byte(raw, k)
    end
    if l > 1 then
      redis.call('SET', KEYS[1], string.sub(raw, 1, i) .. '\1\1' .. string.sub(raw, j + n), 'KEEPTTL')
      return 1
    end
    return 0
  end
  i = j + n
end
return 0`

type linKind int

const (
	linClaim linKind = iota
	linReserve
	linFinalize
	linExpire
	linLookup
)

func (k linKind) String() string {
	return [...]string{"claim", "reserve", "finalize", "expire", "lookup"}[k]
}

type linInput struct {
	Kind        linKind
	Key         int  // partition
	Unsupported bool // the key's binding
	Op          string
	Token       int
	Outcome     effectspec.Outcome
}

type linOutput struct {
	Status   string // claim status, "reserved", "finalized", "found", "stale", "not_found", "expired", "noop"
	Token    int
	Applied  bool
	State    effectspec.Outcome
	Attempts int
}

// linState is one record as the contract sees it.
type linState struct {
	Exists bool
	S      effectspec.Outcome // in_progress, accepted, definitely_rejected, unknown
	N      int                // attempt count = fencing token
	Cycle  int                // attempts in the current cycle
	Live   bool               // the lease of the in-flight attempt has not expired
	LastOp string             // operation id of the last change
	Open   bool               // unknown by the lease-expiry path: the owner's finalize still applies
	// ClaimOp and ClaimTok name the claim that made the current cycle and
	// its token (the record's field K): a copy of it learns the token while
	// it is open.
	ClaimOp  string
	ClaimTok int
}

// linStep is the sequential specification.
func linStep(st linState, in linInput, out linOutput) (bool, linState) {
	inFlight := effectspec.InProgress
	switch in.Kind {
	case linClaim:
		switch {
		case !st.Exists:
			return out == linOutput{Status: "claimed", Token: 1}, linState{true, inFlight, 1, 1, true, in.Op, false, in.Op, 1}
		case st.LastOp == in.Op && st.S == inFlight:
			// A re-sent claim whose first send was applied answers it again.
			return out == linOutput{Status: "claimed", Token: st.N, Applied: true}, st
		case st.LastOp == in.Op && st.S == effectspec.Unknown && !(st.Open && st.ClaimOp == in.Op && st.ClaimTok == st.N):
			// (Unknown by a lease-expiry path that kept this claim's op,
			// as a claim refused by the redispatch limits does, and still
			// on its token: the copy of the cycle's claim below answers.)
			return out == linOutput{Status: "outcome_unknown", Applied: true}, st
		case st.S.Final():
			return out == linOutput{Status: "replay", State: st.S, Attempts: st.N}, st
		case st.ClaimOp == in.Op && st.ClaimTok == st.N && (st.S == inFlight || st.Open):
			// A copy of the claim that made this cycle learns its token.
			return out == linOutput{Status: "claimed", Token: st.N, Applied: true}, st
		case st.S == inFlight && st.Live:
			return out == linOutput{Status: "in_progress"}, st
		case !in.Unsupported && linLimited(st, in):
			// Redispatch limits (DESIGN 6, "Redispatch limits"): refused
			// without recording the op; an expired attempt becomes unknown.
			next := st
			if st.S == inFlight {
				next.S, next.Cycle, next.Live, next.Open = effectspec.Unknown, 0, false, true
			}
			return out == linOutput{Status: "outcome_unknown"}, next
		case !in.Unsupported: // unknown, or in flight with the lease expired
			return out == linOutput{Status: "claimed", Token: st.N + 1}, linState{true, inFlight, st.N + 1, 1, true, in.Op, false, in.Op, st.N + 1}
		default:
			next := st
			if st.S == inFlight { // the expired attempt becomes unknown
				next.S, next.Cycle, next.Live, next.LastOp, next.Open = effectspec.Unknown, 0, false, in.Op, true
			}
			return out == linOutput{Status: "outcome_unknown"}, next
		}
	case linReserve:
		switch {
		case !st.Exists:
			return out == linOutput{Status: "not_found"}, st
		case st.S != inFlight || st.N != in.Token || st.Cycle >= 2 || !st.Live || st.N >= effectspec.DefaultMaxAttempts:
			return out == linOutput{Status: "stale"}, st
		}
		next := st
		next.N, next.Cycle, next.LastOp = st.N+1, st.Cycle+1, in.Op
		return out == linOutput{Status: "reserved", Token: st.N + 1}, next
	case linFinalize:
		switch {
		case !st.Exists:
			return out == linOutput{Status: "not_found"}, st
		case st.S != inFlight && !st.Open || st.N != in.Token:
			// The token is the fence; the clock is not: an expired lease
			// whose slot nobody took over still accepts its own outcome,
			// also once the expiry path turned it unknown.
			return out == linOutput{Status: "stale"}, st
		}
		next := linState{true, in.Outcome, st.N, 0, false, in.Op, false, st.ClaimOp, st.ClaimTok}
		return out == linOutput{Status: "finalized", State: in.Outcome, Attempts: st.N}, next
	case linExpire:
		if st.Exists && st.S == inFlight && st.Live {
			next := st
			next.Live = false
			return out == linOutput{Status: "expired"}, next
		}
		return out == linOutput{Status: "noop"}, st
	case linLookup:
		if !st.Exists {
			return out == linOutput{Status: "not_found"}, st
		}
		s := st.S
		if s == inFlight && !st.Live {
			s = effectspec.Unknown // an expired lease reads as unknown
		}
		return out == linOutput{Status: "found", State: s, Attempts: st.N}, st
	}
	return false, st
}

// linLimited is whether the redispatch limits refuse a claim that would
// dispatch st again. No attempt here is ever finalized never sent, so every
// token may have left: past max_attempts (the default) it is refused, and
// the n-th redispatch for n >= 2 waits lease x 2^(n-1) from the latest
// reservation, which the one-hour lease puts past the end of the test:
// refused too, but for the claim that made the current cycle (K), which
// the backoff exempts.
func linLimited(st linState, in linInput) bool {
	return st.N >= effectspec.DefaultMaxAttempts || st.N >= 2 && st.ClaimOp != in.Op
}

var linModel = porcupine.Model{
	Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
		by := map[int][]porcupine.Operation{}
		var order []int
		for _, op := range h {
			k := op.Input.(linInput).Key
			if _, ok := by[k]; !ok {
				order = append(order, k)
			}
			by[k] = append(by[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(order))
		for _, k := range order {
			out = append(out, by[k])
		}
		return out
	},
	Init: func() any { return linState{} },
	Step: func(st, in, out any) (bool, any) {
		return linStep(st.(linState), in.(linInput), out.(linOutput))
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(linInput), out.(linOutput)
		return fmt.Sprintf("%s(key %d tok %d %s op %.6s) -> %+v", i.Kind, i.Key, i.Token, i.Outcome, i.Op, o)
	},
	DescribeState: func(st any) string { return fmt.Sprintf("%+v", st.(linState)) },
}

// linWorld runs operations against the real store.
type linWorld struct {
	store  *redisstore.Store
	client rueidis.Client
	prefix string
	keys   []idempotency.Key
	expire *rueidis.Lua
}

func (w *linWorld) claim(ctx context.Context, in linInput) (linOutput, error) {
	b := effectspec.BindingHeader
	if in.Unsupported {
		b = effectspec.BindingUnsupported
	}
	res, err := w.store.Claim(ctx, idempotency.ClaimRequest{
		Scope: libScope, Key: w.keys[in.Key], KeySource: idempotency.KeySupplied,
		RequestHash: "sha256:" + fmt.Sprintf("%064x", in.Key), Binding: b,
		Route: receipt.RouteRecord{Connection: "conn_v", Provider: "proofvendor", Fingerprint: "sha256:" + fmt.Sprintf("%064x", 1000+in.Key)},
		OpID:  in.Op,
	})
	if err != nil {
		return linOutput{}, err
	}
	out := linOutput{Status: string(res.Status), Applied: res.AlreadyApplied}
	switch res.Status {
	case idempotency.StatusClaimed:
		out.Token = res.Token
	case idempotency.StatusReplay:
		out.State, out.Attempts = res.Record.State, res.Record.AttemptCount
	}
	return out, nil
}

func refusalOutput(err error) (linOutput, error) {
	switch {
	case errors.Is(err, idempotency.ErrStale):
		return linOutput{Status: "stale"}, nil
	case errors.Is(err, idempotency.ErrNotFound):
		return linOutput{Status: "not_found"}, nil
	}
	return linOutput{}, err
}

func (w *linWorld) run(ctx context.Context, in linInput) (linOutput, error) {
	key := w.keys[in.Key]
	switch in.Kind {
	case linClaim:
		return w.claim(ctx, in)
	case linReserve:
		r, err := w.store.Reserve(ctx, idempotency.ReserveRequest{Scope: libScope, Key: key, Token: in.Token, OpID: in.Op})
		if err != nil {
			return refusalOutput(err)
		}
		return linOutput{Status: "reserved", Token: r.Token, Applied: r.AlreadyApplied}, nil
	case linFinalize:
		rec, err := w.store.Finalize(ctx, idempotency.FinalizeRequest{Scope: libScope, Key: key, Token: in.Token, Outcome: in.Outcome, OpID: in.Op,
			Result: &idempotency.StoredResult{Status: 201, Body: []byte(`{"ok":true}`)}})
		if err != nil {
			return refusalOutput(err)
		}
		return linOutput{Status: "finalized", State: rec.State, Attempts: rec.AttemptCount}, nil
	case linExpire:
		rk, err := libScope.StorageKey(w.prefix, key)
		if err != nil {
			return linOutput{}, err
		}
		n, err := w.expire.Exec(ctx, w.client, []string{rk}, nil).AsInt64()
		if err != nil {
			return linOutput{}, err
		}
		if n == 1 {
			return linOutput{Status: "expired"}, nil
		}
		return linOutput{Status: "noop"}, nil
	case linLookup:
		rec, err := w.store.Lookup(ctx, libScope, key)
		if err != nil {
			return refusalOutput(err)
		}
		return linOutput{Status: "found", State: rec.State, Attempts: rec.AttemptCount}, nil
	}
	return linOutput{}, fmt.Errorf("unknown op %v", in.Kind)
}

// TestLinearizability records concurrent histories against real Redis and
// checks them with porcupine.
func TestLinearizability(t *testing.T) {
	start := time.Now()
	const (
		workers      = 6
		opsPerWorker = 40
		nKeys        = 4   // even keys header, odd keys unsupported
		rounds       = 100 // fresh keys each round, so early states recur
	)
	redis := redistest.Start(t)
	client := newClient(t, redis.Addr())
	w := &linWorld{
		client: client, prefix: "lin:",
		store:  newStore(t, client, redisstore.Options{Prefix: "lin:", Lease: time.Hour, Retention: 2 * time.Hour}),
		expire: rueidis.NewLuaScript(expireScript),
	}
	var f figures
	kinds := map[linKind]int{}
	statuses := map[string]int{}
	for round := range rounds {
		w.keys = make([]idempotency.Key, nKeys)
		for i := range w.keys {
			w.keys[i] = idempotency.NewKey()
		}
		base := time.Now()
		var mu sync.Mutex
		var history []porcupine.Operation
		var wg sync.WaitGroup
		for c := range workers {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(round), uint64(c)))
				lastClaim := map[int]string{}
				token := map[int]int{}
				for range opsPerWorker {
					k := rng.IntN(nKeys)
					in := linInput{Key: k, Unsupported: k%2 == 1, Op: idempotency.NewOpID()}
					switch p := rng.IntN(100); {
					case p < 25:
						in.Kind = linClaim
					case p < 35 && lastClaim[k] != "":
						in.Kind, in.Op = linClaim, lastClaim[k] // a re-sent claim
					case p < 50:
						in.Kind, in.Token = linReserve, token[k]
					case p < 70:
						in.Kind, in.Token = linFinalize, token[k]
						// Mostly unknown, which keeps header keys cycling.
						in.Outcome = []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected,
							effectspec.Unknown, effectspec.Unknown, effectspec.Unknown}[rng.IntN(5)]
					case p < 82:
						in.Kind = linExpire
					default:
						in.Kind = linLookup
					}
					if (in.Kind == linReserve || in.Kind == linFinalize) && (in.Token == 0 || rng.IntN(5) == 0) {
						in.Token = 1 + rng.IntN(4) // sometimes a stale or foreign token
					}
					call := time.Since(base).Nanoseconds()
					out, err := w.run(context.Background(), in)
					ret := time.Since(base).Nanoseconds()
					if err != nil {
						t.Errorf("%s: %v", in.Kind, err)
						return
					}
					if in.Kind == linClaim {
						lastClaim[k] = in.Op
					}
					if out.Status == "claimed" || out.Status == "reserved" {
						token[k] = out.Token
					}
					mu.Lock()
					history = append(history, porcupine.Operation{ClientId: c, Input: in, Call: call, Output: out, Return: ret})
					kinds[in.Kind]++
					tag := in.Kind.String() + ":" + out.Status
					if out.Applied {
						tag += "+applied"
					}
					statuses[tag]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			return
		}
		f.calls += len(history)
		res, info := porcupine.CheckOperationsVerbose(linModel, history, time.Minute)
		switch res {
		case porcupine.Ok:
		case porcupine.Illegal:
			f.attemptMismatches++
			out, err := os.CreateTemp("", "proof-linearizability-*.html")
			if err == nil {
				porcupine.Visualize(linModel, info, out)
				out.Close()
				t.Errorf("round %d: history of %d operations is not linearizable; visualization: %s", round, len(history), out.Name())
			} else {
				t.Errorf("round %d: history of %d operations is not linearizable", round, len(history))
			}
		default:
			t.Errorf("round %d: porcupine could not decide within a minute", round)
		}
	}
	// The history must have exercised the interesting transitions.
	for _, want := range []string{"claim:claimed", "claim:in_progress", "claim:replay", "claim:outcome_unknown",
		"claim:claimed+applied", "reserve:reserved", "reserve:stale", "finalize:finalized", "finalize:stale", "expire:expired", "lookup:found"} {
		if statuses[want] == 0 {
			t.Errorf("no %s in the histories", want)
		}
	}
	f.note("statuses=%v", statuses)
	f.report(t, start)
}

// TestLinearizabilityModelRejects shows that the checker can fail: histories
// that break the contract are found illegal, and a legal one passes.
func TestLinearizabilityModelRejects(t *testing.T) {
	op := func(c int, in linInput, out linOutput, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: in, Output: out, Call: call, Return: ret}
	}
	claim := func(op string) linInput { return linInput{Kind: linClaim, Op: op} }
	for _, tc := range []struct {
		name  string
		legal bool
		h     []porcupine.Operation
	}{
		{"one claim wins, the other is in progress", true, []porcupine.Operation{
			op(0, claim("a"), linOutput{Status: "claimed", Token: 1}, 0, 10),
			op(1, claim("b"), linOutput{Status: "in_progress"}, 1, 11),
		}},
		{"two claims both win", false, []porcupine.Operation{
			op(0, claim("a"), linOutput{Status: "claimed", Token: 1}, 0, 10),
			op(1, claim("b"), linOutput{Status: "claimed", Token: 1}, 1, 11),
		}},
		{"a live lease is taken over", false, []porcupine.Operation{
			op(0, claim("a"), linOutput{Status: "claimed", Token: 1}, 0, 1),
			op(1, claim("b"), linOutput{Status: "claimed", Token: 2}, 2, 3),
		}},
		{"a stale token finalizes", false, []porcupine.Operation{
			op(0, claim("a"), linOutput{Status: "claimed", Token: 1}, 0, 1),
			op(0, linInput{Kind: linExpire}, linOutput{Status: "expired"}, 2, 3),
			op(1, claim("b"), linOutput{Status: "claimed", Token: 2}, 4, 5),
			op(0, linInput{Kind: linFinalize, Token: 1, Outcome: effectspec.Accepted, Op: "f"},
				linOutput{Status: "finalized", State: effectspec.Accepted, Attempts: 2}, 6, 7),
		}},
		{"unsupported binding gets a second attempt", false, []porcupine.Operation{
			op(0, linInput{Kind: linClaim, Unsupported: true, Op: "a"}, linOutput{Status: "claimed", Token: 1}, 0, 1),
			op(0, linInput{Kind: linExpire}, linOutput{Status: "expired"}, 2, 3),
			op(1, linInput{Kind: linClaim, Unsupported: true, Op: "b"}, linOutput{Status: "claimed", Token: 2}, 4, 5),
		}},
		{"a re-sent claim is applied twice", false, []porcupine.Operation{
			op(0, linInput{Kind: linClaim, Op: "a"}, linOutput{Status: "claimed", Token: 1}, 0, 1),
			op(0, linInput{Kind: linExpire}, linOutput{Status: "expired"}, 2, 3),
			op(0, linInput{Kind: linClaim, Op: "a"}, linOutput{Status: "claimed", Token: 2}, 4, 5),
		}},
		{"a third attempt in one cycle", false, []porcupine.Operation{
			op(0, claim("a"), linOutput{Status: "claimed", Token: 1}, 0, 1),
			op(0, linInput{Kind: linReserve, Token: 1, Op: "r1"}, linOutput{Status: "reserved", Token: 2}, 2, 3),
			op(0, linInput{Kind: linReserve, Token: 2, Op: "r2"}, linOutput{Status: "reserved", Token: 3}, 4, 5),
		}},
	} {
		if got := porcupine.CheckOperations(linModel, tc.h); got != tc.legal {
			t.Errorf("%s: linearizable = %v, want %v", tc.name, got, tc.legal)
		}
	}
}
