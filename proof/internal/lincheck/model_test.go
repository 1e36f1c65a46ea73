package lincheck

import (
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/storereply"
)

// Hand-written histories on one key, in milliseconds after a base time,
// against a model with a 100 ms lease and 1 ms of clock slack.
const ms = int64(time.Millisecond)

var (
	base      = int64(1_700_000_000_000) * ms
	testModel = model{lease: 100 * ms, eps: ms}
)

func at(x float64) int64 { return base + int64(x*float64(ms)) }

// h builds a history: each step is an op of one client, with call and
// return in ms (a negative return is an ambiguous op's +infinity).
type h []porcupine.Operation

func (hs h) add(client int, in Input, out Output, call, ret float64) h {
	in.Key, in.Call = "k", at(call)
	if in.Op == "" {
		in.Op = "op" + string(rune('a'+len(hs)))
	}
	out.Return = at(ret)
	if ret < 0 {
		out.Status, out.Return = statusAmbiguous, never
	}
	return append(hs, porcupine.Operation{ClientId: client, Input: in, Call: in.Call, Output: out, Return: out.Return})
}

func claimIn(op string) Input { return Input{Kind: Claim, Op: op} }
func claimU(op string) Input  { return Input{Kind: Claim, Op: op, Unsupported: true} }

func claimed(tok int, lease float64) Output {
	return Output{Status: idempotency.StatusClaimed, Token: tok, Lease: at(lease), VendorKey: "vk"}
}

func claimedU(tok int, lease float64) Output {
	return Output{Status: idempotency.StatusClaimed, Token: tok, Lease: at(lease)}
}

func status(s idempotency.Status) Output { return Output{Status: s} }

func rec(status idempotency.Status, s effectspec.Outcome, n, sent int) Output {
	return Output{Status: status, State: s, Attempts: n, Sent: sent}
}

var (
	inProgress = status(idempotency.StatusInProgress)
	outUnknown = status(idempotency.StatusOutcomeUnknown)
	stale      = Output{Status: storereply.Stale}
	accepted   = effectspec.Accepted
	unknown    = effectspec.Unknown
	inFlight   = effectspec.InProgress
)

func fin(tok int, outcome effectspec.Outcome) Input {
	return Input{Kind: Finalize, Token: tok, Outcome: outcome}
}

func renew(tok int) Input { return Input{Kind: Renew, Token: tok} }

func renewed(lease float64) Output {
	return Output{Status: storereply.Renewed, Lease: at(lease)}
}

func settle(attempts int) Input {
	return Input{Kind: Settle, Attempts: attempts, Outcome: accepted}
}

func reserve(tok int) Input { return Input{Kind: Reserve, Token: tok} }

func reserved(tok int, lease float64) Output {
	return Output{Status: storereply.Reserved, Token: tok, Lease: at(lease)}
}

func lookup() Input { return Input{Kind: Lookup} }

// claimT is an unsupported claim whose attempt may take 1000 ms.
func claimT(op string) Input {
	return Input{Kind: Claim, Op: op, Unsupported: true, Timeout: 1000 * ms}
}

func claimedT(tok int, call float64) Output {
	return Output{Status: idempotency.StatusClaimed, Token: tok, Lease: at(call + 100.5), Deadline: at(call + 1000.5)}
}

var running = status(idempotency.StatusInProgress)

// claimHT is a header claim whose attempt may take 1000 ms.
func claimHT(op string) Input { return Input{Kind: Claim, Op: op, Timeout: 1000 * ms} }

func claimedHT(tok int, call float64) Output {
	return Output{Status: idempotency.StatusClaimed, Token: tok, Lease: at(call + 100.5), Deadline: at(call + 1000.5), VendorKey: "vk"}
}

