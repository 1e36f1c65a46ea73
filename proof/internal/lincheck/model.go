package lincheck

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/storereply"
)

// Kind names an operation of the lane.
type Kind int

// The operations the model knows. Held records and approvals are not
// driven by the lane, so the model leaves them out.
const (
	Claim Kind = iota
	Reserve
	Renew
	Finalize
	Settle
	Lookup
)

var kindNames = [...]string{"claim", "reserve", "renew", "finalize", "settle", "lookup"}

func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return fmt.Sprintf("kind(%d)", int(k))
	}
	return kindNames[k]
}

// never is the return time of an ambiguous operation: it may take effect at
// any point after its call, or not at all.
const never = math.MaxInt64

// statusAmbiguous is an Output's status when the store failed: the op may
// or may not have happened. Every other status is the store's answer.
const statusAmbiguous idempotency.Status = "ambiguous"

// Input is one operation as the lane called it. Times are Unix nanoseconds
// of the lane's wall clock, which is the clock the store's Redis TIME reads
// (same machine).
type Input struct {
	Kind        Kind
	Key         string // the partition: one idempotency key of the lane
	Unsupported bool   // the key's binding: unsupported, else header
	Op          string // operation id; a re-sent operation repeats it
	Token       int    // reserve, renew, finalize
	Outcome     effectspec.Outcome
	// NeverSent is FinalizeRequest.NeverSent, or for a reserve
	// ReserveRequest.PreviousNeverSent.
	NeverSent bool
	Attempts  int    // settle: the attempt count the operator saw
	Req       int    // claim: which of two request hashes (0 is the key's own)
	Route     int    // claim: which of two routes (0 is the key's own)
	Timeout   int64  // claim, reserve: the attempt timeout (ns)
	Body      string // finalize, settle: the result body stored ("" none)
	Call      int64  // when the lane called the store
}

// Output is what the store answered. Deadlines are Unix nanoseconds of the
// store's (millisecond) deadlines.
type Output struct {
	Status    idempotency.Status // the store's answer, or statusAmbiguous
	Token     int                // claimed, reserved
	Applied   bool               // claimed, reserved: AlreadyApplied
	State     effectspec.Outcome
	Attempts  int    // replay, finalized, settled, found: AttemptCount
	Sent      int    // the same: SentAttempts
	Lease     int64  // claimed, reserved, renewed, found in flight: the lease deadline
	Deadline  int64  // claimed, reserved, in_progress: the attempt deadline
	VendorKey string // claimed
	Body      string // replay, found: the stored result's body
	Settled   bool   // replay, found: the record carries a resolution
	Err       string // ambiguous: the store's error, for the report
	Return    int64  // when the answer came back; never when ambiguous
}

// state is one record as the contract sees it, plus what the checker has
// learnt about time. Every field is comparable, so == is the state's
// equality.
type state struct {
	Exists     bool
	S          effectspec.Outcome // in_progress, accepted, definitely_rejected, unknown
	N          int                // attempt count = the current fencing token
	Sent       int                // attempts that may have left
	Cycle      int                // attempts of the current cycle (in flight)
	Req, Route int                // the request hash and route the record was made for
	// LMin and LMax bound the lease deadline (in flight): equal once an
	// answer named it, apart while only an ambiguous op set it (LMax is
	// never until a later op bounds it).
	LMin, LMax int64
	E          int64 // attempt deadline while the attempt may run (in flight, or Open); 0 once it ended or not known
	// EE is the latest deadline of an earlier attempt that may have left,
	// kept when a reservation replaced E (and when a finalize ended the
	// later attempt); EEUnk: one of them was a deadline the checker never
	// learnt (an ambiguous reservation's).
	EE        int64
	EEUnk     bool
	Lapsed    bool // an op saw this lease lapsed: so does every later one
	Open      bool // unknown by the lease-expiry path: the owner's finalize applies
	Settled   bool
	VK        string // the vendor key claimed answers carry; "" until seen
	Body      string // stored result body
	LastOp    string // kind-tagged id of the last change ("c:", "r:", "f:", "s:")
	LastRenew string // op id of the renewal that set the lease, in flight
	// ClaimOp and ClaimTok name the claim that made the current cycle and
	// the token it reserved (redisstore's field K): a copy of that claim
	// learns the token while it is open. (The lane gives nothing back.)
	ClaimOp  string
	ClaimTok int
	// Floor is the latest call among the ops linearized so far: every later
	// op takes effect at or after it. It is a function of the linearized
	// set, so it does not split porcupine's cache.
	Floor int64
}

