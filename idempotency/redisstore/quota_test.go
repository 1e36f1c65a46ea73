package redisstore

import (
	"context"
	"crypto/rand"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

func mustTake(t *testing.T, s *Store, ws string, rate float64, burst, n int) (int, time.Duration) {
	t.Helper()
	g, ra, err := s.TakeTokens(t.Context(), ws, rate, burst, n)
	if err != nil {
		t.Fatalf("TakeTokens(%s, %v, %d, %d): %v", ws, rate, burst, n, err)
	}
	return g, ra
}

// TestTakeTokens: a bucket starts full, grants what it holds, refills at
// the rate up to the burst, and says when the next token comes; two stores
// on one Redis share it; bad input is an error that writes nothing.
func TestTakeTokens(t *testing.T) {
	m := newMini(t, Options{})
	now := t0
	advance := func(d time.Duration) { now = now.Add(d); m.mr.SetTime(now); m.mr.FastForward(d) }
	const ws = "ws_acme"
	if g, ra := mustTake(t, m.store, ws, 10, 5, 3); g != 3 || ra != 0 {
		t.Fatalf("full bucket, 3 of 5: granted %d, retry %v; want 3, 0", g, ra)
	}
	if g, ra := mustTake(t, m.store, ws, 10, 5, 5); g != 2 || ra != 100*time.Millisecond {
		t.Fatalf("2 left, 5 asked: granted %d, retry %v; want 2, 100ms", g, ra)
	}
	if g, ra := mustTake(t, m.store, ws, 10, 5, 1); g != 0 || ra != 100*time.Millisecond {
		t.Fatalf("empty: granted %d, retry %v; want 0, 100ms", g, ra)
	}
	advance(250 * time.Millisecond) // 2.5 tokens
	if g, ra := mustTake(t, m.store, ws, 10, 5, 5); g != 2 || ra != 50*time.Millisecond {
		t.Fatalf("after 250ms at 10/s: granted %d, retry %v; want 2, 50ms", g, ra)
	}
	advance(time.Hour)
	if g, _ := mustTake(t, m.store, ws, 10, 5, 100); g != 5 {
		t.Fatalf("after an hour: granted %d, want the burst 5", g)
	}

	// Another store on the same Redis spends the same bucket; another
	// workspace has its own.
	other, err := New(t.Context(), m.client, Options{SkipEvictionCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	advance(time.Hour)
	a, _ := mustTake(t, m.store, ws, 1, 8, 5)
	b, ra := mustTake(t, other, ws, 1, 8, 5)
	if a+b != 8 || ra != time.Second {
		t.Fatalf("two stores: granted %d + %d, retry %v; want 8 in all, 1s", a, b, ra)
	}
	if g, _ := mustTake(t, other, "ws_other", 1, 8, 5); g != 5 {
		t.Fatalf("another workspace: granted %d, want 5", g)
	}

	// The key lives until the bucket would be full: gone, it is full.
	advance(9 * time.Second)
	if m.mr.Exists(m.store.quotaKey(ws)) {
		t.Fatalf("the bucket's key outlived its refill")
	}

	// A very slow bucket: its key lives a year at most (then reads full).
	if g, _ := mustTake(t, m.store, "ws_slow", 1e-9, 5, 1); g != 1 {
		t.Fatalf("slow bucket: granted %d, want 1", g)
	}
	if ttl := m.mr.TTL(m.store.quotaKey("ws_slow")); ttl <= 0 || ttl > 366*24*time.Hour {
		t.Fatalf("slow bucket's key TTL %v, want at most a year", ttl)
	}

	before := m.snapshot(t)
	for _, c := range []struct {
		ws          string
		rate        float64
		burst, n    int
		description string
	}{
		{ws, 0, 5, 1, "zero rate"}, {ws, -1, 5, 1, "negative rate"}, {ws, math.NaN(), 5, 1, "NaN rate"},
		{ws, math.Inf(1), 5, 1, "infinite rate"}, {ws, 1, 0, 1, "zero burst"}, {ws, 1, 5, 0, "zero n"},
		{"ws:bad", 1, 5, 1, "a workspace with a colon"}, {"", 1, 5, 1, "no workspace"},
	} {
		if _, _, err := m.store.TakeTokens(t.Context(), c.ws, c.rate, c.burst, c.n); err == nil {
			t.Errorf("%s: no error", c.description)
		}
	}
	if after := m.snapshot(t); after != before {
		t.Fatalf("refused TakeTokens changed the store:\n%s\nthen\n%s", before, after)
	}
}

// TestTakeTokensShared: on a real Redis and on a 3-master Cluster, stores
// of one fleet share each workspace's budget (a rate slow enough that no
// token comes back during the test).
func TestTakeTokensShared(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, addrs []string) {
		stores := []*Store{realStore(t, realClient(t, addrs...), Options{}), realStore(t, realClient(t, addrs...), Options{})}
		for w := range 6 { // workspaces over every master
			ws := "ws_" + strconv.Itoa(w)
			total := 0
			for i := range 6 {
				g, ra := mustTake(t, stores[i%2], ws, 0.001, 10, 3)
				total += g
				if g < 3 && ra < 900*time.Second {
					t.Fatalf("%s: short grant with retry %v, want about 1000s", ws, ra)
				}
			}
			if total != 10 {
				t.Fatalf("%s: two stores took %d tokens in all, want the burst 10", ws, total)
			}
		}
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		run(t, []string{redistest.Start(t).Addr()})
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := redistest.StartCluster(t, 3, 0)
		run(t, cl.Addrs())
	})
}

// miniAcct is a store on miniredis that accounts stored bytes, its flusher
// idle (the test flushes), with leases and retentions short enough to
// expire in a test; the miniredis clock is the test's.
type miniAcct struct {
	*mini
	now time.Time
}

func newMiniAcct(t *testing.T) *miniAcct {
	t.Helper()
	m := newMini(t, Options{Lease: 100 * time.Millisecond, Retention: 2400 * time.Millisecond,
		UnknownRetention: 4800 * time.Millisecond, AccountBytes: time.Hour})
	t.Cleanup(m.store.Close)
	return &miniAcct{mini: m, now: t0}
}

func (m *miniAcct) advance(d time.Duration) {
	m.now = m.now.Add(d)
	m.mr.SetTime(m.now)
	m.mr.FastForward(d)
}

func (m *miniAcct) stored(t *testing.T, s *Store) int64 {
	t.Helper()
	n, err := s.StoredBytes(t.Context(), testScope.Workspace)
	if err != nil {
		t.Fatalf("StoredBytes: %v", err)
	}
	return n
}

func acctReq(k idempotency.Key) idempotency.ClaimRequest {
	req := claimReq(k)
	req.Timeout = time.Second // within the short retention
	return req
}

// TestStoredBytes: the bytes grow with each record a claim creates and each
// result stored, not with writes that create nothing (a replay, a re-sent
// claim, a refusal, a held call asked again); another store of the fleet
// reads them once flushed; they drain as the records' buckets end.
func TestStoredBytes(t *testing.T) {
	m := newMiniAcct(t)
	reader := realStore(t, m.client, Options{SkipEvictionCheck: true}) // accounts nothing, reads the fleet's
	if n := m.stored(t, m.store); n != 0 {
		t.Fatalf("empty store: %d bytes", n)
	}
	k := idempotency.NewKey()
	req := acctReq(k)
	req.OpID = idempotency.NewOpID()
	mustClaim(t, m.store, req, idempotency.StatusClaimed)
	claimed := m.stored(t, m.store)
	if claimed < 200 {
		t.Fatalf("after a fresh claim: %d bytes, want the record's size", claimed)
	}
	if n := m.stored(t, reader); n != 0 {
		t.Fatalf("another store reads %d bytes before the flush", n)
	}
	m.store.acct.flush()
	if n, r := m.stored(t, m.store), m.stored(t, reader); n != claimed || r != claimed {
		t.Fatalf("after the flush: %d here, %d at another store; want %d", n, r, claimed)
	}

	// Writes that create nothing count nothing.
	mustClaim(t, m.store, req, idempotency.StatusClaimed) // a re-sent claim
	other := acctReq(k)
	mustClaim(t, m.store, other, idempotency.StatusInProgress)
	none := acctReq(idempotency.NewKey())
	none.NoCreate = true
	mustClaim(t, m.store, none, idempotency.StatusNoRecord)
	none.NoCreate, none.Refuse = false, true
	mustClaim(t, m.store, none, idempotency.StatusRefused)
	if n := m.stored(t, m.store); n != claimed {
		t.Fatalf("after claims that create nothing: %d bytes, want %d", n, claimed)
	}

	body := make([]byte, 1000) // incompressible: stored as sent
	rand.Read(body)
	mustFinalize(t, m.store, k, 1, effectspec.Accepted, &idempotency.StoredResult{Status: 201, Body: body})
	finalized := m.stored(t, m.store)
	// The record leaves its index entry and moves to the retention, with
	// its result.
	if finalized < 1300 || finalized >= claimed+1000 {
		t.Fatalf("after a finalize with a 1000-byte body: %d bytes, want the record and body, less than the claim's %d and the body", finalized, claimed)
	}
	mustClaim(t, m.store, acctReq(k), idempotency.StatusReplay)

	hk := idempotency.NewKey()
	hold := acctReq(hk)
	hold.ApprovalRequired = true
	mustClaim(t, m.store, hold, idempotency.StatusHeld)
	held := m.stored(t, m.store)
	if held <= finalized {
		t.Fatalf("after a hold: %d bytes, want more than %d", held, finalized)
	}
	mustClaim(t, m.store, hold, idempotency.StatusHeld) // asked again: no write
	if n := m.stored(t, m.store); n != held {
		t.Fatalf("a held call asked again: %d bytes, want %d", n, held)
	}
	m.store.acct.flush()
	if n := m.stored(t, reader); n != held {
		t.Fatalf("another store reads %d bytes, want %d", n, held)
	}

	// The accepted record and the hold live the retention, and so do
	// their counts; the claim's count moved with the record; then the
	// counters' key is gone.
	width := time.Duration(acctWidth(2400*time.Millisecond)) * time.Millisecond
	m.advance(2400*time.Millisecond + width)
	if n := m.stored(t, reader); n != 0 {
		t.Fatalf("after the retention: %d bytes, want 0", n)
	}
	m.advance(2400 * time.Millisecond)
	if m.mr.Exists(m.store.bytesKey(testScope.Workspace)) {
		t.Fatal("the counters' key outlived its buckets")
	}
	if _, err := m.store.StoredBytes(t.Context(), "ws:bad"); err == nil {
		t.Fatal("StoredBytes of an invalid workspace: no error")
	}
}

// TestStoredBytesFollowRecord: a record's bytes follow its expiry. A
// redispatch and the lease-expiry path give an unknown record a new TTL,
// and its count moves with it: it is counted while it lives, past the end
// of its first expiry's bucket, and drains when it expires.
func TestStoredBytesFollowRecord(t *testing.T) {
	m := newMiniAcct(t) // lease 100ms, unknown retention 4.8s, buckets 100ms
	// Each count is flushed at once: a pending one is counted from the
	// time of its flush.
	stored := func() int64 { m.store.acct.flush(); return m.stored(t, m.store) }
	width := time.Duration(acctWidth(2400*time.Millisecond)) * time.Millisecond
	k := idempotency.NewKey()
	mustClaim(t, m.store, acctReq(k), idempotency.StatusClaimed)
	mustFinalize(t, m.store, k, 1, effectspec.Unknown, nil)
	claimed := stored()
	m.advance(3 * time.Second)
	if res := mustClaim(t, m.store, acctReq(k), idempotency.StatusClaimed); res.Token != 2 {
		t.Fatalf("redispatch: token %d", res.Token)
	}
	if n := stored(); n != claimed {
		t.Fatalf("after a redispatch: %d bytes, want the record's %d", n, claimed)
	}
	m.advance(3 * time.Second) // past the first expiry, the record lives on
	if !m.mr.Exists(m.recordKey(t, k)) {
		t.Fatal("the redispatched record expired")
	}
	if n := stored(); n != claimed {
		t.Fatalf("past its first expiry: %d bytes, want the live record's %d", n, claimed)
	}

	// The lease-expiry path (a claim of another route after the lease
	// lapsed): the record turns unknown with a new TTL, and its count
	// follows.
	k2 := idempotency.NewKey()
	mustClaim(t, m.store, acctReq(k2), idempotency.StatusClaimed)
	two := stored()
	m.advance(time.Second)
	other := acctReq(k2)
	other.Route.Fingerprint = hashOf("another route")
	mustClaim(t, m.store, other, idempotency.StatusDestinationConflict)
	if n := stored(); n != two {
		t.Fatalf("after the lease-expiry path: %d bytes, want %d", n, two)
	}
	m.advance(2*time.Second + width) // k's record is gone, k2's lives past its first expiry
	if m.mr.Exists(m.recordKey(t, k)) || !m.mr.Exists(m.recordKey(t, k2)) {
		t.Fatal("records expired out of order")
	}
	if n := stored(); n != two-claimed {
		t.Fatalf("one record left: %d bytes, want %d", n, two-claimed)
	}
	m.advance(3 * time.Second)
	if n := stored(); n != 0 {
		t.Fatalf("both expired: %d bytes, want 0", n)
	}
}

// TestStoredBytesFlusher: the background flusher sends the counts without
// a call waiting for it, and Close sends what is left.
func TestStoredBytesFlusher(t *testing.T) {
	mr := miniredis.RunT(t)
	c := realClient(t, mr.Addr())
	s := realStore(t, c, Options{SkipEvictionCheck: true, AccountBytes: 10 * time.Millisecond})
	reader := realStore(t, c, Options{SkipEvictionCheck: true})
	mustClaim(t, s, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := reader.StoredBytes(t.Context(), testScope.Workspace)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the flusher sent nothing in 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}

	idle := realStore(t, c, Options{SkipEvictionCheck: true, AccountBytes: time.Hour, Prefix: "idle:"})
	r := claimReq(idempotency.NewKey())
	mustClaim(t, idle, r, idempotency.StatusClaimed)
	idleReader := realStore(t, c, Options{SkipEvictionCheck: true, Prefix: "idle:"})
	if n, _ := idleReader.StoredBytes(t.Context(), testScope.Workspace); n != 0 {
		t.Fatalf("before Close: %d bytes flushed, want 0", n)
	}
	idle.Close()
	idle.Close() // idempotent
	if n, _ := idleReader.StoredBytes(t.Context(), testScope.Workspace); n == 0 {
		t.Fatal("Close flushed nothing")
	}
	mustClaim(t, idle, claimReq(idempotency.NewKey()), idempotency.StatusClaimed) // a closed store still works
	s.Close()
}

// TestStoredBytesShared: on a real Redis and a 3-master Cluster, the
// counts two stores flush for several workspaces (spread over the masters)
// add up at a third store that counts nothing.
func TestStoredBytesShared(t *testing.T) {
	t.Parallel()
	run := func(t *testing.T, addrs []string) {
		opts := Options{AccountBytes: time.Hour}
		a, b := realStore(t, realClient(t, addrs...), opts), realStore(t, realClient(t, addrs...), opts)
		reader := realStore(t, realClient(t, addrs...), Options{})
		per := map[string]int64{}
		for w := range 6 {
			scope := testScope
			scope.Workspace = "ws_" + strconv.Itoa(w)
			for _, s := range []*Store{a, b} {
				req := claimReq(idempotency.NewKey())
				req.Scope = scope
				mustClaim(t, s, req, idempotency.StatusClaimed)
				n, err := s.StoredBytes(t.Context(), scope.Workspace)
				if err != nil {
					t.Fatal(err)
				}
				per[scope.Workspace] = max(per[scope.Workspace], n)
			}
		}
		a.Close()
		b.Close()
		for ws, one := range per {
			n, err := reader.StoredBytes(t.Context(), ws)
			if err != nil {
				t.Fatal(err)
			}
			if n < 2*200 || n < one {
				t.Fatalf("%s: %d bytes after two stores flushed a claim each, want both counted", ws, n)
			}
		}
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		run(t, []string{redistest.Start(t).Addr()})
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		run(t, redistest.StartCluster(t, 3, 0).Addrs())
	})
}

