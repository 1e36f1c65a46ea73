package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// The fleet's scope version (docs/DESIGN.md, "The record and its lifecycle")
// lives at {prefix}meta:scope_version as a decimal number. [New] reads it: the
// same as [idempotency.ScopeVersion] starts the store; another value refuses
// ([idempotency.ErrScopeVersionChanged]). An absent key is written (SET NX)
// only when no record exists under the prefix (a SCAN of every master);
// otherwise [New] refuses (the same error), since those records may be of
// another version.
//
// A running store re-reads the key at most once per lease, on the claim
// path: the first claim that finds the last reading older than a lease
// reads it again (one GET before its script) while concurrent claims wait
// for that reading, so no claim runs on a reading older than a lease and
// every other claim stays one round trip. A key that reads anything but
// this store's version (another number, or a closing mark written by the
// operator) stops claiming: Claim fails with an error matching
// [idempotency.ErrScopeVersionChanged] (503
// scope_version_conflict) and writes nothing. Reserve, Renew and Finalize
// go on, so that calls already in flight end. A key that is gone (deleted,
// or a flushed Redis) changes nothing here: only a gateway that finds no
// record under the prefix writes it again, and the running stores read what
// it wrote at their next reading. A flushed Redis is seen by the sentinels
// read in the same pipeline (sentinel.go).

// scanCount is the COUNT hint of every SCAN: enough keys per round trip to
// be quick, few enough to keep each call short on a busy node.
const scanCount = 1000

func scopeVersionKey(prefix string) string { return prefix + "meta:scope_version" }