// hiddenOp is the LastOp of a finalize the store made on its own (an
// unused reservation taken back); no operation of the lane matches it.
const hiddenOp = "f:-"

// model is the sequential specification, with the store's lease and the
// clock slack it judges times with.
type model struct {
	lease int64 // ns
	eps   int64 // ns
}

// maxAttempts is the lane's max_attempts: the store's default (the lane's
// claims and reserves set none).
const maxAttempts = effectspec.DefaultMaxAttempts

// msSlack: the store's deadlines are whole milliseconds, its clock read
// rounded down to one; a deadline may be up to 1 ms before call + lease.
const msSlack = int64(time.Millisecond)

func (m model) porcupine() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{state{}} },
		Step: func(st, in, out any) []any {
			next := m.step(st.(state), in.(Input), out.(Output))
			res := make([]any, len(next))
			for i, s := range next {
				res[i] = s
			}
			return res
		},
		DescribeOperation: func(in, out any) string { return describe(in.(Input), out.(Output)) },
		DescribeState:     func(st any) string { return fmt.Sprintf("%+v", st.(state)) },
	}
	return nm.ToModel()
}

// step returns every state the record may be in after in answered out,
// none if it cannot have.
func (m model) step(st state, in Input, out Output) []state {
	st.Floor = max(st.Floor, in.Call)
	if st.S == effectspec.InProgress && st.LMax == never && out.Return != never {
		// The lease was set by an ambiguous op linearized before this one,
		// so at or before this op's point, which is before its return.
		st.LMax = out.Return + m.lease + m.eps
	}
	amb := out.Status == statusAmbiguous
	if amb && in.Kind == Lookup {
		return []state{st} // a read that failed tells nothing
	}
	var next []state
	if amb {
		next = append(next, st) // it never happened
	}
	inFlight := st.Exists && st.S == effectspec.InProgress
	if !inFlight || !dependsOnLease(in.Kind) {
		return append(next, m.apply(st, in, out, false)...)
	}
	canLive, canLapse := m.liveness(st, out)
	if canLive {
		next = append(next, m.apply(st, in, out, false)...)
	}
	if canLapse {
		next = append(next, m.apply(st, in, out, true)...)
	}
	return next
}

func dependsOnLease(k Kind) bool { return k != Finalize }

// liveness says whether the lease of an in-flight record may be live, and
// whether it may have lapsed, at this op's point. The point lies in
// [Floor, Return]; the lease is live at a point before its deadline.
func (m model) liveness(st state, out Output) (canLive, canLapse bool) {
	if st.Lapsed {
		return false, true
	}
	canLive = st.Floor < satAdd(st.LMax, m.eps)
	canLapse = out.Return == never || out.Return >= st.LMin-m.eps
	return canLive, canLapse
}

// sawLive and sawLapsed narrow the lease by what this op saw.
func (m model) sawLive(st *state) { st.LMin = max(st.LMin, st.Floor-m.eps) }

func (m model) sawLapsed(st *state, out Output) {
	st.Lapsed = true
	if out.Return != never {
		st.LMax = min(st.LMax, out.Return+m.eps)
	}
}

func satAdd(a, b int64) int64 {
	if a > never-b {
		return never
	}
	return a + b
}

// freshLease checks the lease and attempt deadline of a reservation made at
// this op's point, and stores them in st. An ambiguous answer leaves them
// open: the lease at least Floor + lease, the attempt deadline unknown.
// The first lease ends at the attempt deadline at the latest.
func (m model) freshLease(st *state, in Input, out Output) bool {
	lease := m.lease
	if in.Timeout > 0 && in.Timeout < lease {
		lease = in.Timeout
	}
	if out.Status == statusAmbiguous {
		st.LMin, st.LMax, st.E = st.Floor+lease-msSlack-m.eps, never, 0
		return true
	}
	if out.Lease < st.Floor+lease-msSlack-m.eps || out.Lease > satAdd(out.Return, lease+m.eps) {
		return false
	}
	// One clock reading makes both deadlines.
	if in.Timeout > 0 && out.Deadline-out.Lease != in.Timeout-lease {
		return false
	}
	st.LMin, st.LMax, st.E = out.Lease, out.Lease, out.Deadline
	return true
}

