package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
)

// The fleet-wide quotas of a workspace (docs/DESIGN.md, "Quotas and
// headroom"): a token bucket for its call rate and time-bucketed counters
// of the bytes its records store, each one key in the workspace's slot
// (hash tag: the workspace), so both work alike on a standalone Redis and
// on a Cluster and every gateway of a fleet shares them.

// quotaKey is a workspace's token bucket.
func (s *Store) quotaKey(workspace string) string { return s.prefix + "quota:{" + workspace + "}" }

// bytesKey is a workspace's stored-bytes counters.
func (s *Store) bytesKey(workspace string) string { return s.prefix + "qb:{" + workspace + "}" }

func validWorkspace(op, workspace string) error {
	if err := (idempotency.Scope{Workspace: workspace, Tool: "-", Connection: "-"}).Validate(); err != nil {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return nil
}

// TakeTokens takes up to n tokens from the workspace's token bucket, shared
// by every store on this Redis: it refills at rate tokens per second up to
// burst, and a bucket never used is full. It returns the tokens granted
// (0 to n, all of them when the bucket holds n) and, when fewer than n,
// how long until the next token (retryAfter). One script on one key, timed
// by Redis TIME; a gateway takes tokens in small batches off the call path
// and spends them locally. A rate that is not positive and finite, a burst
// or n below 1, or an invalid workspace is an error that changes nothing.
func (s *Store) TakeTokens(ctx context.Context, workspace string, rate float64, burst, n int) (granted int, retryAfter time.Duration, err error) {
	if err := validWorkspace("take tokens", workspace); err != nil {
		return 0, 0, err
	}
	if !(rate > 0) || math.IsInf(rate, 0) {
		return 0, 0, fmt.Errorf("redisstore: take tokens: rate %v: must be positive and finite", rate)
	}
	if burst < 1 || n < 1 {
		return 0, 0, fmt.Errorf("redisstore: take tokens: burst %d, n %d: both must be at least 1", burst, n)
	}
	args := scriptargs.QuotaSpec.Argv(&scriptargs.Quota{Rate: strconv.FormatFloat(rate, 'f', -1, 64), Burst: burst, N: n})
	arr, _, err := s.execKeys(ctx, s.sc.quota, []string{s.quotaKey(workspace)}, args, false)
	if err != nil {
		return 0, 0, opError("take tokens", err)
	}
	if len(arr) != 2 {
		return 0, 0, opError("take tokens", errors.New("short reply"))
	}
	g, err1 := arr[0].AsInt64()
	ms, err2 := arr[1].AsInt64()
	if err := errors.Join(err1, err2); err != nil {
		return 0, 0, opError("take tokens", err)
	}
	return int(g), time.Duration(ms) * time.Millisecond, nil
}

// StoredBytes is about how many bytes the workspace's live records hold,
// fleet-wide: the sum of its expiry buckets that have not ended (those
// that have are removed), plus what this store has counted and not yet
// flushed. It counts what stores with [Options.AccountBytes] wrote: each
// record a claim creates (its encoded size, plus the key and index entry),
// and each result a finalize or settle stores, in the bucket of the
// record's expiry. It is approximate, and errs high: a record finalized
// with a shorter TTL stays counted until its claim's bucket ends, and a
// bucket until its end (at most Retention/24 after its records). Another
// store's writes count once it has flushed them (within its
// AccountBytes).
func (s *Store) StoredBytes(ctx context.Context, workspace string) (int64, error) {
	if err := validWorkspace("stored bytes", workspace); err != nil {
		return 0, err
	}
	args := scriptargs.StoredBytesSpec.Argv(&scriptargs.StoredBytes{})
	arr, _, err := s.execKeys(ctx, s.sc.storedBytes, []string{s.bytesKey(workspace)}, args, false)
	if err != nil {
		return 0, opError("stored bytes", err)
	}
	if len(arr) != 1 {
		return 0, opError("stored bytes", errors.New("short reply"))
	}
	sum, err := arr[0].AsInt64()
	if err != nil {
		return 0, opError("stored bytes", err)
	}
	return max(sum+s.acct.unflushed(workspace), 0), nil
}

// MemoryFraction is the highest used_memory/maxmemory over the masters the
// client knows (INFO memory), 0 for a master without maxmemory, and for
// one that refuses INFO under [Options.SkipEvictionCheck] (miniredis). A gateway
// refuses dispatches above a fraction of it (MemoryEstimate between two
// reads), so that finalizes, renewals and settles keep room: under
// noeviction Redis refuses every write at maxmemory, and an accepted call
// whose finalize is refused ends unknown. The reading is kept for
// MemoryEstimate; a failed read keeps the last one.
func (s *Store) MemoryFraction(ctx context.Context) (float64, error) {
	written := s.written.Load() // before INFO: a write during it counts twice, never not at all
	nodes := s.client.Nodes()
	high := memReading{written: written}
	for addr, n := range nodes {
		info, err := n.Do(ctx, n.B().Info().Section("memory").Section("replication").Build()).ToString()
		if _, refused := rueidis.IsRedisErr(err); refused && s.noInfo {
			continue // a server that reports no memory (miniredis) has no limit to watch
		}
		if err != nil {
			return 0, fmt.Errorf("redisstore: memory fraction: INFO on %s: %w", addr, err)
		}
		used, limit, master, err := memoryUse(info)
		if err != nil {
			return 0, fmt.Errorf("redisstore: memory fraction: %s: %w", addr, err)
		}
		if (master || len(nodes) == 1) && limit > 0 && (high.limit == 0 || used*high.limit > high.used*limit) {
			high.used, high.limit = used, limit
		}
	}
	if prev := s.mem.Load(); prev != nil {
		high.rate = prev.fleetRate(high)
	}
	s.mem.Store(&high)
	return high.fraction(0), nil
}

// MemoryEstimate is the last MemoryFraction reading plus the bytes this
// store's scripts have written since (records created, results stored:
// the estimates of the stored-bytes accounting, counted whether or not
// [Options.AccountBytes] is set), as a fraction of the same maxmemory; 0
// before the first reading and without maxmemory. It makes no store call:
// a gateway asks it on every call, and refuses on it between two reads
// (docs/DESIGN.md, "Quotas and headroom"). What this store wrote is
// scaled by how much the memory grew per byte it wrote between the last
// two reads, so that the estimate follows the fleet's writes (other
// stores on the same Redis) at their recent pace. It errs high by what
// expired or was deleted since the read, and low by a fleet that writes
// faster than it did.
func (s *Store) MemoryEstimate() float64 {
	r := s.mem.Load()
	if r == nil {
		return 0
	}
	return r.fraction(s.written.Load() - r.written)
}

// memReading is a MemoryFraction reading: the fullest master's used_memory
// and maxmemory (0: none has one), the store's written count when it was
// taken, and rate, how much the store's memory grew per byte this store
// wrote between the last two readings (at least 1).
type memReading struct {
	used, limit, written int64
	rate                 float64
}

// maxFleetRate bounds memReading.rate: a store that writes little while
// others write much extrapolates at most this much.
const maxFleetRate = 16

// fleetRate is the rate of next, read after r: the memory's growth per
// byte this store wrote in between, when it wrote enough to tell (64 KiB);
// else r's. Other stores' writes make it more than 1, so that the estimate
// grows with the fleet's writes, not this store's alone; expiries and
// deletions bring it back to 1.
func (r *memReading) fleetRate(next memReading) float64 {
	own := next.written - r.written
	if own < 64<<10 || r.limit != next.limit {
		return max(r.rate, 1)
	}
	return min(max(float64(next.used-r.used)/float64(own), 1), maxFleetRate)
}

// fraction is the reading's used/maxmemory with since bytes written
// since, at the fleet's rate.
func (r *memReading) fraction(since int64) float64 {
	if r.limit == 0 {
		return 0
	}
	return (float64(r.used) + float64(max(since, 0))*max(r.rate, 1)) / float64(r.limit)
}

// wrote counts n bytes the store's scripts wrote, for MemoryEstimate.
func (s *Store) wrote(n int64) {
	if n > 0 {
		s.written.Add(n)
	}
}

// memoryFraction reads used_memory/maxmemory (0 without maxmemory) and
// whether the node is a master from INFO memory and replication.
func memoryFraction(info string) (f float64, master bool, err error) {
	used, limit, master, err := memoryUse(info)
	if err != nil || limit == 0 {
		return 0, master, err
	}
	return float64(used) / float64(limit), master, nil
}

// memoryUse reads used_memory and maxmemory (0: none) and whether the node
// is a master from INFO memory and replication.
func memoryUse(info string) (used, limit int64, master bool, err error) {
	used, limit = -1, -1
	master = true
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "used_memory":
			used, err = strconv.ParseInt(v, 10, 64)
		case "maxmemory":
			limit, err = strconv.ParseInt(v, 10, 64)
		case "role":
			master = v == "master"
		}
		if err != nil {
			return 0, 0, false, fmt.Errorf("INFO %s: %w", k, err)
		}
	}
	if used < 0 || limit < 0 {
		return 0, 0, false, errors.New("INFO memory lacks used_memory or maxmemory")
	}
	return used, limit, master, nil
}

