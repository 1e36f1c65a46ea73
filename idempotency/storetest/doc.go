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
//				return mystore.New(cfg.Prefix, cfg.Lease, cfg.Retention, cfg.MaxResultBytes), nil
//			},
//		})
//	}
//
// A store on a fake clock returns an advance function; one on wall time
// returns nil and the suite sleeps (a few seconds in all, in parallel).
//
// Decisions where the contract is silent, which the suite enforces:
//
//   - The state table rows are checked in their order: a different request
//     hash is request_mismatch whatever the state (held, in flight, final);
//     then a different binding or fingerprint is destination_conflict, also
//     for a final record (a replay would show a result of another route).
//   - A refused claim (in_progress, request_mismatch, destination_conflict,
//     denied, outcome_unknown) carries no token, lease, record or ticket; a
//     held answer carries only the record's own ticket.
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
//     as its record.
//   - Bad input: an invalid scope is ErrInvalidScope, the zero key
//     ErrMalformedKey, a request hash or fingerprint that is not "sha256:" and
//     64 lowercase hex digits, an unknown binding, a Finalize outcome other
//     than accepted, definitely_rejected or unknown, and a malformed ticket id
//     are errors; none writes anything.
package storetest