// sameLease checks a lease the store reports for the current attempt, and
// learns it if the checker did not know it.
func sameLease(st *state, lease int64) bool {
	if lease < st.LMin || lease > st.LMax {
		return false
	}
	st.LMin, st.LMax = lease, lease
	return true
}

func sameDeadline(st *state, d int64) bool {
	if st.E == 0 {
		st.E = d
		return true
	}
	return st.E == d
}

// endLease clears what only an in-flight record has.
func endLease(st *state) {
	st.Cycle, st.LMin, st.LMax, st.E, st.Lapsed, st.LastRenew = 0, 0, 0, 0, false, ""
}

// keepDeadline keeps the deadline of the attempt a reservation replaces
// among the earlier ones' (running: it may still run at its gateway).
func keepDeadline(st *state, running bool) {
	if !running {
		return
	}
	if st.E == 0 {
		st.EEUnk = true
		return
	}
	st.EE = max(st.EE, st.E)
}

// newAttempt reserves attempt N+1 on st as the store does when it answers
// claimed or reserved.
func newAttempt(st *state, op string) {
	st.N++
	st.Sent++
	st.S, st.Lapsed, st.LastRenew, st.LastOp = effectspec.InProgress, false, "", op
}

// withHidden adds, after an ambiguous reservation (or the ambiguous re-send
// of one), the state in which the store took that reservation back with a
// never-sent finalize of its own (redisstore does when a WAIT falls short,
// and then answers an error).
func withHidden(amb bool, st state) []state {
	if !amb {
		return []state{st}
	}
	h := st
	h.S, h.Open, h.Body, h.LastOp = effectspec.Unknown, false, "", hiddenOp
	if h.Sent > 0 {
		h.Sent--
	}
	endLease(&h)
	return []state{st, h}
}