// accounting counts the bytes a store writes per workspace and record TTL
// and flushes them in the background ([Options.AccountBytes]): a call never
// waits for it.
type accounting struct {
	s       *Store
	every   time.Duration
	width   int // ms: the expiry buckets' width
	mu      sync.Mutex
	pending map[acctKey]int64
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	closed  atomic.Bool
}

type acctKey struct {
	workspace string
	ttl       int // ms
}

// acctWidth is the width of the expiry buckets for a retention: 1/24 of
// it (an hour for the default 24h), so a bucket outlives its records by
// at most that.
func acctWidth(retention time.Duration) int {
	return max(int((retention / 24).Milliseconds()), 1)
}

func newAccounting(s *Store, every, retention time.Duration) *accounting {
	a := &accounting{s: s, every: every, width: acctWidth(retention), pending: map[acctKey]int64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go a.run()
	return a
}

// add counts n bytes (negative: bytes moved out) into the bucket of the
// records of workspace that expire in ttl ms. A nil accounting (off)
// counts nothing.
func (a *accounting) add(workspace string, ttl int64, n int64) {
	if a == nil || n == 0 || a.closed.Load() {
		return
	}
	a.mu.Lock()
	a.pending[acctKey{workspace, int(ttl)}] += n
	a.mu.Unlock()
}

// move moves n bytes of a record of workspace whose expiry moved from ttl
// from to ttl to (both ms from now): the record follows its expiry.
func (a *accounting) move(workspace string, from, to, n int64) {
	if from == to {
		return
	}
	a.add(workspace, from, -n)
	a.add(workspace, to, n)
}

func (a *accounting) unflushed(workspace string) int64 {
	if a == nil {
		return 0
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var sum int64
	for k, v := range a.pending {
		if k.workspace == workspace {
			sum += v
		}
	}
	return sum
}

func (a *accounting) run() {
	defer close(a.done)
	t := time.NewTicker(a.every)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			a.flush()
			return
		case <-t.C:
			a.flush()
		}
	}
}

