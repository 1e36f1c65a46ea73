// Package storetest is the conformance suite that every idempotency.Store
// passes. It checks the state table of DESIGN.md section 6 row by row, the
// fencing-token compare-and-set of Reserve and Finalize, lease expiry, re-sent
// operations, approval tickets, retention, bad input, and concurrent callers.
//
// The one recommended path, in a store package's tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			New: func(t *testing.T, cfg storetest.Config) (idempotency.Store, func(time.Duration)) {
//				return mystore.New(cfg.Prefix, cfg.Lease, cfg.Retention, cfg.UnknownRetention, cfg.MaxResultBytes), nil
//			},
//		})
//	}
//
// The Settle and List groups need the store to be an idempotency.Settler
// too; one that is not fails them.
//
// A store on a fake clock returns an advance function; one on wall time
// returns nil and the suite sleeps (a few seconds in all, in parallel).
//
// Decisions where the contract is silent, which the suite enforces:
//
//   - The state table rows are checked in their order: a different request
//     hash is request_mismatch whatever the state (held, in flight, final).
//     A different binding or fingerprint is destination_conflict only in
//     the rows that would dispatch (an approved resume, unknown, a lapsed
//     lease, a slot whose attempts never left); a final record replays its
//     original route record, and in_progress, held and denied answer as for
//     the original route.
//   - A claim with Refuse answers request_mismatch for another request and
//     replays a final record; in every other state it is refused and writes
//     nothing.
//   - A refused claim (in_progress, request_mismatch, destination_conflict,
//     denied, outcome_unknown, refused) carries no token, lease, vendor key,
//     record or ticket; a held answer carries only the record's own ticket,
//     and in_progress only the running attempt's deadline.
//   - NeverSent: the record reads unknown with SentAttempts 0 (or one less);
//     it applies only to the current token of an in-flight record, with no
//     outcome but unknown and no result.
//   - Renew returns a deadline capped at the attempt deadline, never
//     shortens the lease, and answers a re-send (same OpID) with its first
//     answer while that lease lives; a lapsed lease, a stale token or a
//     record not in flight is ErrStale.
//   - Finalize answers the record without the result body; a body of half
//     MaxResultBytes is kept (whether or not a store counts headers against
//     the limit), one byte over the limit is dropped with BodyDropped set and
//     the status and safe headers kept. Headers that
//     idempotency.SafeHeader rejects are never replayed.
//   - Reserve and Finalize on a record that is not in flight (final, unknown,
//     held, or in flight with an expired lease) are ErrStale; on a missing
//     record or with token 0 they are an error of the store's choice, and
//     nothing is written.
//   - A second Finalize with another OpID is ErrStale: the first outcome
//     stands. A re-sent Finalize (same OpID) answers the original record
//     without error.
//   - An approval does not dispatch: only a claim that presents the ticket
//     does, once. A ticket presented for another key reserves nothing.
//   - Retention runs from the last change of a record; a ticket lives as long
//     as its record. A reservation and an unknown outcome keep the record
//     UnknownRetention, a final outcome Retention.
//   - Bad input: an invalid scope is ErrInvalidScope, the zero key
//     ErrMalformedKey, a request hash or fingerprint that is not "sha256:" and
//     64 lowercase hex digits, an unknown binding, a Finalize outcome other
//     than accepted, definitely_rejected or unknown, and a malformed ticket id
//     are errors; none writes anything.
//   - Settle applies to an unknown record or one whose lease lapsed, with the
//     attempt count it has now (else ErrStale); from any other state it is
//     ErrNotUnknown, and a missing record ErrNotFound. A settle without a
//     result drops the unknown attempt's result. A re-sent Settle (same
//     OpID) answers the settled record. Bad input is ErrInvalidRequest and
//     quotes none of it. While the record's attempt may still be running
//     (it still has an attempt deadline: a lapsed lease, or unknown by the
//     lease-expiry path) and the store's clock is at most that deadline
//     plus the store's lease, Settle is an *idempotency.AttemptRunningError
//     whose SettleAfter is exactly that time, and changes nothing.
//   - ListUnknown lists only records that read unknown now, each once in a
//     listing that follows the cursor, at most MaxPageSize a page whatever
//     the limit; a malformed workspace or cursor is an error. A record whose
//     attempt may still be running is listed with SettleAfter.
//   - A claim or reserve whose Timeout plus the lease reaches
//     UnknownRetention is ErrRetentionTooShort and writes nothing. A
//     reservation's lease ends at its attempt deadline at the latest.
//   - A lapsed in-flight record met by another route turns unknown (its
//     retention restarts) before the claim conflicts.
//   - Incarnation: a claimed answer carries a non-empty incarnation, and a
//     record made again under the key has another. An old incarnation's
//     Renew is ErrNotFound, its Reserve and Finalize ErrStale; an empty one
//     is not checked.
package storetest
