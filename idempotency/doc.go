// Package idempotency is the claim model of the Obol gateway: idempotency
// keys, the scope a key is unique within, the canonical request hash, the
// dispatch fingerprint, the claim record and its lifecycle, and the [Store]
// interface that keeps records atomically.
//
// Most gateways do not call a [Store] directly: [retry.Orchestrator] runs
// the whole lifecycle (policy, claim, send, finalize) on top of one. The
// one recommended path is
//
//	key, source, err := idempotency.FromHeader(r.Header.Values("Idempotency-Key"))
//	if err != nil { /* 400, reason malformed_key: never mint instead */ }
//	store, err := redisstore.New(ctx, client, redisstore.Options{})
//	o := &retry.Orchestrator{Store: store}
//	out, err := o.Do(ctx, retry.Call{Scope: scope, Key: key, KeySource: source, ...})
//
// Where each part is fixed: keys in [Key], [ParseKey] and [FromHeader]; the
// Redis key in [Scope.StorageKey] and [Scope.Validate]; the request hash in
// [RequestHash] and [Canonicalize]; the vendor's key in [VendorKey]; the
// lifecycle (claim table, fencing tokens, leases, op ids) on [Store] and
// its methods, whose answers are the words of [Status]; approvals on
// [ClaimRequest] (its Ticket) and [Ticket]; settling unknown records on
// [Settler]; a stored record's receipt in [Record.Receipt] (its state is an
// [effectspec.Outcome]). The contract is docs/DESIGN.md, "The key" to "The
// record and its lifecycle".
//
// [retry.Orchestrator]: https://pkg.go.dev/github.com/obol-gateway/obol/retry#Orchestrator
package idempotency
