package idempotency

import (
	"context"
	"time"

	"github.com/obol-gateway/obol/effectspec"
)

// The optional parts of a store. A [Store] keeps claims, which is all a
// retry needs; a store may implement any of the interfaces below as well,
// the way io/fs adds optional interfaces to fs.FS, and a program that needs
// a part asserts it: mcpgateway/admin serves a part's endpoints only when
// its store has it. [Settler] is one more. redisstore's Store implements
// every one.

// PendingLister lists the calls awaiting an approver's decision
// (docs/DESIGN.md, "The record and its lifecycle", approval).
type PendingLister interface {
	// ListPending returns one page of the workspace's pending approvals,
	// from an index the store keeps (never a scan of every record).
	ListPending(ctx context.Context, req ListRequest) (PendingPage, error)
}

// PendingApproval is a call awaiting an approver's decision.
type PendingApproval struct {
	Scope  Scope
	Key    Key
	Ticket string
	// State is [effectspec.Held] for a held call; a re-held one (a
	// redispatch that needs approval) keeps its own state, unknown most
	// often.
	State effectspec.Outcome
	// HeldAt is when the record was made (held) or last changed (re-held).
	HeldAt time.Time
}

// PendingPage is one page of [PendingLister.ListPending].
type PendingPage struct {
	Approvals []PendingApproval
	// Cursor continues the listing; empty when it is complete.
	Cursor string
}

// QuotaStore keeps the fleet-wide counts of quotas and headroom
// (docs/DESIGN.md, "Quotas and headroom"). A gateway calls it from
// background goroutines, and on a call's path only MemoryEstimate, which
// makes no store call.
type QuotaStore interface {
	// TakeTokens takes up to n tokens from the workspace's bucket (rate
	// per second, burst deep), and says how long until the next one when
	// it grants fewer than n.
	TakeTokens(ctx context.Context, workspace string, rate float64, burst, n int) (granted int, retryAfter time.Duration, err error)
	// StoredBytes is the bytes of the workspace's live records.
	StoredBytes(ctx context.Context, workspace string) (int64, error)
	// MemoryFraction reads the store's fullest used/max memory (0 when it
	// has no maximum).
	MemoryFraction(ctx context.Context) (float64, error)
	// MemoryEstimate is the last MemoryFraction read plus what the
	// store's own writes have added since, as a fraction of the same
	// maximum: no store call, so a gateway asks it on every call.
	MemoryEstimate() float64
}

// PinStore keeps capability pins where every gateway on the store sees
// them (docs/DESIGN.md, "Scope and the Redis key").
type PinStore interface {
	// Pin returns the provider stored as the pin of capability, and false
	// when none is stored (the caller then uses its configured pin).
	Pin(ctx context.Context, capability string) (provider string, ok bool, err error)
	// SetPin stores provider as the pin of capability, replacing any, and
	// returns the provider it replaced ("" when none was stored).
	SetPin(ctx context.Context, capability, provider string) (previous string, err error)
	// InitPin stores provider as the pin of capability unless one is
	// stored already, and returns the pin in effect.
	InitPin(ctx context.Context, capability, provider string) (pin string, err error)
}

// ScopeAdvancer moves a fleet to a new [ScopeVersion] (docs/DESIGN.md, "The
// record and its lifecycle", "Scope version").
type ScopeAdvancer interface {
	// AdvanceScope is one step of the two-phase advance: run it again
	// while it answers [AdvanceClosing].
	AdvanceScope(ctx context.Context, req AdvanceRequest) (Advance, error)
}

// AdvancePhase is where an advance of the fleet's scope version stands.
type AdvancePhase string

const (
	// AdvanceClosing: the old version is marked closing (its gateways stop
	// claiming within a lease); the advance cannot finish before that lease
	// has passed. Run it again after [Advance].RetryAfterMS.
	AdvanceClosing AdvancePhase = "closing"
	// AdvanceRecordsLive: live records of the old version remain
	// ([Advance].Live); the advance finishes only when none do, or when the
	// caller strands exactly that many ([AdvanceRequest].Strand).
	AdvanceRecordsLive AdvancePhase = "records_live"
	// AdvanceMigrating: a Cluster slot is migrating; a count could miss the
	// keys in flight between nodes, so nothing is counted or finished.
	AdvanceMigrating AdvancePhase = "migrating"
	// AdvanceConflict: the fleet's version holds neither this build's
	// version, its closing mark, nor the target: another operator or fleet
	// is at work. Nothing was written.
	AdvanceConflict AdvancePhase = "conflict"
	// AdvanceDone: the fleet is at the new version.
	AdvanceDone AdvancePhase = "advanced"
)

