package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
)

func realClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func realStore(t testing.TB, c rueidis.Client, opts Options) *Store {
	t.Helper()
	s, err := New(t.Context(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestRecordIsCompact measures finalized records on real Redis (key names
// as the harness makes them): MEMORY USAGE of one, and used_memory per
// record over many, for no body, a realistic 1 KiB vendor answer and a
// realistic 64 KiB one (chargeJSON, chargeList: varied per record, not
// padding). A record is one string whatever its body, never a hash that a
// body turns into a hashtable. OBOL_RECORD_MEMORY_N sets how many records
// are measured: 200 by default, which checks the encoding and MEMORY
// USAGE; the used_memory bound is checked from 10,000 (it is only steady
// over many records), a run of minutes under -race.
func TestRecordIsCompact(t *testing.T) {
	srv := redistest.Start(t)
	c := realClient(t, srv.Addr())
	s := realStore(t, c, Options{SkipDataLossCheck: true}) // it flushes Redis between kinds
	n := 200
	if v, err := strconv.Atoi(os.Getenv("OBOL_RECORD_MEMORY_N")); err == nil && v > 0 {
		n = v
	}
	scope := idempotency.Scope{Workspace: "ws_bench", Connection: "conn_bench", Tool: "bench.create_charge"}
	route := idempotency.Route{Connection: "conn_bench", Provider: "benchpay", Tool: "bench.create_charge",
		Method: "POST", Host: "127.0.0.1:9000", Path: "/v1/charges", Binding: effectspec.BindingHeader}
	rng := rand.New(rand.NewPCG(16, 1))
	json := http.Header{"Content-Type": {"application/json"}}
	kinds := []struct {
		name        string
		body        func() []byte
		usage, used int64 // bounds in bytes
	}{
		{"no body", func() []byte { return nil }, 330, 420},
		{"1 KiB", func() []byte {
			for {
				if b := chargeJSON(rng); len(b) >= 1000 && len(b) <= 1060 {
					return b
				}
			}
		}, 1050, 1100},
		{"64 KiB", func() []byte { return chargeList(rng, 62) }, 18 << 10, 18 << 10},
	}
	for _, kind := range kinds {
		used := func() int64 {
			info, err := c.Do(t.Context(), c.B().Info().Section("memory").Build()).ToString()
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(info, "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					return n
				}
			}
			t.Fatal("no used_memory")
			return 0
		}
		if err := c.Do(t.Context(), c.B().Flushall().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		before := used()
		var rk string
		var size int
		for range n {
			k := idempotency.NewKey()
			res, err := s.Claim(t.Context(), idempotency.ClaimRequest{Scope: scope, Key: k, KeySource: idempotency.KeySupplied,
				RequestHash: hashOf("args"), Binding: effectspec.BindingHeader, Route: route.Record()})
			if err != nil || res.Status != idempotency.StatusClaimed {
				t.Fatalf("claim: %+v, %v", res, err)
			}
			body := kind.body()
			size = len(body)
			stored := &idempotency.StoredResult{Status: 201, Header: json, Body: body}
			if body == nil {
				stored = &idempotency.StoredResult{Status: 204}
			}
			if _, err := s.Finalize(t.Context(), idempotency.FinalizeRequest{Scope: scope, Key: k, Token: res.Token,
				Outcome: effectspec.Accepted, Result: stored}); err != nil {
				t.Fatal(err)
			}
			rk, _ = scope.StorageKey(s.prefix, k)
			if rec, err := s.Lookup(t.Context(), scope, k); err != nil || !bytes.Equal(rec.Result.Body, body) {
				t.Fatalf("lookup: %v; body differs: %v", err, err == nil)
			}
		}
		perRecord := (used() - before) / int64(n)
		usage, err := c.Do(t.Context(), c.B().MemoryUsage().Key(rk).Samples(0).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		enc, err := c.Do(t.Context(), c.B().ObjectEncoding().Key(rk).Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("finalized record, %s (%d B body): MEMORY USAGE %d B (%s, key %d B), used_memory %d B per record over %d",
			kind.name, size, usage, enc, len(rk), perRecord, n)
		// used_memory per record is only steady over many records (the
		// dictionaries grow in powers of two).
		if enc != "raw" || usage > kind.usage || n >= 10000 && perRecord > kind.used {
			t.Errorf("%s: MEMORY USAGE %d B (%s), used_memory %d B per record; want raw, <= %d and <= %d",
				kind.name, usage, enc, perRecord, kind.usage, kind.used)
		}
	}
}

// TestReadOnlyLookupOnRedis checks that Redis 7 runs the lookup script with
// EVALSHA_RO (TIME allowed), without the miniredis fallback.
func TestReadOnlyLookupOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	s := realStore(t, realClient(t, srv.Addr()), Options{})
	k := idempotency.NewKey()
	mustClaim(t, s, claimReq(k), idempotency.StatusClaimed)
	if rec, err := s.Lookup(t.Context(), testScope, k); err != nil || rec.State != effectspec.InProgress {
		t.Fatalf("lookup = %+v, %v", rec, err)
	}
	if s.noTimeInRO.Load() {
		t.Fatal("Redis refused TIME in EVALSHA_RO")
	}
}

func TestEvictionPolicyRefused(t *testing.T) {
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl"} {
		t.Run(policy, func(t *testing.T) {
			srv := redistest.Start(t, "--maxmemory-policy", policy)
			c := realClient(t, srv.Addr())
			_, err := New(t.Context(), c, Options{})
			if !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), policy) {
				t.Fatalf("New: %v, want ErrEvictionPolicy naming %s", err, policy)
			}
			if _, err := New(t.Context(), c, Options{SkipEvictionCheck: true}); err != nil {
				t.Fatalf("New with SkipEvictionCheck: %v", err)
			}
		})
	}
}

// TestEvictionPolicyEveryClusterNode: one evicting master is enough to refuse.
func TestEvictionPolicyEveryClusterNode(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 0)
	c := realClient(t, cl.Addrs()...)
	realStore(t, c, Options{})
	if _, err := cl.Master(2).Do("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"); err != nil {
		t.Fatal(err)
	}
	if _, err := New(t.Context(), c, Options{}); !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), cl.Master(2).Addr()) {
		t.Fatalf("New: %v, want ErrEvictionPolicy naming %s", err, cl.Master(2).Addr())
	}
}