// TestModel shows that the model accepts histories the contract allows and
// rejects each way of breaking it.
func TestModel(t *testing.T) {
	pm := testModel.porcupine()
	for _, tc := range []struct {
		name  string
		legal bool
		h     h
	}{
		{"one claim wins, the other is in progress", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, claimIn("b"), inProgress, 2, 3)},
		{"two claimed results with the same token", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 10).
			add(1, claimIn("b"), claimed(1, 100.5), 1, 11)},
		{"a live lease is taken over", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, claimIn("b"), claimed(2, 102.5), 2, 3)},
		{"a lapsed lease is taken over (header)", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, claimIn("b"), claimed(2, 250.5), 150, 151)},
		{"a claim's lease is not call + lease", false, h{}.
			add(0, claimIn("a"), claimed(1, 300), 0, 1)},
		{"the vendor key changes within a record", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, claimIn("b"), Output{Status: idempotency.StatusClaimed, Token: 2, Lease: at(250.5), VendorKey: "other"}, 150, 151)},
		{"claimed twice while the lease is live (unsupported)", false, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(1, claimU("b"), claimedU(2, 150.5), 50, 51)},
		{"claimed again after a lapsed attempt that may have left (unsupported)", false, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(1, claimU("b"), claimedU(2, 250.5), 150, 151)},
		{"outcome unknown after the lapse, then the owner's finalize still applies", true, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(1, claimU("b"), outUnknown, 150, 151).
			add(0, fin(1, accepted), rec(storereply.Finalized, accepted, 1, 1), 160, 161).
			add(1, claimU("c"), Output{Status: idempotency.StatusReplay, State: accepted, Attempts: 1, Sent: 1, Body: ""}, 170, 171)},
		{"outcome unknown while the lease is live", false, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(1, claimU("b"), outUnknown, 50, 51)},
		{"a finalize with a stale token applied", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, claimIn("b"), claimed(2, 250.5), 150, 151).
			add(0, fin(1, accepted), rec(storereply.Finalized, accepted, 2, 2), 160, 161)},
		{"a finalize with a stale token is refused", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, claimIn("b"), claimed(2, 250.5), 150, 151).
			add(0, fin(1, accepted), stale, 160, 161)},
		{"a finalize of a live lease refused", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, fin(1, accepted), stale, 10, 11)},
		{"a renewal extends a live lease", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, renew(1), renewed(150.5), 50, 51).
			add(1, claimIn("b"), inProgress, 120, 121).
			add(1, lookup(), Output{Status: storereply.Found, State: inFlight, Attempts: 1, Sent: 1, Lease: at(150.5)}, 130, 131)},
		{"a renewal revives a lapsed lease", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, renew(1), renewed(250.5), 150, 151)},
		{"a renewal after a lookup saw the lease lapsed", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, lookup(), rec(storereply.Found, unknown, 1, 1), 99, 103).
			add(0, renew(1), renewed(199.8), 99.5, 104)},
		{"a renewal shrinks the lease", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, renew(1), renewed(80), 50, 51)},
		{"a renewal with a stale token", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, reserve(1), reserved(2, 110.5), 10, 11).
			add(1, renew(1), renewed(120.5), 20, 21)},
		{"a renewal with a stale token is refused", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, reserve(1), reserved(2, 110.5), 10, 11).
			add(1, renew(1), stale, 20, 21)},
		{"a reservation after the lease lapsed", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, reserve(1), reserved(2, 250.5), 150, 151)},
		{"a third attempt in one cycle", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, reserve(1), reserved(2, 102.5), 2, 3).
			add(0, reserve(2), reserved(3, 104.5), 4, 5)},
		{"two attempts never sent re-open an unsupported slot", true, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(0, Input{Kind: Reserve, Token: 1, NeverSent: true}, reserved(2, 102.5), 2, 3).
			add(0, Input{Kind: Finalize, Token: 2, Outcome: unknown, NeverSent: true}, rec(storereply.Finalized, unknown, 2, 0), 4, 5).
			add(1, claimU("b"), claimedU(3, 106.5), 6, 7)},
		{"a slot re-opens although the first attempt may have left", false, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(0, reserve(1), reserved(2, 102.5), 2, 3).
			add(0, Input{Kind: Finalize, Token: 2, Outcome: unknown, NeverSent: true}, rec(storereply.Finalized, unknown, 2, 1), 4, 5).
			add(1, claimU("b"), claimedU(3, 106.5), 6, 7)},
		{"a copy of the claim learns its token over the expiry path", true, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(1, claimU("b"), outUnknown, 150, 151).
			add(0, claimU("a"), Output{Status: idempotency.StatusClaimed, Token: 1, Applied: true}, 160, 161)},
		{"a copy of the claim reserves again over the expiry path", false, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(1, claimU("b"), outUnknown, 150, 151).
			add(0, claimU("a"), claimedU(2, 260.5), 160, 161)},
		{"a copy of the claim after its attempt was taken back is judged afresh", true, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(0, Input{Kind: Finalize, Token: 1, Outcome: unknown, NeverSent: true}, rec(storereply.Finalized, unknown, 1, 0), 2, 3).
			add(0, claimU("a"), claimedU(2, 104.5), 4, 5)},
		{"settle from accepted", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, fin(1, accepted), rec(storereply.Finalized, accepted, 1, 1), 2, 3).
			add(1, settle(1), rec(storereply.Settled, accepted, 1, 1), 4, 5)},
		{"settle from accepted is refused", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, fin(1, accepted), rec(storereply.Finalized, accepted, 1, 1), 2, 3).
			add(1, settle(1), Output{Status: storereply.NotUnknown}, 4, 5)},
		{"settle with a wrong attempt count", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, fin(1, unknown), rec(storereply.Finalized, unknown, 1, 1), 2, 3).
			add(1, settle(2), rec(storereply.Settled, accepted, 1, 1), 4, 5)},
		{"settle of unknown, then every claim replays it", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, fin(1, unknown), rec(storereply.Finalized, unknown, 1, 1), 2, 3).
			add(1, settle(2), stale, 4, 5).
			add(1, settle(1), rec(storereply.Settled, accepted, 1, 1), 6, 7).
			add(1, claimIn("b"), Output{Status: idempotency.StatusReplay, State: accepted, Attempts: 1, Sent: 1, Settled: true}, 8, 9)},
		{"settle of a live lease", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, settle(1), rec(storereply.Settled, accepted, 1, 1), 10, 11)},
		{"settle of a lapsed lease, then the owner's finalize is stale", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, settle(1), rec(storereply.Settled, accepted, 1, 1), 150, 151).
			add(0, fin(1, effectspec.DefinitelyRejected), stale, 160, 161)},
		{"a lapsed lease before the attempt deadline: settle waits, the owner's finalize lands", true, h{}.
			add(0, claimT("a"), claimedT(1, 0), 0, 1).
			add(1, settle(1), running, 150, 151).
			add(0, fin(1, accepted), rec(storereply.Finalized, accepted, 1, 1), 500, 501)},
		{"a lapsed lease settled before the attempt deadline", false, h{}.
			add(0, claimT("a"), claimedT(1, 0), 0, 1).
			add(1, settle(1), rec(storereply.Settled, accepted, 1, 1), 150, 151)},
		{"the expiry path keeps the attempt running for settle", true, h{}.
			add(0, claimT("a"), claimedT(1, 0), 0, 1).
			add(1, claimT("b"), outUnknown, 150, 151).
			add(2, settle(1), running, 200, 201).
			add(2, settle(1), rec(storereply.Settled, accepted, 1, 1), 1200, 1201).
			add(0, fin(1, accepted), stale, 1300, 1301)},
		{"settled after the expiry path, before the attempt deadline", false, h{}.
			add(0, claimT("a"), claimedT(1, 0), 0, 1).
			add(1, claimT("b"), outUnknown, 150, 151).
			add(2, settle(1), rec(storereply.Settled, accepted, 1, 1), 200, 201)},
		{"in progress past the attempt deadline and margin", false, h{}.
			add(0, claimT("a"), claimedT(1, 0), 0, 1).
			add(1, settle(1), running, 1200, 1201)},
		{"a redispatch replaced attempt 1's deadline, attempt 2 ended unknown: settle waits for attempt 1", true, h{}.
			add(0, claimHT("a"), claimedHT(1, 0), 0, 1).
			add(1, claimHT("b"), claimedHT(2, 150), 150, 151).
			add(1, fin(2, unknown), rec(storereply.Finalized, unknown, 2, 2), 160, 161).
			add(2, settle(2), running, 170, 171).
			add(2, settle(2), rec(storereply.Settled, accepted, 2, 2), 1200, 1201)},
		{"settled while a replaced attempt may still run", false, h{}.
			add(0, claimHT("a"), claimedHT(1, 0), 0, 1).
			add(1, claimHT("b"), claimedHT(2, 150), 150, 151).
			add(1, fin(2, unknown), rec(storereply.Finalized, unknown, 2, 2), 160, 161).
			add(2, settle(2), rec(storereply.Settled, accepted, 2, 2), 170, 171)},
		{"settled while a replaced attempt may still run, after the later one's never-sent finalize", false, h{}.
			add(0, claimHT("a"), claimedHT(1, 0), 0, 1).
			add(1, claimHT("b"), claimedHT(2, 150), 150, 151).
			add(1, Input{Kind: Finalize, Token: 2, NeverSent: true}, rec(storereply.Finalized, unknown, 2, 1), 160, 161).
			add(2, settle(2), rec(storereply.Settled, accepted, 2, 1), 170, 171)},
		{"an owner's unknown finalize is settleable at once", true, h{}.
			add(0, claimT("a"), claimedT(1, 0), 0, 1).
			add(0, fin(1, unknown), rec(storereply.Finalized, unknown, 1, 1), 2, 3).
			add(1, settle(1), rec(storereply.Settled, accepted, 1, 1), 4, 5)},
		{"a lapsed lease met by another route turns unknown, its attempt still running", true, h{}.
			add(0, claimT("a"), claimedT(1, 0), 0, 1).
			add(1, Input{Kind: Claim, Op: "b", Unsupported: true, Timeout: 1000 * ms, Route: 1}, status(idempotency.StatusDestinationConflict), 150, 151).
			add(2, settle(1), running, 200, 201).
			add(0, fin(1, accepted), rec(storereply.Finalized, accepted, 1, 1), 500, 501)},
		{"the first lease past the attempt deadline", false, h{}.
			add(0, Input{Kind: Claim, Op: "a", Unsupported: true, Timeout: 50 * ms}, Output{Status: idempotency.StatusClaimed, Token: 1, Lease: at(100.5), Deadline: at(50.5)}, 0, 1)},
		{"the first lease at the attempt deadline", true, h{}.
			add(0, Input{Kind: Claim, Op: "a", Unsupported: true, Timeout: 50 * ms}, Output{Status: idempotency.StatusClaimed, Token: 1, Lease: at(50.5), Deadline: at(50.5)}, 0, 1)},
		{"a finalize over a settled record", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, settle(1), rec(storereply.Settled, accepted, 1, 1), 150, 151).
			add(0, fin(1, effectspec.DefinitelyRejected), rec(storereply.Finalized, effectspec.DefinitelyRejected, 1, 1), 160, 161)},
		{"a lookup sees a lapsed lease live", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, lookup(), Output{Status: storereply.Found, State: inFlight, Attempts: 1, Sent: 1, Lease: at(100.5)}, 150, 151)},
		{"a lookup sees a live lease lapsed", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, lookup(), rec(storereply.Found, unknown, 1, 1), 50, 51)},
		{"a lookup at the deadline may see either", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, lookup(), rec(storereply.Found, unknown, 1, 1), 99, 101).
			add(2, lookup(), Output{Status: storereply.Found, State: inFlight, Attempts: 1, Sent: 1, Lease: at(100.5)}, 99, 101)},
		{"a replay shows another op's result", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, Input{Kind: Finalize, Token: 1, Outcome: accepted, Body: "mine"}, rec(storereply.Finalized, accepted, 1, 1), 2, 3).
			add(1, claimIn("b"), Output{Status: idempotency.StatusReplay, State: accepted, Attempts: 1, Sent: 1, Body: "other"}, 4, 5)},
		{"another request is a mismatch", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, Input{Kind: Claim, Op: "b", Req: 1}, status(idempotency.StatusRequestMismatch), 2, 3)},
		{"another request is claimed", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, Input{Kind: Claim, Op: "b", Req: 1}, claimed(2, 102.5), 150, 151)},
		{"another route after the lapse is a destination conflict", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(1, Input{Kind: Claim, Op: "b", Route: 1}, status(idempotency.StatusDestinationConflict), 150, 151)},
		{"a re-sent claim answers already applied", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, renew(1), renewed(150.5), 50, 51).
			add(0, claimIn("a"), Output{Status: idempotency.StatusClaimed, Token: 1, Applied: true, Lease: at(150.5), VendorKey: "vk"}, 60, 61)},
		{"a re-sent claim is applied twice", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, claimIn("a"), claimed(2, 250.5), 150, 151)},
		{"an ambiguous claim that was applied", true, h{}.
			add(0, claimIn("a"), Output{}, 0, -1).
			add(1, claimIn("b"), inProgress, 5, 6).
			add(0, claimIn("a"), Output{Status: idempotency.StatusClaimed, Token: 1, Applied: true, Lease: at(100.5), VendorKey: "vk"}, 10, 11)},
		{"an ambiguous claim that never happened", true, h{}.
			add(0, claimIn("a"), Output{}, 0, -1).
			add(1, claimIn("b"), claimed(1, 105.5), 5, 6)},
		{"an ambiguous claim cannot explain two winners", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(2, claimIn("x"), Output{}, 2, -1).
			add(1, claimIn("b"), claimed(1, 103.5), 3, 4)},
		{"an ambiguous renewal cannot revive a lapsed lease", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, renew(1), Output{}, 150, -1).
			add(1, claimIn("b"), inProgress, 200, 201)},
		{"an ambiguous renewal may have kept the slot", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, renew(1), Output{}, 90, -1).
			add(1, claimIn("b"), inProgress, 120, 121)},
		{"the attempt deadline is not read with the lease", false, h{}.
			add(0, Input{Kind: Claim, Op: "a", Timeout: 150 * ms}, Output{Status: idempotency.StatusClaimed, Token: 1, Lease: at(100.5), Deadline: at(160.5), VendorKey: "vk"}, 0, 1)},
		{"a renewal is capped at the attempt deadline", true, h{}.
			add(0, Input{Kind: Claim, Op: "a", Timeout: 150 * ms}, Output{Status: idempotency.StatusClaimed, Token: 1, Lease: at(100.5), Deadline: at(150.5), VendorKey: "vk"}, 0, 1).
			add(0, renew(1), renewed(150.5), 80, 81).
			add(1, claimIn("b"), Output{Status: idempotency.StatusInProgress, Deadline: at(150.5)}, 120, 121)},
		{"a renewal passes the attempt deadline", false, h{}.
			add(0, Input{Kind: Claim, Op: "a", Timeout: 150 * ms}, Output{Status: idempotency.StatusClaimed, Token: 1, Lease: at(100.5), Deadline: at(150.5), VendorKey: "vk"}, 0, 1).
			add(0, renew(1), renewed(180.5), 80, 81)},
		{"a never-sent finalize after the expiry path keeps the count", true, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(1, claimU("b"), outUnknown, 150, 151).
			add(0, Input{Kind: Finalize, Token: 1, Outcome: unknown, NeverSent: true}, rec(storereply.Finalized, unknown, 1, 1), 160, 161).
			add(1, claimU("c"), outUnknown, 170, 171)},
		{"a never-sent finalize after the expiry path takes the attempt back", false, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(1, claimU("b"), outUnknown, 150, 151).
			add(0, Input{Kind: Finalize, Token: 1, Outcome: unknown, NeverSent: true}, rec(storereply.Finalized, unknown, 1, 0), 160, 161)},
		{"a re-sent claim that turned the lease unknown answers it again", true, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(1, claimU("b"), outUnknown, 150, 151).
			add(1, claimU("b"), Output{Status: idempotency.StatusOutcomeUnknown, Applied: true}, 152, 153)},
		{"a re-sent claim that turned the lease unknown is not applied", false, h{}.
			add(0, claimU("a"), claimedU(1, 100.5), 0, 1).
			add(1, claimU("b"), outUnknown, 150, 151).
			add(1, claimU("b"), outUnknown, 152, 153)},
		{"an ambiguous finalize that landed late", true, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, Input{Kind: Finalize, Token: 1, Outcome: accepted, Body: "f"}, Output{}, 2, -1).
			add(1, lookup(), Output{Status: storereply.Found, State: inFlight, Attempts: 1, Sent: 1, Lease: at(100.5)}, 10, 11).
			add(1, claimIn("b"), Output{Status: idempotency.StatusReplay, State: accepted, Attempts: 1, Sent: 1, Body: "f"}, 20, 21)},
		{"an ambiguous finalize's result appears after another's", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, Input{Kind: Finalize, Token: 1, Outcome: accepted, Body: "f"}, Output{}, 2, -1).
			add(1, Input{Kind: Finalize, Token: 1, Outcome: accepted, Body: "g", Op: "g"}, rec(storereply.Finalized, accepted, 1, 1), 10, 11).
			add(1, claimIn("b"), Output{Status: idempotency.StatusReplay, State: accepted, Attempts: 1, Sent: 1, Body: "f"}, 20, 21)},
		{"a settled record reads without its resolution", false, h{}.
			add(0, claimIn("a"), claimed(1, 100.5), 0, 1).
			add(0, fin(1, unknown), rec(storereply.Finalized, unknown, 1, 1), 2, 3).
			add(1, settle(1), rec(storereply.Settled, accepted, 1, 1), 4, 5).
			add(1, lookup(), rec(storereply.Found, accepted, 1, 1), 6, 7)},
	} {
		res := porcupine.CheckOperationsTimeout(pm, tc.h, 10*time.Second)
		if res == porcupine.Unknown {
			t.Errorf("%s: undecided", tc.name)
		} else if got := res == porcupine.Ok; got != tc.legal {
			t.Errorf("%s: linearizable = %v, want %v", tc.name, got, tc.legal)
		}
	}
}