// flush sends what was counted, one script per workspace and TTL, in one
// pipeline. What fails is counted again at the next flush: a lost reply
// may count twice, which errs high.
func (a *accounting) flush() {
	a.mu.Lock()
	batch := a.pending
	a.pending = map[acctKey]int64{}
	a.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	keys := make([]acctKey, 0, len(batch))
	execs := make([]rueidis.LuaExec, 0, len(batch))
	for k, v := range batch {
		if v == 0 {
			continue
		}
		keys = append(keys, k)
		execs = append(execs, rueidis.LuaExec{Keys: []string{a.s.bytesKey(k.workspace)},
			Args: scriptargs.AccountSpec.Argv(&scriptargs.Account{TTL: k.ttl, Width: a.width, Bytes: int(v)})})
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(a.every, a.s.readTimeout))
	defer cancel()
	res := a.s.sc.account.lua.ExecMulti(ctx, a.s.client, execs...)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, r := range res {
		if r.Error() != nil {
			a.pending[keys[i]] += batch[keys[i]]
		}
	}
}

// close stops the flusher after a last flush.
func (a *accounting) close() {
	if a == nil {
		return
	}
	a.once.Do(func() {
		a.closed.Store(true)
		close(a.stop)
		<-a.done
	})
}

// Close stops the store's background work (the flusher of
// [Options.AccountBytes], after a last flush). The client stays open; a
// closed store's calls still work, but count no more bytes. It is
// idempotent.
func (s *Store) Close() { s.acct.close() }

// keyOverhead is what Redis spends per key beyond its name and value: the
// dict entry, the value's object and allocator rounding, the expiry
// entry. An estimate, for the stored-bytes accounting and MemoryEstimate
// (measured by TestStoredBytesMatchUsedMemory).
const keyOverhead = 96

// entryOverhead is what an index bucket spends per entry beyond its
// member (the score, the skiplist node, the dict entry).
const entryOverhead = 64

// bucketOverhead is an index bucket's own cost beyond its key: a sorted
// set in skiplist encoding (a member is longer than Redis's
// zset-max-listpack-value), whose header node alone takes about 540 B.
const bucketOverhead = 720

// recordBytes estimates a record as a claim writes it, with its key: the
// fixed fields (digests, incarnation, op, times, state and counters), the
// route and the vendor key.
func recordBytes(key, route string, vkLen int) int64 {
	const fields = 2*32 + 8 + 8 + 64
	return int64(keyOverhead + len(key) + len(route) + vkLen + fields)
}

// entryBytes estimates an entry of an index bucket (the unknown index, the
// pending approvals), with the bucket it makes: a workspace has a bucket
// per Cluster slot (16384), so until it holds thousands of entries most of
// them have a bucket of their own, which costs more than the entry; with
// many more, buckets are shared and this errs high.
func entryBytes(bucket, member string) int64 {
	return int64(keyOverhead + len(bucket) + bucketOverhead + len(member) + entryOverhead)
}

