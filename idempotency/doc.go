// Package idempotency is the claim model of the Obol gateway: idempotency
// keys, the scope a key is unique within, the canonical request hash, the
// dispatch fingerprint, the claim record and its lifecycle, and the Store
// interface that keeps records atomically.
//
// Most gateways do not call a Store directly: retry.Orchestrator runs the
// whole lifecycle (policy, claim, send, finalize) on top of one. The one
// recommended path is
//
//	key, source, err := idempotency.FromHeader(r.Header.Values("Idempotency-Key"))
//	if err != nil { /* 400, reason malformed_key: never mint instead */ }
//	store, err := redisstore.New(ctx, client, redisstore.Options{})
//	o := &retry.Orchestrator{Store: store}
//	out, err := o.Do(ctx, retry.Call{Scope: scope, Key: key, KeySource: source, ...})
//
// # Keys
//
// A Key is "idt_" and 32 lowercase hex digits (128 bits from crypto/rand).
// ParseKey accepts the bare form and the Structured Field string form of the
// IETF Idempotency-Key draft; anything else is ErrMalformedKey, and so are
// several Idempotency-Key header fields. Errors never echo the rejected value:
// a malformed key is often a secret pasted into the wrong header.
//
// # Scope
//
// A claim is stored at
//
//	{prefix}idem:{workspace}:{connection|unresolved}:{xxhash64(tool)}:{key}
//
// Segments are validated, not escaped ([A-Za-z0-9_.-], 1 to 128 bytes), so
// two scopes never render the same key, and braces never change the Redis
// Cluster slot. Capability (cap.*) calls use the reserved connection segment
// "unresolved": the concrete route is resolved before the claim and pinned
// by its fingerprint, so a capability that later resolves elsewhere answers
// destination_conflict for an existing key that would be dispatched again,
// instead of dispatching twice. The route fingerprint names the tool too, so
// even a 64-bit tool-hash collision cannot reuse another tool's record.
//
// # Request hash
//
// RequestHash is "sha256:" and the hex SHA-256 of the RFC 8785 (JCS)
// canonical form of the arguments, computed in one streaming pass with one
// allocation. Decisions where the contract is silent:
//
//   - Absent arguments hash as {}: nil, empty, whitespace only, and the
//     literal null (what Go writes for a nil map). Any other non-object
//     value is hashed as it is; requiring an object is the caller's choice.
//   - Invalid JSON, duplicate member names (compared after unescaping), lone
//     surrogates, invalid UTF-8, numbers that overflow a double, nesting
//     deeper than 10000 and input over 256 MiB are ErrInvalidJSON, with the
//     byte offset and never the input itself.
//
// Numbers are exact (docs/DESIGN.md section 5): a number whose nearest double
// does not print back to its value as written (9007199254740993, a 25-digit
// id, 1e-400) keeps that value, as 9.007199254740993e+15, so requests that
// differ beyond a double's precision never replay each other; a number with
// more than 100 significant digits or below 1e-9999 is ErrInvalidJSON.
// Numbers written from doubles by JavaScript or Go keep their RFC 8785 form;
// an encoder that writes a double with more digits than it needs (C's %.17g)
// writes another number.
//
// # Claims
//
// Store.Claim applies the state table of the design contract in one atomic
// step, its rows tried top to bottom: a new key is claimed with attempt 1
// reserved (or held for approval); a different request under the same key
// is request_mismatch; a live lease is in_progress (with the attempt's
// deadline); a final record is replayed with its original route record,
// whatever the request resolves to now. The route and binding are compared
// only where the answer would dispatch (an approved resume, an unknown
// record, an in-flight one whose lease expired): another one there is
// destination_conflict. A slot none of whose attempts may have left
// (Record.SentAttempts 0) is claimed with the next token for every binding;
// otherwise an unknown record gets one new attempt only when the vendor
// deduplicates on our key, and is outcome_unknown otherwise. A claim with
// Refuse (a refusal decided before it) replays a final record and
// otherwise answers refused, writing nothing.
//
// The store owns the lease (Store.Lease). Each reservation stores its
// attempt deadline (its time plus the tool's timeout); the owner renews the
// lease (Store.Renew) up to it, so the lease stays short and a crashed
// gateway's slot is taken over within one lease. An attempt proven never
// sent is finalized with NeverSent: it counts on the receipt
// (AttemptCount) but does not burn the slot. Tokens never restart.
//
// The key a vendor sees is never the client's: a record of a header or
// body_pointer binding carries VendorKey, derived from the deployment, the
// whole scope, the key and the request hash, so two tenants that share a
// vendor account never meet in the vendor's own deduplication.
//
// Fencing tokens are attempt numbers: Reserve, Renew and Finalize are
// compare-and-set on them and a stale token changes nothing (ErrStale). A
// finalize whose token is still current is accepted even after its lease
// expired, as long as nobody took the slot over (and the record is not
// final): the token, not the clock, is the fence.
//
// Every mutating call carries an operation id. When a reply is lost, the
// same call sent again answers AlreadyApplied instead of acting twice; any
// store error on Claim or Reserve means the caller must not send.
//
// An operator who has checked with the vendor settles an unknown record
// (Settler.Settle) as accepted or definitely_rejected, by compare-and-set on
// its state and the attempt count seen in the listing (Settler.ListUnknown);
// the record keeps who, when and why (Record.Resolution) and replays it.
//
// # Approvals
//
// A held call gets a ticket ("apt_" + 32 hex) bound to the key it was held
// under. Only a claim that presents the ticket after approval reserves
// attempt 1; a plain repeat of the call stays held. A resume that supplies
// a different key is refused with ErrApprovalKeyMismatch and changes nothing
// (the held record stays as it was); a resume without a key takes the
// ticket's key.
package idempotency
