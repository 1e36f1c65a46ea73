// Package redisstore is the idempotency.Store on Redis 7+ (standalone or
// Cluster, and Valkey) through rueidis.
//
// The one recommended path:
//
//	opt, err := redisstore.ParseURL("redis://10.0.0.1:6379") // or "h1:7000,h2:7001,h3:7002"
//	client, err := rueidis.NewClient(opt)                    // no ConnLifetime
//	store, err := redisstore.New(ctx, client, redisstore.Options{})
//
// An embedded, non-durable store for tests and demos runs on miniredis:
//
//	mr := miniredis.RunT(t)
//	client, _ := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
//	store, _ := redisstore.New(ctx, client, redisstore.Options{SkipEvictionCheck: true})
//
// (miniredis has no CONFIG command, so the eviction check cannot run; it
// never evicts.)
//
// # Operations
//
// Every operation is one Lua script (embedded, sent as EVALSHA with an EVAL
// fallback on NOSCRIPT) on the record that idempotency.Scope.StorageKey
// names and, for the scripts that reserve an attempt or make a record
// final, the unknown index bucket of the same Cluster slot (below), so it
// is valid on Redis Cluster and records spread over all slots. Time inside
// scripts is Redis TIME. A first call costs two round trips of one script
// each, the claim and the finalize; a replay costs one.
// Approval tickets live under {prefix}apt:{ticket}, their own key (and slot),
// written by a separate SET whenever a claim answers held, so that a crash
// between the two leaves a held record whose next claim restores the ticket.
//
// Capability pins live under {prefix}pin:{capability}, a plain string per
// capability naming its provider, so that every gateway on one Redis routes a
// new capability call alike. Pin reads it (one GET), SetPin replaces it and
// InitPin seeds it only when absent (SET NX GET), which lets a restarting
// gateway keep a pin changed since its configuration was written. A pin has
// no TTL: it is configuration, not a record, and stays until replaced or
// deleted. Names are checked as tool names (1 to 128 of [A-Za-z0-9_.-]; the
// capability starts with "cap.", the provider does not), so a pin key never
// holds braces or a second colon.
//
// Unknown calls are listed per workspace through its index: one sorted set
// per workspace and slot, {prefix}unk:{workspace}:{T}, whose hash tag T
// puts it in the slot of the records it indexes, scored by expiry. The
// scripts write it with the record, atomically: a reservation adds the
// entry before its caller may send (and the index is written before the
// record, so a script that fails on it writes nothing); a record that
// becomes final loses it; replays and other answers that reserve nothing
// write nothing there. The record stays the truth: ListUnknown reads the
// buckets (the previous release's {prefix}unk:{workspace} first, then by
// slot, 512 per pipelined round trip, each by expiry), reads each entry's
// record, shows those unknown now and drops entries whose record is gone or
// final. Settle is one script on the record and its bucket.
//
// # Retries and re-sends
//
// rueidis re-sends a command by itself only when it is read-only or marked
// retryable, after a network error (and then until ctx ends: give Lookup a
// deadline), on MOVED/ASK redirects (the redirecting node did not run it),
// and when ClientOption.ConnLifetime expires a connection, which re-sends
// in-flight commands, writes included. Mutating scripts are therefore plain
// NewLuaScript scripts (never a Retryable or NoSha variant) and ConnLifetime
// must stay 0 (ParseURL never sets it). A write whose reply was lost comes
// back as an error wrapping idempotency.ErrStoreUnavailable: the caller does
// not send, and re-sends the step with the same OpID, which answers
// AlreadyApplied instead of acting twice, or settles the state with Lookup.
// A record remembers only its last operation (as an 8-byte digest of the
// kind and op id); a re-send after a later change is judged afresh.
//
// # Decisions where the contract is silent
//
//   - Lookup runs as EVALSHA_RO (Redis refuses any write in it). A server that
//     refuses TIME there (miniredis) gets the same script by EVALSHA.
//   - Finalize is fenced by the token alone: an in-flight record whose lease
//     expired, but that no claim took over, accepts its own attempt's outcome,
//     and so does one that a claim marked unknown on the expiry path (an
//     unsupported binding) without taking a new token. Once a claim has
//     taken over with the next attempt, the old token is stale. Reserve and
//     Renew, which extend the work, need a live lease.
//   - Renew keeps its op id in a field of its own, so renewals never hide a
//     re-sent claim or reserve from its op id. It never shortens a lease.
//   - A finalize with NeverSent is stored as unknown with a field s (the
//     attempts that may have left) below n; Lookup reports StateUnknown with
//     SentAttempts. Its Outcome must be unknown or empty, and it has no
//     Result. On a record the expiry path already marked unknown it records
//     unknown without taking the attempt back.
//   - TTLs: a reservation (and an unknown outcome) sets UnknownRetention, a
//     final outcome Retention; a held or denied record keeps Retention.
//   - Decide: the first decision is final. Repeating it answers the ticket;
//     approving a denied ticket is ErrDenied, denying an approved one ErrStale.
//     Decide also restarts the ticket key's retention. An approved ticket
//     dispatches only through a claim that presents it.
//   - MaxResultBytes counts the body and the kept headers; over it the body is
//     dropped (BodyDropped), and headers that alone exceed it are dropped too.
//     Only idempotency.SafeHeader headers are stored.
//   - WaitReplicas: the WAIT is pipelined behind the script on one pinned
//     connection (WAIT counts the writes of its own connection); a Cluster
//     redirect there is an error, never a WAIT answered by another node. A
//     shortfall is ErrReplicas inside an *OpError: the reservation is not to
//     be used, and the store finalizes it as never sent (best effort, right
//     after), so that the next claim re-opens the slot with the next token
//     and waits again. New refuses a WaitReplicas above the replicas
//     connected to any master (INFO replication), with ErrReplicaCount.
//     With fewer WaitReplicas than replicas, a failover may promote a
//     replica that lacks a reservation, and the slot may be dispatched again.
//     After a failover the promoted master has no replica until one rejoins
//     (for example the old master, restarted); until then every reservation
//     on its slots fails closed with ErrReplicas. Finalizes are not WAITed:
//     a failover may roll a finalized record back to in flight, which then
//     reads unknown once its lease ends, never accepted by mistake.
//   - The eviction check runs on every node the client knows (replicas too,
//     since a replica may be promoted).
//   - ClaimRequest.KeySource must be KeySupplied or KeyMinted; op ids are at
//     most 63 bytes of [A-Za-z0-9_-] (empty: minted).
//   - The fleet's scope version ({prefix}meta:scope_version) is read again
//     at most once per lease, before a claim (or a Health check) that finds
//     the last reading older than a lease; concurrent claims wait for that
//     one GET, the others stay one round trip. While it holds anything but
//     idempotency.ScopeVersion, Claim fails with ErrScopeVersion and
//     idempotency.ErrScopeVersionChanged and Health with
//     scope_version_conflict; a key that is gone changes nothing, since only
//     a start that finds no record writes it. CountRecords counts the live
//     records per version and state for the operator.
//
// # Record layout and size
//
// A record is one string (schema 2, see lua/common.lua): a version byte,
// then fields of a one-byte tag, a length and a value; numbers as bytes,
// the request hash and fingerprint as their 32 bytes, the body last, and
// no lease, attempt deadline or update time once final. The connection and
// tool are stored only where they differ from the scope's. Whatever its
// body, a record keeps one encoding, which no server setting changes.
// Bodies over 128 bytes are stored DEFLATE-compressed when that is
// smaller, with their size, which bounds what decoding allocates; a replay
// returns the exact bytes. On Redis 7.0, under the benchmark's 83-byte key,
// a finalized record takes by MEMORY USAGE (used_memory per record over
// 20,000; examples/bench row 5): 328 B (394 B) without body, 1,032 B
// (1,191 B) with a 1 KiB vendor charge object whose values vary per record
// (its value, about 890 B, straddles the allocator's 896 B size class),
// about 29 KB with a 64 KiB list of them. Of a
// record without body, about 200 B are Redis' own (the key, its dictionary
// and expiry entries); the rest is mostly the two digests, the vendor key,
// the op tag and the route record.
//
// Records of schema 1 (a hash of the same fields) are read as they are,
// by every script and by CountRecords; the first script that changes one
// writes it as schema 2, with its TTL. A gateway of this version can so
// join a fleet whose records are schema 1; a gateway of the previous
// version cannot read schema 2 records (they answer WRONGTYPE there), so an
// upgrade replaces every gateway before traffic grows on the new ones, or
// drains as for a scope change.
package redisstore
