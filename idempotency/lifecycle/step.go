package lifecycle

import "github.com/obol-gateway/obol/idempotency"

// Result is what a transition answers; which fields it fills depends on
// its Status ([idempotency.Status]: the word the script of the same name
// answers with), as the script's reply does (see each transition).
type Result struct {
	Status          idempotency.Status
	Token           int64  // claimed, reserved
	Lease           int64  // claimed, reserved, renewed: the lease deadline
	AttemptDeadline int64  // claimed, reserved, in_progress (claim)
	Applied         bool   // the op id was applied before: this answers it again
	VendorKey       string // claimed
	Incarnation     string // claimed
	Ticket          string // held
	Record          *Record
	SettleAt, Now   int64              // in_progress (settle): settleable from SettleAt
	Standing        idempotency.Status // conflict (decide): the decision that stands
	// Limit, on a claim's outcome_unknown that refused a redispatch the
	// vendor could deduplicate: "max_attempts" (the slot's attempts are
	// used up; an operator settles it) or "backoff" (RetryAfter ms until
	// the redispatch is allowed).
	Limit      idempotency.Status
	RetryAfter int64
}

// backoffCap bounds the wait between two redispatches of a slot (ms).
const backoffCap = 3_600_000

// backoff is how long after the latest reservation the redispatch that
// follows sent (>= 2) attempts that may have left is allowed: lease x
// 2^(sent-1), at most backoffCap.
func backoff(lease, sent int64) int64 {
	gap := lease
	for i := int64(2); i <= sent && gap < backoffCap; i++ {
		gap *= 2
	}
	return min(gap, backoffCap)
}

// IndexOp is a step's change to the record's entry in its workspace's
// unknown index.
type IndexOp uint8

// The index changes.
const (
	indexKeep   IndexOp = iota
	IndexAdd            // score Write.Score, never lowered; Prune drops expired entries
	IndexRemove         // the record became final
)

// Write is what a step stores. Record is the record after it (its
// Expires included), nil when the record is left as it is.
type Write struct {
	Record *Record
	Index  IndexOp
	Score  int64 // IndexAdd: the entry's expiry (ms)
	Prune  bool  // IndexAdd: also remove the bucket's expired entries
}

// written is a write of r whose index entry is scored by its new expiry.
func written(r *Record, op IndexOp, prune bool) Write {
	w := Write{Record: r, Index: op, Prune: prune}
	if op == IndexAdd {
		w.Score = r.Expires
	}
	return w
}

// minLease is the lease of an attempt reserved at now: it ends at the
// attempt deadline at the latest.
func minLease(now, lease, timeout int64) (l, e int64) {
	return min(now+lease, now+timeout), now + timeout
}
