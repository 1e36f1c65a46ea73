package lincheck

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/lifecycle"
	"github.com/obol-gateway/obol/internal/storereply"
)

// The checker's model is a second, independent reading of DESIGN; these
// tests hold it to package lifecycle, the executable one: on generated
// single-key sequences (the lane's operations, one at a time, with exact
// times), every answer lifecycle gives must be one the model accepts, and
// the same answer with its token or attempt count off by one must not be.

const (
	agreeLease  = int64(100) // ms, as testModel's
	agreeWindow = int64(86_400_000)
	agreeRetain = int64(3_600_000)
)

// agreeRun is one sequence: lifecycle's record and the model's states.
type agreeRun struct {
	now    int64 // ms
	cur    *lifecycle.Record
	states []state
	log    []string
	// keyed is the binding of a key that is not unsupported: header or
	// meta, which the model reads alike.
	keyed effectspec.BindingKind
}

// outputOf is lifecycle's answer as the lane records it.
func (a *agreeRun) outputOf(in Input, res lifecycle.Result) Output {
	ns := func(v int64) int64 { return v * ms }
	out := Output{Status: res.Status, Applied: res.Applied, Return: ns(a.now)}
	record := func(r *lifecycle.Record, status idempotency.Status) {
		out.Status, out.State, out.Attempts, out.Sent = status, r.State, int(r.Attempts), int(r.Sent)
		out.Body, out.Settled = r.Result.Body, r.Resolution != ""
	}
	switch res.Status {
	case idempotency.StatusClaimed, storereply.Reserved:
		out.Token, out.Applied, out.Lease, out.Deadline, out.VendorKey = int(res.Token), res.Applied, ns(res.Lease),
			ns(res.AttemptDeadline), res.VendorKey
	case storereply.Renewed:
		out.Lease = ns(res.Lease)
	case idempotency.StatusInProgress:
		out.Deadline = ns(res.AttemptDeadline)
	case idempotency.StatusReplay:
		record(res.Record, out.Status)
	case storereply.Finalized, storereply.Settled:
		record(res.Record, out.Status)
	case storereply.Stale, storereply.LeaseExpired, storereply.CycleExhausted, storereply.MaxAttempts:
		out.Status = storereply.Stale
	case storereply.NotUnknown:
		out.Status = storereply.NotUnknown
	}
	if in.Kind == Lookup {
		if a.cur == nil {
			return Output{Status: storereply.NotFound, Return: ns(a.now)}
		}
		record(a.cur, storereply.Found)
		if lifecycle.Lapsed(a.cur, a.now) {
			out.State = effectspec.Unknown
		} else if a.cur.State == effectspec.InProgress {
			out.Lease = ns(a.cur.Lease)
		}
	}
	return out
}

// step runs in through lifecycle and returns its answer.
func (a *agreeRun) step(in Input) lifecycle.Result {
	b := a.keyed
	vk := "vk"
	if in.Unsupported {
		b, vk = effectspec.BindingUnsupported, ""
	}
	var res lifecycle.Result
	var w lifecycle.Write
	switch in.Kind {
	case Claim:
		res, w = lifecycle.Claim(a.cur, lifecycle.ClaimRequest{ScopeVersion: 1, RequestHash: fmt.Sprint("rh", in.Req),
			Binding: b, Fingerprint: fmt.Sprint("fp", in.Route), KeySource: 's', Op: "c:" + in.Op, Lease: agreeLease,
			Retention: agreeRetain, VendorKey: vk, UnknownRetention: agreeRetain, Timeout: in.Timeout / ms, Window: agreeWindow,
			Incarnation: "inc", MaxAttempts: maxAttempts}, a.now)
	case Reserve:
		res, w = lifecycle.Reserve(a.cur, lifecycle.ReserveRequest{Token: int64(in.Token), Op: "r:" + in.Op, Lease: agreeLease,
			UnknownRetention: agreeRetain, Timeout: in.Timeout / ms, PrevNever: in.NeverSent, MaxAttempts: maxAttempts}, a.now)
	case Renew:
		res, w = lifecycle.Renew(a.cur, lifecycle.RenewRequest{Token: int64(in.Token), Op: "n:" + in.Op, Lease: agreeLease}, a.now)
	case Finalize:
		res, w = lifecycle.Finalize(a.cur, lifecycle.FinalizeRequest{Token: int64(in.Token), State: in.Outcome,
			Op: "f:" + in.Op, TTL: agreeRetain, Never: in.NeverSent, Result: lifecycle.EncodedResult{Body: in.Body}}, a.now)
	case Settle:
		res, w = lifecycle.Settle(a.cur, lifecycle.SettleRequest{Attempts: int64(in.Attempts), State: in.Outcome,
			Op: "s:" + in.Op, Retention: agreeRetain, Who: "ops", Margin: agreeLease, ScopeVersion: 1,
			Result: lifecycle.EncodedResult{Body: in.Body}}, a.now)
	case Lookup:
		return lifecycle.Result{}
	}
	if w.Record != nil {
		a.cur = w.Record
	}
	return res
}