// apply is the specification of one op on one record, for one answer of
// the lease question (lapsed; ignored when not in flight). An ambiguous
// out matches every answer; the states it may leave are all returned.
func (m model) apply(st state, in Input, out Output, lapsed bool) []state {
	amb := out.Status == statusAmbiguous
	is := func(status idempotency.Status) bool { return amb || out.Status == status }
	one := func(ok bool, s state) []state {
		if !ok {
			return nil
		}
		return []state{s}
	}
	if !st.Exists && in.Kind != Claim {
		return one(is(storereply.NotFound), st)
	}
	inFlight := st.S == effectspec.InProgress
	if inFlight && dependsOnLease(in.Kind) {
		if lapsed {
			m.sawLapsed(&st, out)
		} else {
			m.sawLive(&st)
		}
	}
	switch in.Kind {
	case Claim:
		return m.claim(st, in, out, lapsed)
	case Reserve:
		switch {
		case st.LastOp == "r:"+in.Op:
			// A re-sent reservation answers what it answered.
			ok := amb || out.Status == storereply.Reserved && out.Token == st.N && out.Applied && sameLease(&st, out.Lease) && sameDeadline(&st, out.Deadline)
			if !ok {
				return nil
			}
			return withHidden(amb, st)
		case !inFlight || st.N != in.Token || st.Cycle >= 2 || lapsed:
			return one(is(storereply.Stale), st)
		}
		if !in.NeverSent && st.Sent >= maxAttempts {
			// One more attempt that may leave would pass max_attempts.
			return one(is(storereply.Stale), st)
		}
		next := st
		keepDeadline(&next, !in.NeverSent)
		newAttempt(&next, "r:"+in.Op)
		next.Cycle++
		if in.NeverSent {
			next.Sent-- // attempt Token never left
		}
		ok := amb || out.Status == storereply.Reserved && out.Token == next.N && !out.Applied
		if !ok || !m.freshLease(&next, in, out) {
			return nil
		}
		return withHidden(amb, next)
	case Renew:
		if !inFlight || st.N != in.Token || lapsed {
			return one(is(storereply.Stale), st)
		}
		if amb {
			// It may have moved the lease to any time up to its point + lease.
			next := st
			next.LMax, next.LastRenew = never, in.Op
			return []state{next}
		}
		if out.Status != storereply.Renewed || out.Lease < st.LMin {
			return nil // a lease never shrinks
		}
		if st.LastRenew == in.Op {
			return one(sameLease(&st, out.Lease), st) // re-sent: the lease it set
		}
		// A fresh renewal: min(now + lease, attempt deadline), unless the
		// lease already ends later.
		d := out.Lease
		if d > satAdd(out.Return, m.lease+m.eps) {
			return nil // never past now + lease
		}
		fresh := d >= st.Floor+m.lease-msSlack-m.eps && d <= satAdd(out.Return, m.lease+m.eps)
		kept := d <= st.LMax                                                   // the lease already ended later
		moved := (st.E == 0 || d <= st.E) && (fresh || st.E == 0 || d == st.E) // up to now + lease, capped
		if !kept && !moved {
			return nil
		}
		st.LMin, st.LMax, st.LastRenew = d, d, in.Op
		return []state{st}
	case Finalize:
		switch {
		case st.LastOp == "f:"+in.Op:
			return one(amb || m.record(st, out, storereply.Finalized), st)
		case st.N != in.Token || !(inFlight || st.S == effectspec.Unknown && st.Open):
			// The token is the fence: a lapsed lease nobody took over still
			// takes its owner's outcome, also once the expiry path turned
			// the record unknown; nothing else does.
			return one(is(storereply.Stale), st)
		}
		next := st
		next.S, next.Open, next.Body, next.LastOp = in.Outcome, false, in.Body, "f:"+in.Op
		if in.NeverSent {
			next.S = effectspec.Unknown
			if inFlight && next.Sent > 0 {
				next.Sent--
			}
		}
		endLease(&next)
		return one(amb || m.record(next, out, storereply.Finalized), next)
	case Settle:
		switch {
		case st.LastOp == "s:"+in.Op:
			return one(amb || m.record(st, out, storereply.Settled), st)
		case !(st.S == effectspec.Unknown || inFlight && lapsed):
			return one(is(storereply.NotUnknown), st)
		case st.N != in.Attempts:
			return one(is(storereply.Stale), st)
		case ((inFlight || st.Open) && st.E == 0 || st.EEUnk) && out.Status == idempotency.StatusInProgress:
			// A deadline the checker never learnt (an ambiguous
			// reservation's): the attempt may still run.
			return []state{st}
		case (inFlight || st.Open) && st.E != 0 || st.EE != 0:
			// The attempt, or an earlier one a redispatch replaced, may
			// still run at its gateway until its deadline plus the settle
			// margin (the store's lease): refused until then, settleable
			// after.
			until := st.EE + m.lease
			if inFlight || st.Open {
				until = max(until, st.E+m.lease)
			}
			canRun := st.Floor <= until+m.eps
			canEnd := out.Return == never || out.Return > until-m.eps
			if out.Status == idempotency.StatusInProgress {
				return one(canRun, st)
			}
			if !amb && !canEnd {
				return nil
			}
			if amb && !canEnd {
				return []state{st}
			}
		}
		next := st
		next.S, next.Open, next.Settled, next.Body, next.LastOp = in.Outcome, false, true, in.Body, "s:"+in.Op
		endLease(&next)
		return one(amb || m.record(next, out, storereply.Settled), next)
	case Lookup:
		if amb {
			return []state{st} // a read changes nothing
		}
		shown := st
		if inFlight && lapsed {
			shown.S = effectspec.Unknown // a lapsed lease reads unknown
		}
		if !m.record(shown, out, storereply.Found) || out.Body != st.Body || out.Settled != st.Settled {
			return nil
		}
		if shown.S == effectspec.InProgress && !sameLease(&st, out.Lease) {
			return nil
		}
		return []state{st}
	}
	return nil
}

// record checks the counts a returned record carries.
func (m model) record(st state, out Output, status idempotency.Status) bool {
	return out.Status == status && out.State == st.S && out.Attempts == st.N && out.Sent == st.Sent
}