// ticketBytes estimates an approval ticket's key: its name and value
// (the record's scope and key).
func ticketBytes(ticket, key string) int64 {
	return int64(keyOverhead + 2*len(ticket) + 2*len(key))
}

// claimBytes estimates a record that may be dispatched (in flight,
// unknown): the record and its entry in the unknown index.
func claimBytes(key, route string, vkLen int, bucket, member string) int64 {
	return recordBytes(key, route, vkLen) + entryBytes(bucket, member)
}

// resultBytes is what a stored result adds to its record (encodeResult's
// arguments: status, body as stored, its size, headers; not the dropped
// flag, a field only when set): none for no result.
func resultBytes(res []string) int64 {
	var n int
	for i, v := range res {
		if i != 1 {
			n += len(v)
		}
	}
	return int64(n)
}

// applied reports whether element i of a script's reply says "already
// applied" (1): a re-sent write, counted the first time.
func applied(arr []rueidis.RedisMessage, i int) bool {
	v, ok := replyInt(arr, i)
	return ok && v == 1
}

// replyInt is element i of a script's reply as an integer, if it is one.
func replyInt(arr []rueidis.RedisMessage, i int) (int64, bool) {
	if len(arr) <= i {
		return 0, false
	}
	v, err := arr[i].AsInt64()
	return v, err == nil
}

// accountClaim counts what the claim res wrote (docs/DESIGN.md, "Quotas and
// headroom"): a record it created (a reservation of a fresh slot, with its
// index entry; a hold whose ticket is the one this claim minted, with its
// ticket and pending approvals entry), or the move of an existing record to
// a new expiry (a redispatch, the lease-expiry path: the claim's reply
// carries the TTL the record had, arr's element moved).
func (s *Store) accountClaim(req idempotency.ClaimRequest, res idempotency.ClaimResult, arr []rueidis.RedisMessage, c claimCall) {
	if res.AlreadyApplied {
		return
	}
	ws, u := req.Scope.Workspace, s.uretentionD.Milliseconds()
	n := claimBytes(c.key, c.route, len(c.vk), c.bucket, c.member)
	switch res.Status {
	case idempotency.StatusClaimed:
		if moved, ok := replyInt(arr, claimedMoved); ok && moved > 0 {
			s.acct.move(ws, moved, u, n)
		} else if res.Token == 1 {
			s.acct.add(ws, u, n)
			s.wrote(n)
		}
	case idempotency.StatusOutcomeUnknown, idempotency.StatusDestinationConflict:
		if moved, ok := replyInt(arr, 2); ok && moved > 0 {
			s.acct.move(ws, moved, u, n)
		}
	case idempotency.StatusHeld:
		if c.fresh == "" || res.Ticket != c.fresh {
			return
		}
		// The record, its ticket key and its pending approvals entry.
		n = recordBytes(c.key, c.route, len(c.vk)) + ticketBytes(c.fresh, c.key) + entryBytes(c.pending, c.member)
		s.acct.add(ws, s.retentionMS, n)
		s.wrote(n)
	}
}

// accountFinal counts what a finalize wrote (head: the record without its
// body, as its reply carries it): an unknown outcome adds its result to
// the record, which keeps its expiry and index entry; a final one moves
// the record from the unknown retention, where its claim counted it with
// its index entry, to the retention, counted as stored.
func (s *Store) accountFinal(req idempotency.FinalizeRequest, c finalizeCall, rec idempotency.Record, head string) {
	ws, u := req.Scope.Workspace, s.uretentionD.Milliseconds()
	res := resultBytes(c.result)
	s.wrote(res)
	if s.acct == nil {
		return
	}
	if c.ttl == s.uretention {
		s.acct.add(ws, u, res)
		return
	}
	route, err := packRoute(req.Scope, rec.Route)
	if err != nil {
		route = ""
	}
	vkLen := 0
	if !rec.VendorKey.IsZero() {
		vkLen = len(packKey(rec.VendorKey))
	}
	s.acct.add(ws, u, -claimBytes(c.key, route, vkLen, c.bucket, c.member))
	ms, err := strconv.ParseInt(c.ttl, 10, 64)
	if err != nil {
		return
	}
	body := int64(0)
	if len(c.result) > 2 {
		body = int64(len(c.result[2]))
	}
	s.acct.add(ws, ms, int64(keyOverhead+len(c.key)+len(head))+body)
}

// accountResult counts a result a settle stored, in a record that now
// expires in ttl ms (a decimal, as sent to the script).
func (s *Store) accountResult(workspace, ttl string, result []string) {
	s.wrote(resultBytes(result))
	if s.acct == nil {
		return
	}
	ms, err := strconv.ParseInt(ttl, 10, 64)
	if err != nil {
		return
	}
	s.acct.add(workspace, ms, resultBytes(result))
}