// TestMemoryFraction: used_memory/maxmemory of the fullest master, 0 with
// no maxmemory; on a real Redis, set by CONFIG SET.
func TestMemoryFraction(t *testing.T) {
	t.Parallel()
	used := func(t *testing.T, n rueidis.Client) int64 {
		info, err := n.Do(t.Context(), n.B().Info().Section("memory").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(l), "used_memory:"); ok {
				u, _ := strconv.ParseInt(v, 10, 64)
				return u
			}
		}
		t.Fatal("no used_memory")
		return 0
	}
	setMax := func(t *testing.T, n rueidis.Client, v int64) {
		if err := n.Do(t.Context(), n.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", strconv.FormatInt(v, 10)).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	frac := func(t *testing.T, s *Store) float64 {
		f, err := s.MemoryFraction(t.Context())
		if err != nil {
			t.Fatalf("MemoryFraction: %v", err)
		}
		return f
	}
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		c := realClient(t, redistest.Start(t).Addr())
		s := realStore(t, c, Options{})
		setMax(t, c, 0)
		if f := frac(t, s); f != 0 {
			t.Fatalf("no maxmemory: %v, want 0", f)
		}
		setMax(t, c, 4*used(t, c))
		if f := frac(t, s); f < 0.15 || f > 0.35 {
			t.Fatalf("maxmemory 4x used: %v, want about 0.25", f)
		}
		setMax(t, c, used(t, c)*21/20)
		if f := frac(t, s); f < 0.85 || f > 1.1 {
			t.Fatalf("maxmemory just above used: %v, want about 0.95", f)
		}
		setMax(t, c, 0)
	})
	t.Run("miniredis", func(t *testing.T) {
		// miniredis refuses INFO with sections: under SkipEvictionCheck
		// (newMini sets it) that is a server with no memory to watch; a
		// Store without it reports the refusal.
		t.Parallel()
		m := newMini(t, Options{})
		if f := frac(t, m.store); f != 0 {
			t.Fatalf("miniredis: %v, want 0", f)
		}
		m.store.noInfo = false
		if _, err := m.store.MemoryFraction(t.Context()); err == nil {
			t.Fatal("a refused INFO without SkipEvictionCheck: no error")
		}
	})
	t.Run("miniredis", func(t *testing.T) {
		// miniredis refuses INFO with sections: under SkipEvictionCheck
		// (newMini sets it) that is a server with no memory to watch; a
		// Store without it reports the refusal.
		t.Parallel()
		m := newMini(t, Options{})
		if f := frac(t, m.store); f != 0 {
			t.Fatalf("miniredis: %v, want 0", f)
		}
		m.store.noInfo = false
		if _, err := m.store.MemoryFraction(t.Context()); err == nil {
			t.Fatal("a refused INFO without SkipEvictionCheck: no error")
		}
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := redistest.StartCluster(t, 3, 0)
		s := realStore(t, realClient(t, cl.Addrs()...), Options{})
		if f := frac(t, s); f != 0 {
			t.Fatalf("no maxmemory: %v, want 0", f)
		}
		n := realClient(t, cl.Master(1).Addr())
		setMax(t, n, 2*used(t, n))
		if f := frac(t, s); f < 0.3 || f > 0.7 {
			t.Fatalf("one master at maxmemory 2x used: %v, want about 0.5", f)
		}
	})
}

