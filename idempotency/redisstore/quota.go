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
// flushed. It counts what stores with Options.AccountBytes wrote: each
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
	return sum + s.acct.unflushed(workspace), nil
}

// MemoryFraction is the highest used_memory/maxmemory over the masters the
// client knows (INFO memory), 0 for a master without maxmemory, and for
// one that refuses INFO under Options.SkipEvictionCheck (miniredis). A gateway
// refuses fresh claims (ClaimRequest.NoCreate) above a fraction of it, so
// that finalizes, renewals and settles keep room: under noeviction Redis
// refuses every write at maxmemory, and an accepted call would end
// unknown.
func (s *Store) MemoryFraction(ctx context.Context) (float64, error) {
	nodes := s.client.Nodes()
	high := 0.0
	for addr, n := range nodes {
		info, err := n.Do(ctx, n.B().Info().Section("memory").Section("replication").Build()).ToString()
		if _, refused := rueidis.IsRedisErr(err); refused && s.noInfo {
			continue // a server that reports no memory (miniredis) has no limit to watch
		}
		if err != nil {
			return 0, fmt.Errorf("redisstore: memory fraction: INFO on %s: %w", addr, err)
		}
		f, master, err := memoryFraction(info)
		if err != nil {
			return 0, fmt.Errorf("redisstore: memory fraction: %s: %w", addr, err)
		}
		if master || len(nodes) == 1 {
			high = max(high, f)
		}
	}
	return high, nil
}

// memoryFraction reads used_memory/maxmemory (0 without maxmemory) and
// whether the node is a master from INFO memory and replication.
func memoryFraction(info string) (f float64, master bool, err error) {
	var used, limit int64 = -1, -1
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
			return 0, false, fmt.Errorf("INFO %s: %w", k, err)
		}
	}
	if used < 0 || limit < 0 {
		return 0, false, errors.New("INFO memory lacks used_memory or maxmemory")
	}
	if limit == 0 {
		return 0, master, nil
	}
	return float64(used) / float64(limit), master, nil
}

// accounting counts the bytes a store writes per workspace and record TTL
// and flushes them in the background (Options.AccountBytes): a call never
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

// add counts n bytes written into a record of workspace that expires in
// ttl ms. A nil accounting (off) counts nothing.
func (a *accounting) add(workspace string, ttl int64, n int64) {
	if a == nil || n <= 0 || a.closed.Load() {
		return
	}
	a.mu.Lock()
	a.pending[acctKey{workspace, int(ttl)}] += n
	a.mu.Unlock()
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
// Options.AccountBytes, after a last flush). The client stays open; a
// closed store's calls still work, but count no more bytes. It is
// idempotent.
func (s *Store) Close() { s.acct.close() }

// recordOverhead is what Redis spends per record key beyond its name and
// value (dict entry, object, expiry), and the index entry's score and
// skiplist node: an estimate, for the stored-bytes accounting.
const recordOverhead = 128

// claimBytes estimates what a claim that creates a record stores: the
// record (its fixed fields, route, digests and vendor key), its key and
// its index entry.
func claimBytes(key, route, vk, member string) int64 {
	const fields = 2*32 + 8 + 8 + 64 // digests, incarnation, op, times, state and counters
	return int64(recordOverhead + len(key) + len(route) + len(vk) + fields + len(member))
}

// resultBytes is what a stored result adds to its record (encodeResult's
// arguments: status, body as stored, headers).
func resultBytes(res []string) int64 {
	var n int
	for _, v := range res {
		n += len(v)
	}
	return int64(n)
}

// applied reports whether element i of a script's reply says "already
// applied" (1): a re-sent write, counted the first time.
func applied(arr []rueidis.RedisMessage, i int) bool {
	if len(arr) <= i {
		return false
	}
	v, err := arr[i].AsInt64()
	return err == nil && v == 1
}

// accountClaim counts a record that the claim res created: a reservation
// of a fresh slot (token 1, not a re-send), or a hold whose ticket is the
// one this claim minted (a fresh held record, or the one re-hold of a
// record, which adds its ticket).
func (s *Store) accountClaim(req idempotency.ClaimRequest, res idempotency.ClaimResult, fresh, key, route, vk, member string) {
	if s.acct == nil || res.AlreadyApplied {
		return
	}
	switch {
	case res.Status == idempotency.StatusClaimed && res.Token == 1:
		s.acct.add(req.Scope.Workspace, s.uretentionD.Milliseconds(), claimBytes(key, route, vk, member))
	case res.Status == idempotency.StatusHeld && fresh != "" && res.Ticket == fresh:
		// The record, its ticket key and its pending approvals entry.
		n := claimBytes(key, route, vk, member) + recordOverhead + int64(len(fresh)+len(key)) + int64(len(member))
		s.acct.add(req.Scope.Workspace, s.retentionMS, n)
	}
}

// accountResult counts a result a finalize or settle stored, in a record
// that now expires in ttl ms (a decimal, as sent to the script).
func (s *Store) accountResult(workspace, ttl string, result []string) {
	if s.acct == nil {
		return
	}
	ms, err := strconv.ParseInt(ttl, 10, 64)
	if err != nil {
		return
	}
	s.acct.add(workspace, ms, resultBytes(result))
}
