// Command bench is Obol's benchmark harness: one run prints a table that sets
// each measurement of ours beside its reference, with the ratio, the target
// and PASS or MISS.
//
// The one recommended way to run it, from the repository root:
//
//	go run ./examples/bench -redis-server
//
// It starts a private redis-server on a free loopback port (persistence off,
// noeviction) and stops it at the end. With -redis host:port it uses that
// Redis instead, in logical database -db (default 15), which must be empty:
// the harness flushes it between measurements. -quick is a smoke test
// (300ms per measurement, one round); -duration and -rounds set the length.
// Progress goes to stderr, the table to stdout.
//
// # What each row measures
//
// Every row measures ours and the reference back to back on the same Redis,
// in rounds that rotate which side goes first, with the database flushed
// before each measurement; the table shows the median of each side. The
// harness checks what it measured: every claim answered claimed and landed
// (DBSIZE), every hash matches the reference's, every tools/call succeeded
// and reached the vendor exactly once.
//
//  1. Claim throughput: redisstore.Store.Claim of a fresh key (unique keys;
//     a claim only, no finalize) from 1, 50 and 200 goroutines sharing one
//     auto-pipelined rueidis client (refserver uses pooled connections
//     for latency instead; row 4 measures that), against
//     redis-benchmark -c N -P 16 sending EVALSHA of the very same claim
//     script (read from idempotency/redisstore/lua and proven identical to
//     the compiled one with SCRIPT EXISTS) with the arguments the store
//     sends. Target: 0.8 of the limit at concurrency 200.
//  2. The same claims against a go-redis claim written by hand (WATCH,
//     HMGET, MULTI/HSET/PEXPIRE/EXEC; see handClaim), with one pooled
//     connection per worker. Target: 2x. Both rows also show the Redis CPU
//     time per claim (INFO cpu, user plus system), which tells a Redis-bound
//     side from a client-bound one.
//  3. idempotency.RequestHash of a 1 KiB and a 64 KiB JSON document against
//     gowebpki/jcs.Transform plus SHA-256, single goroutine, with allocations
//     and bytes per operation from the allocator's counters. Target: 10x (issue 16), and
//     at most 8 allocations per hash whatever the size.
//  4. refserver's tools/call rate and p50/p99 latency from 1 and from 32
//     concurrent clients (-mcp-clients; fresh Idempotency-Key each), against
//     a server built from the same go-sdk with the idempotency layer absent
//     (see serveBare). Both run as their own processes and call the same
//     local vendor, which answers 201 at once. refserver has no switch to
//     turn its idempotency off, so the bare server is this binary started
//     again in that role; it also writes no log line per call, while
//     refserver writes two, which counts against refserver. Targets: 0.8 of
//     the bare rate at one client, where every call waits for the layer's
//     whole latency, and 1.0 at 32.
//  5. Finalized records without a body (a 204), with a 1 KiB JSON body and
//     with a 64 KiB one (a Stripe-style charge and a list of charges, from
//     the fixtures in testdata, every value varied per record; see vary),
//     written through the store's public API: MEMORY USAGE (SAMPLES 0) of
//     one record with its encoding; the growth of used_memory per record
//     over many records, each with its own body, which adds the keyspace
//     and expiry dictionary entries, projected to 10 million claims retained
//     24h; and the Redis time of the scripts per claim and per finalize
//     (INFO commandstats). Targets: MEMORY USAGE at most 400 bytes without a
//     body; used_memory per record at most 300 bytes without a body and
//     1,100 bytes with the 1 KiB one.
//
// Other processes on the same cores are noise that the rounds and medians
// only damp: compare ratios, not absolute rates, and rerun a MISS before
// believing it. -cpuprofile profiles the harness process, which is the
// client side of rows 1 to 3.
package main