// TestMemoryEstimate: between two reads of the store's memory, the
// estimate adds what the store wrote since (without AccountBytes too), and
// once another store on the same Redis writes as much, at the fleet's
// pace: twice as fast.
func TestMemoryEstimate(t *testing.T) {
	const limit = 64 << 20
	c := realClient(t, redistest.Start(t).Addr())
	if err := c.Do(t.Context(), c.B().ConfigSet().ParameterValue().ParameterValue("maxmemory", strconv.Itoa(limit)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	s1, s2 := realStore(t, c, Options{}), realStore(t, c, Options{})
	if e := s1.MemoryEstimate(); e != 0 {
		t.Fatalf("before a read: %v", e)
	}
	// write stores n records with 16 KiB random answers through s and
	// answers the bytes written.
	write := func(s *Store, n int) float64 {
		for range n {
			k := idempotency.NewKey()
			mustClaim(t, s, claimReq(k), idempotency.StatusClaimed)
			body := make([]byte, 16<<10)
			rand.Read(body)
			mustFinalize(t, s, k, 1, effectspec.Accepted, &idempotency.StoredResult{Status: 201, Body: body})
		}
		return float64(n*16<<10) / limit
	}
	read := func(s *Store) float64 {
		f, err := s.MemoryFraction(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	f0 := read(s1)
	if e := s1.MemoryEstimate(); e != f0 {
		t.Fatalf("just read %v, estimate %v", f0, e)
	}
	own := write(s1, 64)
	if e := s1.MemoryEstimate(); e < f0+own || e > f0+1.3*own {
		t.Fatalf("after writing %.4f of maxmemory: estimate %.4f, read %.4f", own, e, f0)
	}
	read(s1)
	// Another store writes as much as this one between two reads: the
	// memory grew twice what this one wrote, so its writes count twice.
	write(s1, 64)
	write(s2, 64)
	f1 := read(s1)
	own = write(s1, 64)
	if e := s1.MemoryEstimate(); e < f1+1.6*own || e > f1+2.6*own {
		t.Fatalf("after writing %.4f of maxmemory beside another store: estimate %.4f, read %.4f", own, e, f1)
	}
	if e, f := s1.MemoryEstimate(), read(s1); e < f {
		t.Fatalf("the estimate %.4f below the next reading %.4f", e, f)
	}
}

// TestMemoryFractionInfo: the INFO reader takes a master's fraction, says
// whether a node is a replica, and refuses an INFO without the fields.
func TestMemoryFractionInfo(t *testing.T) {
	for _, c := range []struct {
		info   string
		f      float64
		master bool
		err    bool
	}{
		{"# Memory\r\nused_memory:500\r\nmaxmemory:1000\r\n# Replication\r\nrole:master\r\n", 0.5, true, false},
		{"used_memory:500\r\nmaxmemory:0\r\nrole:master\r\n", 0, true, false},
		{"used_memory:900\r\nmaxmemory:1000\r\nrole:slave\r\n", 0.9, false, false},
		{"used_memory:900\r\n", 0, false, true},
		{"used_memory:x\r\nmaxmemory:1000\r\n", 0, false, true},
	} {
		f, master, err := memoryFraction(c.info)
		if (err != nil) != c.err || err == nil && (f != c.f || master != c.master) {
			t.Errorf("%q: %v, master %v, %v; want %v, %v, error %v", c.info, f, master, err, c.f, c.master, c.err)
		}
	}
}

// BenchmarkQuota measures the quota scripts on a real Redis: a take of
// tokens and a flush of one workspace's counts (one account script), and
// reports the Redis time each spends (INFO commandstats, usec per call of
// the script's EVALSHA).
func BenchmarkQuota(b *testing.B) {
	srv := redistest.Start(b)
	c := realClient(b, srv.Addr())
	s := realStore(b, c, Options{AccountBytes: time.Hour})
	b.Cleanup(s.Close)
	redisUsec := func(b *testing.B, f func()) {
		if err := c.Do(b.Context(), c.B().ConfigResetstat().Build()).Error(); err != nil {
			b.Fatal(err)
		}
		f()
		info, err := c.Do(b.Context(), c.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range strings.Split(info, "\n") {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "cmdstat_evalsha:"); ok {
				_, v, _ := strings.Cut(rest, "usec_per_call=")
				v, _, _ = strings.Cut(v, ",")
				us, _ := strconv.ParseFloat(v, 64)
				b.ReportMetric(us, "redis-us/call")
			}
		}
	}
	b.Run("take", func(b *testing.B) {
		redisUsec(b, func() {
			for b.Loop() {
				if _, _, err := s.TakeTokens(b.Context(), "ws_bench", 1e6, 1e6, 10); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("account", func(b *testing.B) {
		redisUsec(b, func() {
			for b.Loop() {
				s.acct.add("ws_bench", 86_400_000, 500)
				s.acct.flush()
			}
		})
	})
	b.Run("claim-accounted", func(b *testing.B) {
		// A fresh claim with AccountBytes: the same one script as without;
		// the count is a map update in memory.
		redisUsec(b, func() {
			for b.Loop() {
				if _, err := s.Claim(b.Context(), claimReq(idempotency.NewKey())); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("claim-plain", func(b *testing.B) {
		plain := realStore(b, c, Options{})
		redisUsec(b, func() {
			for b.Loop() {
				if _, err := plain.Claim(b.Context(), claimReq(idempotency.NewKey())); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
	b.Run("storedbytes", func(b *testing.B) {
		redisUsec(b, func() {
			for b.Loop() {
				if _, err := s.StoredBytes(context.Background(), "ws_bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