// claim is the state table of docs/DESIGN.md, "The record and its lifecycle",
// rows tried top to bottom, for records that are never held (the lane never
// requires approval, so no redispatch is held either) and inside the vendor's
// window (the lane claims with the default window, 24 hours, and runs for
// seconds, so the window's outcome_unknown row never applies).
func (m model) claim(st state, in Input, out Output, lapsed bool) []state {
	amb := out.Status == statusAmbiguous
	is := func(status idempotency.Status) bool { return amb || out.Status == status }
	keep := func(ok bool) []state {
		if !ok {
			return nil
		}
		return []state{st}
	}
	op := "c:" + in.Op
	if !st.Exists {
		next := state{Exists: true, Req: in.Req, Route: in.Route, Cycle: 1, Floor: st.Floor}
		newAttempt(&next, op)
		next.ClaimOp, next.ClaimTok = op, next.N
		if !amb && !(out.Status == idempotency.StatusClaimed && out.Token == 1 && !out.Applied && m.vendorKey(&next, in, out)) {
			return nil
		}
		if !m.freshLease(&next, in, out) {
			return nil
		}
		return withHidden(amb, next)
	}
	inFlight := st.S == effectspec.InProgress
	switch {
	case in.Req != st.Req:
		return keep(is(idempotency.StatusRequestMismatch))
	case st.LastOp == op && inFlight:
		// A re-sent claim whose first send was applied answers it again,
		// lapsed lease or not.
		ok := amb || out.Status == idempotency.StatusClaimed && out.Token == st.N && out.Applied &&
			m.vendorKey(&st, in, out) && sameLease(&st, out.Lease) && sameDeadline(&st, out.Deadline)
		if !ok {
			return nil
		}
		return withHidden(amb, st)
	case st.LastOp == op && st.S == effectspec.Unknown && !(st.ClaimOp == op && st.ClaimTok == st.N && st.Open):
		// (Unknown on the token this claim reserved, by another claim's
		// lease-expiry path: the copy of the cycle's claim, below.)
		return keep(amb || out.Status == idempotency.StatusOutcomeUnknown && out.Applied)
	case st.S.Final():
		ok := amb || out.Status == idempotency.StatusReplay && out.State == st.S && out.Attempts == st.N &&
			out.Sent == st.Sent && out.Body == st.Body && out.Settled == st.Settled
		return keep(ok)
	case st.ClaimOp == op && st.ClaimTok == st.N && inFlight:
		// A copy of the claim that made this cycle learns its token while
		// it is open, lapsed lease or not, and never reserves.
		ok := amb || out.Status == idempotency.StatusClaimed && out.Token == st.N && out.Applied &&
			m.vendorKey(&st, in, out) && sameLease(&st, out.Lease) && sameDeadline(&st, out.Deadline)
		if !ok {
			return nil
		}
		return withHidden(amb, st)
	case st.ClaimOp == op && st.ClaimTok == st.N && st.S == effectspec.Unknown && st.Open:
		// The same over the lease-expiry path, which keeps no lease. A WAIT
		// that fell short finalizes it never sent, which takes nothing back
		// from an unknown record.
		ok := amb || out.Status == idempotency.StatusClaimed && out.Token == st.N && out.Applied && m.vendorKey(&st, in, out)
		if !ok {
			return nil
		}
		if !amb {
			return []state{st}
		}
		h := st
		h.Open, h.Body, h.LastOp = false, "", hiddenOp
		return []state{st, h}
	case inFlight && !lapsed:
		return keep(amb || out.Status == idempotency.StatusInProgress && sameDeadline(&st, out.Deadline))
	case in.Route != st.Route:
		// Unknown, or in flight with its lease lapsed: only a dispatch is
		// left, and it would go elsewhere. A lapsed attempt first becomes
		// unknown (its deadline kept, its owner's finalize still applies);
		// the claim's op is not recorded.
		if !is(idempotency.StatusDestinationConflict) {
			return nil
		}
		if !inFlight {
			return []state{st}
		}
		next := st
		next.S, next.Open = effectspec.Unknown, true
		lapseKeep(&next)
		return []state{next}
	case st.Sent > 1 && !in.Unsupported && (st.Sent >= maxAttempts || !amb && out.Status == idempotency.StatusOutcomeUnknown):
		// The redispatch's limits: past max_attempts it is refused; before
		// its backoff ends (lease x 2^(n-1) after the latest reservation,
		// from n = 2, which the checker does not time) it may be. No op is recorded; a
		// lapsed attempt becomes unknown, its deadline kept.
		if !is(idempotency.StatusOutcomeUnknown) || !amb && out.Applied {
			return nil
		}
		if st.Sent < maxAttempts && st.ClaimOp == op {
			return nil // the copy of the cycle's claim does not wait
		}
		next := st
		if inFlight {
			next.S, next.Open = effectspec.Unknown, true
			lapseKeep(&next)
		}
		return []state{next}
	case st.Sent == 0 || !in.Unsupported:
		// No attempt may have left, or the vendor deduplicates on our key.
		next := st
		keepDeadline(&next, inFlight || st.Open)
		newAttempt(&next, op)
		next.Cycle, next.Open, next.Body = 1, false, ""
		next.ClaimOp, next.ClaimTok = op, next.N
		if !amb && !(out.Status == idempotency.StatusClaimed && out.Token == next.N && !out.Applied && m.vendorKey(&next, in, out)) {
			return nil
		}
		if !m.freshLease(&next, in, out) {
			return nil
		}
		states := withHidden(amb, next)
		if amb && st.Sent > 1 && inFlight && st.ClaimOp != op {
			// Or its backoff refused it, the lapsed attempt turned unknown.
			lapsedSt := st
			lapsedSt.S, lapsedSt.Open = effectspec.Unknown, true
			lapseKeep(&lapsedSt)
			states = append(states, lapsedSt)
		}
		return states
	}
	if !is(idempotency.StatusOutcomeUnknown) || !amb && out.Applied {
		return nil
	}
	next := st
	if inFlight { // the lapsed attempt becomes unknown; its owner's finalize still applies
		next.S, next.Open, next.LastOp = effectspec.Unknown, true, op
		lapseKeep(&next)
	}
	return []state{next}
}