// accepts is the model's states after in answered out (none: rejected).
func (a *agreeRun) accepts(in Input, out Output) []state {
	var next []state
	for _, st := range a.states {
		next = append(next, testModel.step(st, in, out)...)
	}
	return next
}

// genInput is the next lane operation; sent holds the earlier ones, for
// re-sends.
func genInput(r *rand.Rand, unsupported bool, n int, sent []Input) Input {
	if len(sent) > 0 && r.IntN(8) == 0 {
		return sent[r.IntN(len(sent))] // a re-sent op
	}
	in := Input{Key: "k", Unsupported: unsupported, Op: fmt.Sprint("op", len(sent))}
	token := n
	if r.IntN(5) == 0 {
		token = n - 1 + 2*r.IntN(2)
	}
	switch k := r.IntN(12); {
	case k < 4:
		in.Kind, in.Timeout = Claim, []int64{40, 300}[r.IntN(2)]*ms
		if r.IntN(8) == 0 {
			in.Req = 1
		}
		if r.IntN(8) == 0 {
			in.Route = 1
		}
	case k < 6:
		in.Kind, in.Token, in.NeverSent, in.Timeout = Reserve, token, r.IntN(2) == 0, 300*ms
	case k < 7:
		in.Kind, in.Token = Renew, token
	case k < 9:
		in.Kind, in.Token = Finalize, token
		in.Outcome = []effectspec.Outcome{effectspec.Accepted, effectspec.DefinitelyRejected, effectspec.Unknown}[r.IntN(3)]
		if in.Outcome == effectspec.Unknown && r.IntN(2) == 0 {
			in.NeverSent = true
		} else {
			in.Body = fmt.Sprint("b", len(sent))
		}
	case k < 11:
		in.Kind, in.Attempts, in.Outcome, in.Body = Settle, token, effectspec.Accepted, "settled"
	default:
		in.Kind = Lookup
	}
	return in
}

func TestModelMatchesLifecycle(t *testing.T) {
	seen := map[string]int{}
	for seed := range 300 {
		r := rand.New(rand.NewPCG(uint64(seed), 4))
		a := &agreeRun{now: base / ms, states: []state{{}}, keyed: effectspec.BindingHeader}
		if seed%2 == 1 {
			a.keyed = effectspec.BindingMeta
		}
		unsupported := r.IntN(2) == 0
		var sent []Input
		for range 40 {
			a.now += []int64{0, 1, 30, 99, 100, 101, 250, 700}[r.IntN(8)]
			var n int
			if a.cur != nil {
				n = int(a.cur.Attempts)
			}
			in := genInput(r, unsupported, n, sent)
			sent = append(sent, in)
			in.Call = a.now * ms
			res := a.step(in)
			out := a.outputOf(in, res)
			a.log = append(a.log, describe(in, out))
			seen[in.Kind.String()+"/"+string(out.Status)]++
			next := a.accepts(in, out)
			if len(next) == 0 {
				t.Fatalf("seed %d: the model rejects lifecycle's answer %s\nafter:\n  %v\nfrom states %+v", seed, describe(in, out),
					a.log, a.states)
			}
			for _, wrong := range offByOne(out) {
				if len(a.accepts(in, wrong)) > 0 {
					t.Fatalf("seed %d: the model accepts %s as well as lifecycle's %s", seed, describe(in, wrong), describe(in, out))
				}
			}
			a.states = dedup(next)
		}
	}
	for _, k := range []string{"claim/claimed", "claim/in_progress", "claim/replay", "claim/outcome_unknown",
		"claim/destination_conflict", "claim/request_mismatch", "reserve/reserved", "reserve/stale", "renew/renewed",
		"finalize/finalized", "finalize/stale", "settle/settled", "settle/in_progress", "settle/not_unknown", "lookup/found"} {
		if seen[k] == 0 {
			t.Errorf("no step answered %s", k)
		}
	}
}

// offByOne are answers that differ from out in a count the model must
// check.
func offByOne(out Output) []Output {
	var wrong []Output
	switch out.Status {
	case idempotency.StatusClaimed, storereply.Reserved:
		w := out
		w.Token++
		wrong = append(wrong, w)
	case idempotency.StatusReplay, storereply.Finalized, storereply.Settled, storereply.Found:
		w := out
		w.Attempts++
		wrong = append(wrong, w)
	}
	return wrong
}

func dedup(sts []state) []state {
	seen := map[state]bool{}
	out := sts[:0:0]
	for _, s := range sts {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}