// recordPattern matches every record key under prefix. The prefix may hold
// glob characters, which are escaped.
func recordPattern(prefix string) string {
	var b strings.Builder
	for i := 0; i < len(prefix); i++ {
		switch c := prefix[i]; c {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteString("idem:*")
	return b.String()
}

// parseVersion reads a stored scope version: a decimal number from 1 up,
// written without sign or leading zeros.
func parseVersion(v string) (int, bool) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || strconv.Itoa(n) != v {
		return 0, false
	}
	return n, true
}

// versionText names a stored value in an error without quoting it: the key
// is meant to hold a number, and anything else is described, not shown.
func versionText(v string) string {
	if n, ok := parseVersion(v); ok {
		return strconv.Itoa(n)
	}
	return "a value that is not a version number"
}

// scopeCheck is a store's latest reading of the fleet's scope version.
type scopeCheck struct {
	client rueidis.Client
	key    string
	want   string        // idempotency.ScopeVersion in decimal
	every  time.Duration // the lease
	// timeout bounds each reading: rueidis retries a GET on LOADING and
	// connection errors until its ctx ends.
	timeout time.Duration
	// elapsed is the monotonic time since the check was made; tests replace
	// it.
	elapsed func() time.Duration

	readAt  atomic.Int64                 // elapsed at the start of the latest reading
	verdict atomic.Pointer[scopeVerdict] // nil while the fleet's version is ours
	// stale asks the next claim to read again at once (Health found a node
	// unreachable or loading: it may come back empty).
	stale atomic.Bool
	// amnesia watches the sentinels in the same readings (sentinel.go); nil
	// with [Options.SkipDataLossCheck].
	amnesia *amnesia

	mu      sync.Mutex
	reading chan struct{} // non-nil while a reading is in flight
}

// scopeVerdict is a reading that stops claiming.
type scopeVerdict struct{ fleet string }

func (c *scopeCheck) errFor(v *scopeVerdict) error {
	if v == nil {
		return nil
	}
	return fmt.Errorf("redisstore: %w: %s now holds %s, this gateway's is %s; it stops claiming",
		idempotency.ErrScopeVersionChanged, c.key, versionText(v.fleet), c.want)
}

// check answers whether claims may go on, reading the key again when the
// latest reading is older than a lease. A failed reading is an *unavailableError
// (nothing was claimed); the next claim reads again.
func (c *scopeCheck) check(ctx context.Context) error {
	for {
		if !c.stale.Load() && c.elapsed()-time.Duration(c.readAt.Load()) < c.every {
			return c.verdictErr()
		}
		c.mu.Lock()
		if !c.stale.Load() && c.elapsed()-time.Duration(c.readAt.Load()) < c.every {
			c.mu.Unlock()
			continue // another claim's reading just landed
		}
		if w := c.reading; w != nil {
			c.mu.Unlock()
			select {
			case <-w:
				continue
			case <-ctx.Done():
				return opError("claim", ctx.Err())
			}
		}
		w := make(chan struct{})
		c.reading = w
		c.mu.Unlock()

		err := c.read(ctx)
		c.mu.Lock()
		c.reading = nil
		close(w)
		c.mu.Unlock()
		if err != nil {
			return opError("claim", err)
		}
		return c.verdictErr()
	}
}

// verdictErr is the latest reading's refusal of claims, a loss of data
// first.
func (c *scopeCheck) verdictErr() error {
	if c.amnesia != nil {
		if err := c.amnesia.err(); err != nil {
			return err
		}
	}
	return c.errFor(c.verdict.Load())
}

// read reads the fleet's scope version, and the sentinels in the same
// pipeline, and records the verdicts.
func (c *scopeCheck) read(ctx context.Context) error {
	start := c.elapsed()
	c.stale.Store(false)
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmds := rueidis.Commands{c.client.B().Get().Key(c.key).Build()}
	var r *reading
	if c.amnesia != nil {
		var more rueidis.Commands
		r, more = c.amnesia.start(ctx)
		cmds = append(cmds, more...)
	}
	res := c.client.DoMulti(ctx, cmds...)
	if r != nil {
		c.amnesia.judge(ctx, r, res[1:])
	}
	v, err := res[0].ToString()
	if err != nil && !rueidis.IsRedisNil(err) {
		return fmt.Errorf("scope version: %w", err)
	}
	// Only a value other than ours stops claiming; see the comment at the
	// top of this file for a key that is gone.
	if err == nil && v != c.want {
		c.verdict.Store(&scopeVerdict{fleet: v})
	} else {
		c.verdict.Store(nil)
	}
	c.readAt.Store(int64(start))
	return nil
}

// get reads the fleet's scope version alone ([New]).
func (c *scopeCheck) get(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return c.client.Do(ctx, c.client.B().Get().Key(c.key).Build()).ToString()
}

// initScope reads the fleet's scope version, or writes it on a prefix that
// holds no record (only if write: not during a loss nobody acknowledged,
// whose acknowledgement writes it), and returns the check that claims run.
// opts are resolved.
func initScope(ctx context.Context, client rueidis.Client, opts Options, write bool) (*scopeCheck, error) {
	base := time.Now()
	c := &scopeCheck{
		client:  client,
		key:     scopeVersionKey(opts.Prefix),
		want:    strconv.Itoa(idempotency.ScopeVersion),
		every:   opts.Lease,
		timeout: opts.ReadTimeout,
		elapsed: func() time.Duration { return time.Since(base) },
	}
	start := c.elapsed()
	v, err := c.get(ctx)
	switch {
	case rueidis.IsRedisNil(err) && !write:
		v, err = c.want, nil
	case rueidis.IsRedisNil(err):
		v, err = c.create(ctx, opts.Prefix, false)
	case err != nil:
		err = fmt.Errorf("redisstore: scope version: %w", err)
	}
	if err != nil {
		return nil, err
	}
	if v != c.want {
		return nil, fmt.Errorf("redisstore: %w: %s holds %s, this gateway's is %s: drain the fleet of the other version first (README: Upgrading the key scope)",
			idempotency.ErrScopeVersionChanged, c.key, versionText(v), c.want)
	}
	c.readAt.Store(int64(start))
	return c, nil
}

// create writes this store's version on a prefix without records (or with
// records, when adopt: the operator counted them, [Init]) and returns the
// version now stored: its own, or that of a gateway that wrote first.
func (c *scopeCheck) create(ctx context.Context, prefix string, adopt bool) (string, error) {
	found, err := anyRecord(ctx, c.client, prefix)
	if err != nil {
		return "", err
	}
	if found && !adopt {
		return "", fmt.Errorf("redisstore: %w: records exist under the prefix %q but %s is absent: count the live records by scope version "+
			"(refserver scope-status), and once every live record is of version %s, run refserver store init -adopt-records",
			idempotency.ErrScopeVersionChanged, prefix, c.key, c.want)
	}
	old, err := c.client.Do(ctx, c.client.B().Set().Key(c.key).Value(c.want).Nx().Get().Build()).ToString()
	switch {
	case rueidis.IsRedisNil(err):
		return c.want, nil
	case err != nil:
		return "", fmt.Errorf("redisstore: scope version: %w", err)
	}
	return old, nil
}

// masters returns the nodes that hold data of their own: every node the
// client knows except replicas (ROLE). A node that cannot answer ROLE
// (miniredis) counts as a master, since reading a replica twice is
// harmless and skipping a master is not.
func masters(ctx context.Context, client rueidis.Client) []nodeClient {
	var out []nodeClient
	for addr, n := range client.Nodes() {
		role, err := n.Do(ctx, n.B().Role().Build()).ToArray()
		if err == nil && len(role) > 0 {
			if r, _ := role[0].ToString(); r != "master" {
				continue
			}
		}
		out = append(out, nodeClient{addr, n})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].addr < out[j].addr })
	return out
}

