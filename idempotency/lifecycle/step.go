package lifecycle

// Reply is a result's status: the first element of the script's reply.
type Reply string

// The replies of the scripts.
const (
	Claimed             Reply = "claimed"
	HeldReply           Reply = "held"
	Replay              Reply = "replay"
	InProgress          Reply = "in_progress"
	RequestMismatch     Reply = "request_mismatch"
	ScopeConflict       Reply = "scope_version_conflict"
	DestinationConflict Reply = "destination_conflict"
	OutcomeUnknown      Reply = "outcome_unknown"
	DeniedReply         Reply = "denied"
	Approved            Reply = "approved"
	Conflict            Reply = "conflict"
	Refused             Reply = "refused"
	NoRecord            Reply = "no_record" // a claim with NoCreate found none
	Reserved            Reply = "reserved"
	Renewed             Reply = "renewed"
	Finalized           Reply = "finalized"
	GivenBack           Reply = "given_back"
	Settled             Reply = "settled"
	NotFound            Reply = "not_found"
	NotUnknown          Reply = "not_unknown"
	Stale               Reply = "stale"
	CycleExhausted      Reply = "cycle_exhausted"
	LeaseExpired        Reply = "lease_expired"
	MaxAttempts         Reply = "max_attempts" // reserve: the slot's attempts that may leave are used up
	BadState            Reply = "error"        // a record of an unknown state: the script fails
)

// Result is what a transition answers; which fields it fills depends on
// its Status, as the script's reply does (see each transition).
type Result struct {
	Status          Reply
	Token           int64  // claimed, reserved
	Lease           int64  // claimed, reserved, renewed: the lease deadline
	AttemptDeadline int64  // claimed, reserved, in_progress (claim)
	Applied         bool   // the op id was applied before: this answers it again
	VendorKey       string // claimed
	Incarnation     string // claimed
	Ticket          string // held
	Record          *Record
	SettleAt, Now   int64 // in_progress (settle): settleable from SettleAt
	Standing        Reply // conflict (decide): the decision that stands
	// Limit, on a claim's outcome_unknown that refused a redispatch the
	// vendor could deduplicate: MaxAttempts (the slot's attempts are used
	// up; an operator settles it) or Backoff (RetryAfter ms until the
	// redispatch is allowed).
	Limit      Reply
	RetryAfter int64
}

// Backoff is Result.Limit of a redispatch refused until its backoff ends.
const Backoff Reply = "backoff"

// BackoffCap bounds the wait between two redispatches of a slot (ms).
const BackoffCap = 3_600_000

// backoff is how long after the latest reservation the redispatch that
// follows sent (>= 2) attempts that may have left is allowed: lease x
// 2^(sent-1), at most BackoffCap.
func backoff(lease, sent int64) int64 {
	gap := lease
	for i := int64(2); i <= sent && gap < BackoffCap; i++ {
		gap *= 2
	}
	return min(gap, BackoffCap)
}

// IndexOp is a step's change to the record's entry in its workspace's
// unknown index.
type IndexOp uint8

// The index changes.
const (
	IndexKeep   IndexOp = iota
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