// commandCalls reads INFO commandstats: calls per command name.
func commandCalls(t testing.TB, c rueidis.Client) map[string]int {
	t.Helper()
	info, err := c.Do(t.Context(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		m[strings.TrimPrefix(name, "cmdstat_")] = n
	}
	return m
}

// roundTrips counts the round trips a client makes: each Do and each
// DoMulti (one pipeline) is one.
type roundTrips struct {
	rueidis.Client
	n atomic.Int64
}

func (c *roundTrips) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.Do(ctx, cmd)
}

func (c *roundTrips) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	c.n.Add(1)
	return c.Client.DoMulti(ctx, cmds...)
}

// TestRoundTrips: a first call is two round trips of one script each (the
// claim, which writes the index entry, the finalize, which removes it), a
// replay one round trip of one script.
func TestRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	c := &roundTrips{Client: realClient(t, srv.Addr())}
	s := realStore(t, c, Options{})
	k := idempotency.NewKey()
	count := func(f func()) (trips, scripts int) {
		if err := c.Client.Do(t.Context(), c.B().ConfigResetstat().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		c.n.Store(0)
		f()
		trips = int(c.n.Load())
		m := commandCalls(t, c.Client)
		return trips, m["evalsha"] + m["eval"] + m["evalsha_ro"] + m["eval_ro"]
	}
	if trips, scripts := count(func() {
		res := mustClaim(t, s, claimReq(k), idempotency.StatusClaimed)
		mustFinalize(t, s, k, res.Token, effectspec.Accepted, &idempotency.StoredResult{Status: 200})
	}); trips != 2 || scripts != 2 {
		t.Fatalf("first call: %d round trips, %d scripts; want 2 and 2 (claim, finalize)", trips, scripts)
	}
	if trips, scripts := count(func() { mustClaim(t, s, claimReq(k), idempotency.StatusReplay) }); trips != 1 || scripts != 1 {
		t.Fatalf("replay: %d round trips, %d scripts; want 1 and 1 (claim)", trips, scripts)
	}
}

// TestWaitReplicas runs a master with one real replica: WAIT 1 passes in the
// same round trip as the script, WAIT 2 cannot and the reservation is
// refused.
func TestWaitReplicas(t *testing.T) {
	master := redistest.Start(t)
	replica := redistest.Start(t, "--replicaof", "127.0.0.1", strconv.Itoa(master.Port()))
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := master.Do("INFO", "replication")
		if err == nil && strings.Contains(fmt.Sprint(v), "connected_slaves:1") && strings.Contains(fmt.Sprint(v), "state=online") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s did not come online: %v %v", replica.Addr(), v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := realClient(t, master.Addr())
	one := realStore(t, c, Options{WaitReplicas: 1, WaitTimeout: 2 * time.Second})
	k := idempotency.NewKey()
	res := mustClaim(t, one, claimReq(k), idempotency.StatusClaimed)
	if _, err := one.Reserve(t.Context(), idempotency.ReserveRequest{Scope: testScope, Key: k, Token: res.Token}); err != nil {
		t.Fatalf("reserve with one replica: %v", err)
	}
	// More than the master has can never pass: refused at startup.
	if _, err := New(t.Context(), c, Options{WaitReplicas: 2, WaitTimeout: 20 * time.Millisecond}); !errors.Is(err, errReplicaCount) {
		t.Fatalf("New wanting two replicas of one: %v, want errReplicaCount", err)
	}
	// The replica leaves: reservations fall short, are refused, and are
	// finalized as never sent.
	short := realStore(t, c, Options{WaitReplicas: 1, WaitTimeout: 20 * time.Millisecond})
	if _, err := replica.Do("REPLICAOF", "NO", "ONE"); err != nil {
		t.Fatal(err)
	}
	for {
		v, err := master.Do("INFO", "replication")
		if err == nil && strings.Contains(fmt.Sprint(v), "connected_slaves:0") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica did not leave: %v %v", v, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	k = idempotency.NewKey()
	_, err := short.Claim(t.Context(), claimReq(k))
	if !errors.Is(err, errReplicas) || !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("claim without its replica: %v", err)
	}
	if rec, err := short.Lookup(t.Context(), testScope, k); err != nil || rec.State != effectspec.Unknown || rec.SentAttempts != 0 {
		t.Fatalf("after a refused reservation: %+v, %v; want unknown with nothing sent", rec, err)
	}
	if _, err := New(t.Context(), c, Options{WaitReplicas: 1}); !errors.Is(err, errReplicaCount) {
		t.Fatalf("New wanting a replica that left: %v, want errReplicaCount", err)
	}
}