type nodeClient struct {
	addr string
	rueidis.Client
}

// scan calls each with every batch of record keys on every master, until
// each returns false or the key space is done.
func scan(ctx context.Context, client rueidis.Client, prefix string, each func(n nodeClient, keys []string) (bool, error)) error {
	pattern := recordPattern(prefix)
	for _, n := range masters(ctx, client) {
		for cursor := uint64(0); ; {
			e, err := n.Do(ctx, n.B().Scan().Cursor(cursor).Match(pattern).Count(scanCount).Build()).AsScanEntry()
			if err != nil {
				return fmt.Errorf("redisstore: SCAN on %s: %w", n.addr, err)
			}
			if len(e.Elements) > 0 {
				more, err := each(n, e.Elements)
				if err != nil || !more {
					return err
				}
			}
			if e.Cursor == 0 {
				break
			}
			cursor = e.Cursor
		}
	}
	return nil
}

// anyRecord reports whether a record key exists under prefix on any master.
func anyRecord(ctx context.Context, client rueidis.Client, prefix string) (bool, error) {
	found := false
	err := scan(ctx, client, prefix, func(nodeClient, []string) (bool, error) {
		found = true
		return false, nil
	})
	return found, err
}

// CountOptions configure [CountRecords]. The zero value counts under
// [idempotency.DefaultPrefix] without progress reports.
type CountOptions struct {
	// Prefix starts every key. If empty, [idempotency.DefaultPrefix].
	Prefix string
	// Progress, if non-nil, is called with the number of keys read so far
	// each time it passes a multiple of ProgressEvery.
	Progress func(keys int)
	// ProgressEvery is the step of Progress. If zero, 10000.
	ProgressEvery int
}

// CountRecords counts the live records under a prefix by scope version and
// state, for an operator changing the key scope (docs/DESIGN.md, "The record
// and its lifecycle"): it SCANs every master with a bounded COUNT and reads
// each record's version, state and lease (the record's head, or HMGET of a
// schema 1 hash), judging leases by the node's own TIME. It only reads: it
// never writes or deletes a key, and works whether or not the fleet's scope
// version is set (it needs no [Store]). A record that expires while it runs is
// not counted. The counts come sorted by version, then state.
func CountRecords(ctx context.Context, client rueidis.Client, opts CountOptions) ([]idempotency.RecordCount, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if opts.Prefix == "" {
		opts.Prefix = idempotency.DefaultPrefix
	}
	if err := idempotency.ValidatePrefix(opts.Prefix); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if opts.ProgressEvery < 0 {
		return nil, fmt.Errorf("%w: progress every %d: must not be negative", ErrInvalidConfig, opts.ProgressEvery)
	}
	if opts.ProgressEvery == 0 {
		opts.ProgressEvery = 10000
	}
	counts := map[versionState]int{}
	read := 0
	err := scan(ctx, client, opts.Prefix, func(n nodeClient, keys []string) (bool, error) {
		now, err := redisTime(ctx, n)
		if err != nil {
			return false, fmt.Errorf("redisstore: TIME on %s: %w", n.addr, err)
		}
		// Through the client, not the node: a key whose slot moved since
		// the SCAN is read where it now lives. A record's state, version and
		// lease are its first fields (lua/common.lua); a record still of
		// schema 1 is a hash, read with HMGET.
		cmds := make(rueidis.Commands, len(keys))
		for i, k := range keys {
			cmds[i] = client.B().Getrange().Key(k).Start(0).End(headBytes - 1).Build()
		}
		var hashes []string
		for i, r := range client.DoMulti(ctx, cmds...) {
			head, err := r.ToString()
			if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "WRONGTYPE") {
				hashes = append(hashes, keys[i])
				continue
			}
			if err != nil {
				return false, fmt.Errorf("redisstore: GETRANGE: %w", err)
			}
			if b, live := classifyHead(head, now); live {
				counts[b]++
			}
		}
		if len(hashes) > 0 {
			cmds = make(rueidis.Commands, len(hashes))
			for i, k := range hashes {
				cmds[i] = client.B().Hmget().Key(k).Field("w", "m", "l").Build()
			}
			for _, r := range client.DoMulti(ctx, cmds...) {
				b, live, err := classify(r, now)
				if err != nil {
					return false, err
				}
				if live {
					counts[b]++
				}
			}
		}
		before := read
		read += len(keys)
		if opts.Progress != nil && read/opts.ProgressEvery > before/opts.ProgressEvery {
			opts.Progress(read)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]idempotency.RecordCount, 0, len(counts))
	for b, c := range counts {
		out = append(out, idempotency.RecordCount{Version: b.v, State: b.s, Records: c})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Version != out[j].Version {
			return out[i].Version < out[j].Version
		}
		return out[i].State < out[j].State
	})
	return out, nil
}

