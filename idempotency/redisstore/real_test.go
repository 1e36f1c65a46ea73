package redisstore

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

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

// TestRecordIsCompact measures a finalized record without body by MEMORY
// USAGE on real Redis (key name included): it must stay a listpack of at
// most 400 bytes.
func TestRecordIsCompact(t *testing.T) {
	srv := redistest.Start(t)
	c := realClient(t, srv.Addr())
	s := realStore(t, c, Options{})
	k := idempotency.NewKey()
	res := mustClaim(t, s, claimReq(k), idempotency.StatusClaimed)
	rk, _ := testScope.StorageKey(s.prefix, k)
	mustFinalize(t, s, k, res.Token, idempotency.StateAccepted, &idempotency.StoredResult{
		Status: 201, Header: http.Header{"Content-Type": {"application/json"}},
	})
	usage, err := c.Do(t.Context(), c.B().MemoryUsage().Key(rk).Samples(0).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	enc, err := c.Do(t.Context(), c.B().ObjectEncoding().Key(rk).Build()).ToString()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("finalized record without body: MEMORY USAGE %d bytes, encoding %s, key %d bytes", usage, enc, len(rk))
	if usage > 400 || enc != "listpack" {
		t.Fatalf("MEMORY USAGE %d (encoding %s), want <= 400 and listpack", usage, enc)
	}
}

// TestReadOnlyLookupOnRedis checks that Redis 7 runs the lookup script with
// EVALSHA_RO (TIME allowed), without the miniredis fallback.
func TestReadOnlyLookupOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	s := realStore(t, realClient(t, srv.Addr()), Options{})
	k := idempotency.NewKey()
	mustClaim(t, s, claimReq(k), idempotency.StatusClaimed)
	if rec, err := s.Lookup(t.Context(), testScope, k); err != nil || rec.State != idempotency.StateInFlight {
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

// TestRoundTrips: a first call is one script to claim and one to finalize,
// each followed by one on the unknown index (another slot); a replay is one
// script.
func TestRoundTrips(t *testing.T) {
	srv := redistest.Start(t)
	c := realClient(t, srv.Addr())
	s := realStore(t, c, Options{})
	k := idempotency.NewKey()
	count := func(f func()) int {
		if err := c.Do(t.Context(), c.B().ConfigResetstat().Build()).Error(); err != nil {
			t.Fatal(err)
		}
		f()
		m := commandCalls(t, c)
		// Commands that scripts call are counted too, so count only those
		// that the store sends on its own.
		return m["evalsha"] + m["eval"] + m["evalsha_ro"] + m["eval_ro"] + m["get"] + m["set"]
	}
	if n := count(func() {
		res := mustClaim(t, s, claimReq(k), idempotency.StatusClaimed)
		mustFinalize(t, s, k, res.Token, idempotency.StateAccepted, &idempotency.StoredResult{Status: 200})
	}); n != 4 {
		t.Fatalf("claim + index + finalize + unindex: %d top-level commands, want 4", n)
	}
	if n := count(func() { mustClaim(t, s, claimReq(k), idempotency.StatusReplay) }); n != 1 {
		t.Fatalf("replay: %d top-level commands, want 1", n)
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
	if _, err := New(t.Context(), c, Options{WaitReplicas: 2, WaitTimeout: 20 * time.Millisecond}); !errors.Is(err, ErrReplicaCount) {
		t.Fatalf("New wanting two replicas of one: %v, want ErrReplicaCount", err)
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
	if !errors.Is(err, ErrReplicas) || !errors.Is(err, idempotency.ErrStoreUnavailable) {
		t.Fatalf("claim without its replica: %v", err)
	}
	if rec, err := short.Lookup(t.Context(), testScope, k); err != nil || rec.State != idempotency.StateUnknown || rec.SentAttempts != 0 {
		t.Fatalf("after a refused reservation: %+v, %v; want unknown with nothing sent", rec, err)
	}
	if _, err := New(t.Context(), c, Options{WaitReplicas: 1}); !errors.Is(err, ErrReplicaCount) {
		t.Fatalf("New wanting a replica that left: %v, want ErrReplicaCount", err)
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
