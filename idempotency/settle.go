package idempotency

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/obol-gateway/obol/effectspec"
)

// Settler is the operator's side of a [Store] (docs/DESIGN.md, "The record and
// its lifecycle", "Resolving unknown" and "Listing"): it settles unknown
// records and lists them per workspace. It is a separate interface so that a
// Store need not offer it.
type Settler interface {
	// Settle moves an unknown record (or an in-flight one whose lease has
	// lapsed) to [effectspec.Accepted] or [effectspec.DefinitelyRejected], by compare-and-set
	// on that state and on SettleRequest.Attempts. From any other state it is
	// ErrNotUnknown, and after a redispatch [ErrStale]; both change nothing.
	// A record whose attempt may still be running at its gateway (in
	// flight under a lapsed lease, or turned unknown by the lease-expiry
	// path, until its attempt deadline plus the store's lease) is refused
	// with an *AttemptRunningError (matching [ErrInProgress]): its owner's
	// finalize is still to come. A record of another scope version is
	// ErrScopeVersionConflict. It never shortens the record's TTL. It
	// returns the record without the result body.
	Settle(ctx context.Context, req SettleRequest) (Record, error)
	// ListUnknown returns one page of the workspace's records that are
	// unknown now, in an order the store documents (redisstore: by index
	// bucket, then expiry). Entries of the index whose record is
	// gone or can no longer become unknown are dropped as it goes.
	ListUnknown(ctx context.Context, req ListRequest) (UnknownPage, error)
}

// Limits of the operator's inputs.
const (
	MaxNoteBytes = 512 // SettleRequest.Note
	MaxByBytes   = 128 // SettleRequest.By
	MaxPageSize  = 100 // ListRequest.Limit
)

// ErrNotUnknown: a settle found the record in a state other than unknown
// (final, held, denied, or in flight under a live lease). Nothing changed.
var ErrNotUnknown = errors.New("idempotency: record is not unknown")

// AttemptRunningError refuses a settle of a record whose attempt may still
// be running at its gateway: the lease lapsed (a failover, failed renewals,
// a paused gateway) but the attempt deadline has not passed, so the vendor
// may not have answered yet and the owner's finalize may still land. It
// matches [ErrInProgress]. The attempt deadline is the gateway's give-up
// time, not proof that the vendor has finished.
type AttemptRunningError struct {
	// SettleAfter is when the record becomes settleable (the store's
	// clock): the attempt deadline plus the store's lease.
	SettleAfter time.Time
	// RetryAfter is how long until then, measured by the store's clock.
	RetryAfter time.Duration
}

func (e *AttemptRunningError) Error() string {
	return "idempotency: settle: the attempt may still be running until its deadline"
}

// Unwrap returns [ErrInProgress].
func (e *AttemptRunningError) Unwrap() error { return ErrInProgress }

// SettleRequest settles the record of Key in Scope.
type SettleRequest struct {
	Scope Scope
	Key   Key
	// Attempts is the record's AttemptCount as the operator saw it: a
	// reservation made since then makes the settle [ErrStale].
	Attempts int
	Outcome  effectspec.Outcome // effectspec.Accepted or DefinitelyRejected
	// By is who settles: 1 to [MaxByBytes] bytes. By and Note are UTF-8
	// without control characters, Unicode format characters (category
	// Cf) or U+2028/U+2029.
	By   string
	Note string // why: up to MaxNoteBytes
	// Result is the vendor answer to replay, if the operator has it. If nil,
	// a replay carries the outcome and the resolution only.
	Result *StoredResult
	// OpID identifies this operation, as in ClaimRequest.OpID.
	OpID string
}

// Validate checks everything but the scope and key: a bad request is
// ErrInvalidRequest and quotes none of its input.
func (r SettleRequest) Validate() error {
	switch {
	case r.Outcome != effectspec.Accepted && r.Outcome != effectspec.DefinitelyRejected:
		return fmt.Errorf("%w: settle: outcome must be accepted or definitely_rejected", ErrInvalidRequest)
	case r.Attempts < 1:
		return fmt.Errorf("%w: settle: attempts must be at least 1", ErrInvalidRequest)
	case r.Result != nil && (r.Result.Status < 100 || r.Result.Status > 999):
		return fmt.Errorf("%w: settle: status out of range", ErrInvalidRequest)
	}
	if err := operatorText("by", r.By, MaxByBytes); err != nil {
		return err
	}
	if r.By == "" {
		return fmt.Errorf("%w: settle: by must not be empty", ErrInvalidRequest)
	}
	return operatorText("note", r.Note, MaxNoteBytes)
}

func operatorText(field, v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("%w: settle: %s longer than %d bytes", ErrInvalidRequest, field, max)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("%w: settle: %s is not UTF-8", ErrInvalidRequest, field)
	}
	for i, c := range v {
		if c < ' ' || c == 0x7f || c >= 0x80 && c < 0xa0 {
			return fmt.Errorf("%w: settle: %s has a control character at byte %d", ErrInvalidRequest, field, i)
		}
		// A format character (category Cf: bidi overrides and isolates,
		// zero-width characters, the byte order mark) or a line or paragraph
		// separator makes the text read otherwise than it is stored, in a
		// receipt, a log or a terminal.
		if c == '\u2028' || c == '\u2029' || unicode.Is(unicode.Cf, c) {
			return fmt.Errorf("%w: settle: %s: a Unicode format or separator character (U+%04X) at byte %d is not allowed",
				ErrInvalidRequest, field, c, i)
		}
	}
	return nil
}

// ListRequest asks for one page of a workspace's unknown records.
type ListRequest struct {
	Workspace string
	// Cursor continues a listing: UnknownPage.Cursor of the previous page.
	// If empty, the listing starts at its beginning (in the store's order).
	Cursor string
	// Limit is the most records a page holds. If zero or over [MaxPageSize],
	// MaxPageSize.
	Limit int
}

// UnknownPage is one page of a listing.
type UnknownPage struct {
	Records []UnknownRecord
	// Cursor continues the listing; empty when it is complete.
	Cursor string
}

// UnknownRecord is a listed record and the scope it lives in (its tool by
// name, as a settle needs it). Record.Result carries no body.
type UnknownRecord struct {
	Scope  Scope
	Record Record
	// SettleAfter, when not zero, is when the record becomes settleable:
	// its attempt may still be running at its gateway until its attempt
	// deadline plus the store's lease (see [AttemptRunningError]). Zero: it
	// may be settled now.
	SettleAfter time.Time
}