// versionState is one line of [CountRecords]' table.
type versionState struct {
	v int
	s effectspec.Outcome
}

// headBytes is what [CountRecords] reads of a record string: its schema byte
// and first fields (m, w, l: at most 3+3+9 bytes) fit.
const headBytes = 32

// classifyHead reads the head of a record string: its version and state,
// or live false for a key that is gone (GETRANGE of a missing key is
// empty). A string that is not a record counts with an empty state.
func classifyHead(head string, now int64) (b versionState, live bool) {
	if head == "" {
		return b, false
	}
	flat, ok := unpackHead(head)
	if !ok {
		return b, true
	}
	var m, w, l string
	for i := 0; i+1 < len(flat); i += 2 {
		switch flat[i] {
		case "m":
			m = flat[i+1]
		case "w":
			w = flat[i+1]
		case "l":
			l = flat[i+1]
		}
	}
	if m == "" {
		return b, true
	}
	st, ok := codeStates[m[:1]]
	if !ok {
		return b, true
	}
	v := 0
	if w != "" {
		if v, ok = parseVersion(w); !ok {
			return b, true
		}
	}
	if st == effectspec.InProgress {
		if lease, err := strconv.ParseInt(l, 10, 64); err != nil || lease <= now {
			st = effectspec.Unknown
		}
	}
	b.v, b.s = v, st
	return b, true
}

// classify reads one HMGET w m l reply: the record's version and state, or
// live false for a key that is gone.
func classify(r rueidis.RedisResult, now int64) (b versionState, live bool, err error) {
	vals, err := r.ToArray()
	if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "WRONGTYPE") {
		return b, true, nil // not a hash: not a record
	}
	if err != nil {
		return b, false, fmt.Errorf("redisstore: HMGET: %w", err)
	}
	if len(vals) != 3 {
		return b, false, errors.New("redisstore: short HMGET reply")
	}
	w, werr := vals[0].ToString()
	m, merr := vals[1].ToString()
	l, lerr := vals[2].ToString()
	if rueidis.IsRedisNil(werr) && rueidis.IsRedisNil(merr) && rueidis.IsRedisNil(lerr) {
		return b, false, nil // expired since the SCAN
	}
	if merr != nil || m == "" {
		return b, true, nil
	}
	st, ok := codeStates[m[:1]]
	if !ok {
		return b, true, nil
	}
	v := 0
	if werr == nil {
		if v, ok = parseVersion(w); !ok {
			return b, true, nil
		}
	}
	if st == effectspec.InProgress {
		lease, err := strconv.ParseInt(l, 10, 64)
		if lerr != nil || err != nil || lease <= now {
			st = effectspec.Unknown
		}
	}
	b.v, b.s = v, st
	return b, true, nil
}

// redisTime is a node's clock in milliseconds.
func redisTime(ctx context.Context, n rueidis.Client) (int64, error) {
	t, err := n.Do(ctx, n.B().Time().Build()).AsStrSlice()
	if err != nil {
		return 0, err
	}
	if len(t) != 2 {
		return 0, errors.New("short TIME reply")
	}
	sec, err1 := strconv.ParseInt(t[0], 10, 64)
	us, err2 := strconv.ParseInt(t[1], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return sec*1000 + us/1000, nil
}

// FleetScopeVersion reads the fleet's scope version under prefix (section
// "Scope version" of docs/DESIGN.md) as it is stored, without a [Store]:
// ok is false when none is set. An operator's tool reads it beside
// [CountRecords]; the text may be anything a hand wrote there.
func FleetScopeVersion(ctx context.Context, client rueidis.Client, prefix string) (v string, ok bool, err error) {
	v, err = client.Do(ctx, client.B().Get().Key(scopeVersionKey(prefix)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("redisstore: scope version: %w", err)
	}
	return v, true, nil
}
