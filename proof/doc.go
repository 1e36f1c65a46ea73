// Package proof holds the reliability suite of Obol: tests that attack the
// promise of the idempotency core (no duplicate side effect, attempt_count
// equal to what the vendor could have seen, no acknowledged record lost)
// with real processes and real Redis on loopback, and check that it holds.
// The package has no API; it is all tests.
//
// The one recommended way to run it (redis-server 7+ in PATH; CI sets
// OBOL_REQUIRE_REDIS=1 so that a missing server fails instead of skipping):
//
//	OBOL_REQUIRE_REDIS=1 go test -count=1 -v ./proof/ | grep FIGURES
//
// Every test logs one FIGURES line: calls made, duplicates found,
// attempt_count mismatches, records lost, wall time, and test-specific
// counts. A test fails when any of the first three figures is not zero.
//
// # The tests
//
//   - TestManyGateways: 4 refserver processes (built once with go build) on
//     one redis-server, 256 concurrent raw JSON-RPC callers per binding kind
//     (header, body_pointer, unsupported): 32 keys, each sent by 8 callers
//     spread two per gateway, arriving 40ms apart against a vendor that takes
//     150ms, so callers see in_progress and replays. Each key reaches the
//     vendor exactly once; every answer is that one result or in_progress;
//     GET /v1/receipts agrees on all four gateways.
//   - TestCrashMatrix: a gateway is killed with SIGKILL in each window of a
//     call, for each binding, and the same key is retried through another
//     gateway after the 1s lease. See "Crash windows" below.
//   - TestRedisRestartMidLoad, TestRedisKill9AOF: library level
//     (retry.Orchestrator on redisstore, HTTPTarget to a counting vendor),
//     Redis with appendonly yes and appendfsync always, stopped (SIGTERM)
//     or killed (SIGKILL) under load and restarted. The outage is driven by
//     events, not sleeps: the vendor holds the first requests it reads, the
//     test stops Redis, releases them so their finalizes meet the outage,
//     and restarts Redis only once those and a later claim have failed
//     (in_flight_at_outage, in_flight_at_kill). Calls during the outage
//     fail closed with an error matching idempotency.ErrStoreUnavailable; a
//     call whose claim failed sent nothing; every acknowledged reservation
//     and every key the vendor saw has its record afterwards; failed keys
//     complete after the lease with no second effect (a retry that meets the
//     store still recovering fails closed again and is counted as
//     recovery_failed_closed).
//   - TestFaultProxy: our RESP-aware proxy between the store and Redis. One
//     subtest drops the reply of every fifth claim and finalize after Redis
//     ran the script and cuts the connection: the orchestrator re-sends the
//     same operation id, the store answers "already applied" (checked for
//     every dropped claim), nothing doubles. The other adds 3ms latency to
//     every command batch and cuts every connection every 150ms, with no
//     re-sends, so calls fail closed and are recovered after the lease.
//   - TestClusterFailover: 3 masters and 3 replicas, WaitReplicas=1, a master
//     killed with SIGKILL while the vendor holds calls, the replica's
//     promotion awaited. Every key the vendor saw and every acknowledged
//     reservation keeps its record after the failover; fresh calls that
//     fail closed meanwhile are completed later (after_failover_failed_closed).
//   - TestLongCallRenewsLease: a refserver on real Redis with a 2s store
//     lease calls a tool (EffectSpec timeout 30s) whose vendor holds the
//     request for ten leases. Meanwhile the same key through another
//     gateway is in_progress with a retry_after_ms on every poll, and the
//     record (read with the store's Lookup, which reads a lapsed lease as
//     unknown) stays in_flight with a lease deadline that never moves back
//     and ends ten leases past where it began. The call then answers
//     accepted with attempt_count 1, a replay agrees, the vendor saw one
//     request.
//   - TestKill9Takeover: the same slow tool, header and unsupported
//     bindings; the gateway is killed with SIGKILL (after a renewal) while
//     the vendor holds the request, and the key is retried through another
//     gateway. Every answer that arrives before a lease deadline the record
//     showed live is in_progress; then the header tool makes attempt 2 with
//     the same vendor key (attempt_count 2, the vendor saw the key twice)
//     and the unsupported one is outcome_unknown with nothing sent. The
//     time from the kill to the first other answer is the contract bound
//     checked (3 leases, loose for a loaded machine; within one lease plus
//     polling in practice) and a figure.
//   - TestGracefulStopLongCall: SIGTERM to a gateway while the vendor holds
//     a call for five leases (longer than the shutdown wait, within the
//     tool's timeout): the gateway must stay up until the vendor answers,
//     the call answers accepted with one attempt and the record is
//     accepted. The vendor answers when the gateway exits or after the hold,
//     whichever comes first.
//   - TestLinearizability: concurrent histories of claim (fresh and
//     re-sent), reserve, finalize, lookup and lease expiry against real
//     Redis, checked with porcupine per key against a sequential model of
//     DESIGN.md section 6 with fencing tokens. TestLinearizabilityModelRejects
//     shows the checker refusing histories that break the contract.
//
// # Crash windows
//
// Each window is reached deterministically, never by sleeping and hoping:
//
//   - a, after the claim and before the send: the fault proxy between the
//     victim gateway and Redis lets the claim script run and withholds its
//     reply, so the attempt is reserved and the gateway cannot have sent it.
//   - b, after the vendor read the request and before the finalize: the
//     vendor blocks on the request; the test kills the gateway while it
//     blocks.
//   - c1, during the finalize, not applied: the proxy holds the finalize
//     command before Redis sees it.
//   - c2, during the finalize, applied: the proxy lets the finalize run and
//     withholds its reply.
//
// The proxy pairs replies with commands by their order on the connection
// and names the store's scripts by their argument shape (claim 13
// arguments, finalize an outcome code second, reserve a numeric token
// first), so it needs no knowledge of the scripts' source.
//
// # Decisions
//
//   - attempt_count counts what the vendor could have seen. In window a the
//     reserved attempt provably never left, so with a vendor binding the
//     retry's receipt says attempt_count 2 while the vendor saw 1 request.
//     The same happens when a slow store (a WAIT during a failover) eats the
//     dispatch deadline: the attempt fails before_send, is still counted,
//     and the call ends unknown. The suite counts such keys as
//     reserved_never_sent (and completes them later), and counts a mismatch
//     when the vendor saw more requests than attempt_count (a send without
//     a reservation) or, for a call that ended accepted or rejected, fewer.
//   - A duplicate is a vendor request beyond attempt_count, or for an
//     unsupported binding any second request for one call.
//   - Lease expiry in the linearizability model is an explicit operation:
//     the store runs with a one-hour lease and "expire" is one EVAL that sets
//     the record's lease deadline into the past. The store's scripts judge
//     leases only by comparing that field with Redis TIME, so this is the
//     clock passing the deadline at one instant the model can name. It is
//     the one place the suite relies on the record layout (field "l").
//   - In the cluster test the promoted replica has no replica of its own
//     until the killed master comes back, so WAIT 1 fails and its
//     reservations fail closed with redisstore.ErrReplicas; the test
//     restarts the killed node, which rejoins as a replica. A finalize is
//     not WAITed for, so a finalized record may read unknown again after a
//     failover; the suite reports those as finalizations_rolled_back.
//   - The refserver gateways run with environment "test" so that the
//     unsupported binding is not denied by policy.
package proof