// TestWaitReplicasCluster: the WAIT follows the script to the master that
// owns each key's slot.
func TestWaitReplicasCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3, 1)
	c := realClient(t, cl.Addrs()...)
	s := realStore(t, c, Options{WaitReplicas: 1, WaitTimeout: 2 * time.Second})
	for i := 0; i < 30; i++ {
		mustClaim(t, s, claimReq(idempotency.NewKey()), idempotency.StatusClaimed)
	}
}

// TestStoredBytesMatchUsedMemory: the bytes the accounting counts per record
// are within 30% of what the record costs Redis (used_memory growth per
// record over many), for accepted records (a realistic 1 KiB answer),
// unknown ones (in their index) and held ones (with their ticket and
// pending approvals entry).
func TestStoredBytesMatchUsedMemory(t *testing.T) {
	srv := redistest.Start(t)
	c := realClient(t, srv.Addr())
	const n = 2000
	scope := idempotency.Scope{Workspace: "ws_bench", Connection: "conn_bench", Tool: "bench.create_charge"}
	route := idempotency.Route{Connection: "conn_bench", Provider: "benchpay", Tool: "bench.create_charge",
		Method: "POST", Host: "127.0.0.1:9000", Path: "/v1/charges", Binding: effectspec.BindingHeader}
	rng := rand.New(rand.NewPCG(16, 2))
	json := http.Header{"Content-Type": {"application/json"}}
	used := func() int64 {
		info, err := c.Do(t.Context(), c.B().Info().Section("memory").Build()).ToString()
		if err != nil {
			t.Fatal(err)
		}
		u, _, _, err := memoryUse(info + "\nmaxmemory:0")
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, kind := range []struct {
		name string
		make func(s *Store, k idempotency.Key)
	}{
		{"accepted", func(s *Store, k idempotency.Key) {
			res := mustClaim(t, s, idempotency.ClaimRequest{Scope: scope, Key: k, KeySource: idempotency.KeySupplied,
				RequestHash: hashOf("args"), Binding: effectspec.BindingHeader, Route: route.Record()}, idempotency.StatusClaimed)
			var body []byte
			for len(body) < 1000 || len(body) > 1060 {
				body = chargeJSON(rng)
			}
			if _, err := s.Finalize(t.Context(), idempotency.FinalizeRequest{Scope: scope, Key: k, Token: res.Token,
				Outcome: effectspec.Accepted, Result: &idempotency.StoredResult{Status: 201, Header: json, Body: body}}); err != nil {
				t.Fatal(err)
			}
		}},
		{"unknown", func(s *Store, k idempotency.Key) {
			res := mustClaim(t, s, idempotency.ClaimRequest{Scope: scope, Key: k, KeySource: idempotency.KeySupplied,
				RequestHash: hashOf("args"), Binding: effectspec.BindingHeader, Route: route.Record()}, idempotency.StatusClaimed)
			if _, err := s.Finalize(t.Context(), idempotency.FinalizeRequest{Scope: scope, Key: k, Token: res.Token,
				Outcome: effectspec.Unknown}); err != nil {
				t.Fatal(err)
			}
		}},
		{"held", func(s *Store, k idempotency.Key) {
			mustClaim(t, s, idempotency.ClaimRequest{Scope: scope, Key: k, KeySource: idempotency.KeySupplied, ApprovalRequired: true,
				RequestHash: hashOf("args"), Binding: effectspec.BindingHeader, Route: route.Record()}, idempotency.StatusHeld)
		}},
	} {
		if err := c.Do(t.Context(), c.B().Flushall().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		s := realStore(t, c, Options{SkipDataLossCheck: true, AccountBytes: time.Hour}) // Redis is flushed between kinds
		s.acct.flush()
		before, counted := used(), int64(0)
		for range n {
			kind.make(s, idempotency.NewKey())
		}
		grew := (used() - before) / n
		s.acct.flush()
		counted, err := s.StoredBytes(t.Context(), scope.Workspace)
		if err != nil {
			t.Fatal(err)
		}
		counted /= n
		s.Close()
		t.Logf("%s: counted %d B per record, used_memory grew %d B per record (%.2f)", kind.name, counted, grew, float64(counted)/float64(grew))
		if counted < grew*7/10 || counted > grew*13/10 {
			t.Errorf("%s: counted %d B per record, used_memory grew %d B: more than 30%% apart", kind.name, counted, grew)
		}
	}
}
