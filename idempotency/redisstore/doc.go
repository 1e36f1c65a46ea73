// Package redisstore is the [idempotency.Store] on Redis 7+ (standalone or
// Cluster, and Valkey) through rueidis.
//
// The one recommended path:
//
//	opt, err := redisstore.ParseURL("redis://10.0.0.1:6379") // or "h1:7000,h2:7001,h3:7002"
//	client, err := rueidis.NewClient(opt)                    // no ConnLifetime
//	store, err := redisstore.New(ctx, client, redisstore.Options{})
//
// and then use store as the [idempotency.Store] of a retry.Orchestrator. The
// zero [Options] are the defaults (see each field). Tests and demos get a
// store on an in-process miniredis in one call from package embedded.
//
// Two things an adopter must not get wrong:
//
//   - Every node runs with maxmemory-policy noeviction: eviction deletes
//     live claims silently, and a retry then dispatches twice. [New] checks
//     it ([ErrEvictionPolicy]); SkipEvictionCheck is for servers that block
//     CONFIG and never evict.
//   - The client never sets ClientOption.ConnLifetime: an expiring
//     connection re-sends in-flight writes (see [New]). [ParseURL] never
//     sets it.
//
// Besides the claims of an [idempotency.Store], a [Store] has every optional
// part that package idempotency declares (settling and listing, pending
// approvals, quotas, pins, the scope version advance, data loss, health).
// Each [Store] method says what it costs and guarantees; [Store.ListUnknown]
// describes the unknown index; how the Lua scripts get their arguments is in
// the folder's README.md. The contract (states, leases, fencing, retention,
// the index, the record layout) is docs/DESIGN.md, "The record and its
// lifecycle"; upgrading a fleet is in the repository's README.md.
package redisstore