// lapseKeep ends the lease of an attempt the expiry path turned unknown,
// keeping its deadline: the attempt may still run at its gateway.
func lapseKeep(st *state) {
	e := st.E
	endLease(st)
	st.E = e
}

// vendorKey checks the vendor key of a claimed answer: one per record of a
// header binding, none for an unsupported one.
func (m model) vendorKey(st *state, in Input, out Output) bool {
	switch {
	case in.Unsupported:
		return out.VendorKey == ""
	case out.VendorKey == "":
		return false
	case st.VK == "":
		st.VK = out.VendorKey
		return true
	}
	return st.VK == out.VendorKey
}

// describe renders one op for a report: its input and what came back.
func describe(in Input, out Output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s op=%.8s", in.Kind, in.Op)
	switch in.Kind {
	case Claim:
		if in.Req != 0 {
			b.WriteString(" other-request")
		}
		if in.Route != 0 {
			b.WriteString(" other-route")
		}
	case Reserve:
		fmt.Fprintf(&b, " token=%d prev-never-sent=%v", in.Token, in.NeverSent)
	case Renew:
		fmt.Fprintf(&b, " token=%d", in.Token)
	case Finalize:
		fmt.Fprintf(&b, " token=%d outcome=%s never-sent=%v", in.Token, in.Outcome, in.NeverSent)
	case Settle:
		fmt.Fprintf(&b, " attempts=%d outcome=%s", in.Attempts, in.Outcome)
	}
	fmt.Fprintf(&b, " -> %s", out.Status)
	switch out.Status {
	case statusAmbiguous:
		fmt.Fprintf(&b, " (%s)", out.Err)
	case idempotency.StatusClaimed, storereply.Reserved:
		fmt.Fprintf(&b, " token=%d applied=%v lease=%s deadline=%s", out.Token, out.Applied, clock(out.Lease), clock(out.Deadline))
	case storereply.Renewed:
		fmt.Fprintf(&b, " lease=%s", clock(out.Lease))
	case idempotency.StatusInProgress:
		fmt.Fprintf(&b, " deadline=%s", clock(out.Deadline))
	case idempotency.StatusOutcomeUnknown:
		fmt.Fprintf(&b, " applied=%v", out.Applied)
	case idempotency.StatusReplay, storereply.Finalized, storereply.Settled, storereply.Found:
		fmt.Fprintf(&b, " state=%s attempts=%d sent=%d", out.State, out.Attempts, out.Sent)
		if out.Lease != 0 {
			fmt.Fprintf(&b, " lease=%s", clock(out.Lease))
		}
		if out.Settled {
			b.WriteString(" settled")
		}
		if out.Body != "" {
			fmt.Fprintf(&b, " body=%.8s", out.Body)
		}
	}
	return b.String()
}

// clock renders a Unix-nanosecond time as UTC wall time to the microsecond.
func clock(ns int64) string {
	if ns == 0 {
		return "-"
	}
	return time.Unix(0, ns).UTC().Format("15:04:05.000000")
}