// AdvanceRequest asks [ScopeAdvancer.AdvanceScope] to move the fleet from
// [ScopeVersion] to To.
type AdvanceRequest struct {
	// To is the new version; it must be above [ScopeVersion].
	To int
	// Strand, when not negative, is the count of live old records that the
	// caller accepts to leave: the Live of an earlier answer. The advance
	// finishes only if the count is still exactly that.
	Strand int
}

// Advance is the answer of [ScopeAdvancer.AdvanceScope].
type Advance struct {
	Phase AdvancePhase
	From  int
	To    int
	// Live counts the live records of every version but To (unreadable
	// keys included); Counts has them by version and state.
	Live   int
	Counts []RecordCount
	// RetryAfterMS is how long until a closing advance can finish.
	RetryAfterMS int64
	// Fleet describes what the fleet's version held when the answer is
	// [AdvanceConflict] or [AdvanceMigrating].
	Fleet string
}

// RecordCount is how many live records of one scope version are in one
// state.
type RecordCount struct {
	// Version is the record's scope version; 0 for a record written before
	// records carried one.
	Version int
	// State is the record's state; an in-flight record whose lease has
	// lapsed counts as unknown. Empty for keys that are not readable
	// records.
	State   effectspec.Outcome
	Records int
}

// DataLossWatcher is a store that sees itself lose data under a running
// gateway (docs/DESIGN.md, "The record and its lifecycle", Store amnesia):
// its claims then fail with [ErrStoreDataLost] until an operator
// acknowledges the loss.
type DataLossWatcher interface {
	// DataLoss reports whether the store knows of a loss and has stopped
	// claiming. It reads nothing: the state is the latest reading's.
	DataLoss() DataLoss
	// NotifyDataLoss has f called with the error claims get whenever the
	// store sees a loss (at once if it knows of one now). f must not
	// block.
	NotifyDataLoss(f func(error))
	// AcknowledgeDataLoss is an operator's acknowledgement that the store
	// lost data: every gateway on it claims again. It writes nothing when
	// no loss is known, and fails with [ErrInvalidRequest] when the store
	// does not watch for a loss.
	AcknowledgeDataLoss(ctx context.Context) (DataLossAcknowledgement, error)
}

// DataLoss is a store's data-loss state.
type DataLoss struct {
	// Lost: the store stops claiming until an operator acknowledges.
	Lost bool
	// Detail says what was seen. It names keys, never values.
	Detail string
	// Since is when this store saw it.
	Since time.Time
}

// DataLossAcknowledgement is the answer of
// [DataLossWatcher.AcknowledgeDataLoss].
type DataLossAcknowledgement struct {
	// Acknowledged: a loss was known and is acknowledged now; false when
	// none was (nothing was written).
	Acknowledged bool
	// Detail is what was lost ([DataLoss].Detail).
	Detail string
	// Sentinels is how many markers of loss the store watches from now
	// on.
	Sentinels int
}

// HealthChecker proves that a claim could be written now.
type HealthChecker interface {
	// Health is nil, or an *[UnhealthyError], where a claim would fail:
	// unlike a read, it fails where writes do.
	Health(ctx context.Context) error
}

// UnhealthyError says why a claim could not be written now.
type UnhealthyError struct {
	// Reason is one of "unreachable", "out_of_memory", "read_only",
	// "loading", "failing_over", "error", "scope_version_conflict"
	// (the fleet's scope version is not this store's: it stops claiming),
	// or "store_data_lost" (the store lost data under a running gateway;
	// it stops claiming until an operator acknowledges: [DataLossWatcher]).
	Reason string
	// Node is the address of the node that failed; empty for
	// scope_version_conflict and store_data_lost.
	Node string
	Err  error
}

func (e *UnhealthyError) Error() string {
	if e.Node == "" {
		return "idempotency: health: " + e.Reason
	}
	return "idempotency: health: node " + e.Node + ": " + e.Reason
}

// Unwrap returns the cause.
func (e *UnhealthyError) Unwrap() error { return e.Err }