// TestReportNamesTheKey: a violation's report names the key and lists its
// whole history, one op per line.
func TestReportNamesTheKey(t *testing.T) {
	hist := h{}.
		add(0, claimIn("a"), claimed(1, 100.5), 0, 10).
		add(1, claimIn("b"), claimed(1, 100.5), 1, 11).
		add(2, lookup(), rec(storereply.Found, inFlight, 1, 1), 20, 21)
	k := keyRef{name: "k", key: idempotency.NewKey()}
	res := checkParts(testModel, []*partition{{ref: k, ops: hist}}, time.Minute)
	if res.Violations != 1 || res.Undecided != 0 {
		t.Fatalf("violations %d, undecided %d; want 1, 0", res.Violations, res.Undecided)
	}
	lines := strings.Split(strings.TrimSpace(res.Report), "\n")
	if len(lines) != 1+len(hist) || !strings.Contains(lines[0], "key k ("+k.key.String()) {
		t.Fatalf("report:\n%s\nwant a header naming key k and %s, then %d ops", res.Report, k.key, len(hist))
	}
	for i, want := range []string{"claim op=a", "claim op=b", "lookup"} {
		if !strings.Contains(lines[1+i], want) {
			t.Errorf("report line %d: %q, want it to describe %q", 1+i, lines[1+i], want)
		}
	}
}
