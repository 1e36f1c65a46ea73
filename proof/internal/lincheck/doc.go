// Package lincheck checks that a Store is linearizable with respect to the
// claim lifecycle of DESIGN.md section 6, under real lease expiry.
//
// A Lane drives a Store (and optionally its Settler) with concurrent
// clients on a few keys at a time, half with the header binding and half
// unsupported, and records every call as a porcupine operation: claim
// (fresh, re-sent with its op id, or with another request hash or route),
// reserve (the one second attempt, with PreviousNeverSent), renew,
// finalize (accepted, rejected, unknown, never sent), settle and lookup.
// Clients act like gateways: they finalize, try the second attempt, renew
// through a long call, stall past their lease, or die holding it; others
// send stray steps with tokens that may be stale. Check runs porcupine per
// key against the model and reports the first key whose history no
// sequential order explains. A key is used for OpsPerKey operations (fewer
// once its record is final), then its slot moves to a fresh one; a key
// untouched for a while after that is sealed: checked during the run and
// dropped from memory, so a long soak holds only its recent keys.
//
//	l, err := lincheck.NewLane(lincheck.Config{Store: st, Settler: st, Lease: st.Lease(), Seed: seed})
//	...
//	err = l.Run(ctx)             // until ctx is done
//	res := l.Check(time.Minute)  // res.Violations == 0, or res.Report says where
//
// The store must never lose a write it acknowledged: a failover that drops
// an unWAITed renewal or finalize shows up as a violation, as it should in
// a run that means to prove the store linearizable.
//
// # The model
//
// The state of a key is its record as the contract sees it: state, attempt
// count (= the fencing token; tokens never restart), attempts that may have
// left, attempts of the cycle, the request and route it was made for, the
// vendor key, the stored result (each result body names the op that stored
// it), whether it was settled, whether the lease-expiry path turned it
// unknown with the owner's finalize still pending, and the kind-tagged id of
// the last change, which a re-sent op must match to answer "already
// applied". Claim follows the state table row by row; reserve, renew,
// finalize and settle are the compare-and-sets the Store docs name. It uses
// only the public Store and Settler API: it never reads the record layout.
//
// # Lease expiry
//
// The store runs with a real, short lease and judges it by Redis TIME; the
// lane stamps each call and return with its own wall clock, which is the
// same system clock (same machine). An operation takes effect at a point in
// [call, return]. The model keeps the lease deadline each claim, reserve,
// renew or lookup returned, and judges the lease at that point: an op that
// returned more than Epsilon before the deadline saw it live, one whose
// point cannot be earlier than Epsilon after it (its call, or a call of an
// op ordered before it) saw it lapsed, and in between either may hold: the
// model is a porcupine NondeterministicModel that follows both branches and
// keeps what each answer proves (after one op saw a lease lapsed, every
// later op sees it lapsed until a new lease). The store's deadlines are
// whole milliseconds of a clock read rounded down, which the model allows
// for exactly; Epsilon (default 1 ms) only covers two processes reading one
// clock. A wall clock stepped backwards during a run voids the check.
//
// # Ambiguous operations
//
// A store error or timeout is recorded with return time +infinity and an
// output that matches any answer: porcupine may place the op anywhere after
// its call, or treat it as never having happened. A lease it may have set
// is bounded by the return of the next op ordered after it. The client
// re-sends such an op with the same op id half the time. After an ambiguous
// claim or reserve the model also allows the store to have taken the
// reservation back as never sent, as redisstore does when a WAIT falls
// short; it models that hidden finalize as immediate.
package lincheck
