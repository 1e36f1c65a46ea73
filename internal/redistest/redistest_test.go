package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/redis/rueidis"
)

func TestStartKillRestart(t *testing.T) {
	t.Parallel()
	s := Start(t)
	if r, err := s.Do("PING"); err != nil || r != "PONG" {
		t.Fatalf("PING = %v, %v", r, err)
	}
	cfg, err := s.Do("CONFIG", "GET", "appendonly")
	if err != nil || fmt.Sprint(cfg) != "[appendonly no]" {
		t.Fatalf("CONFIG GET appendonly = %v, %v; want persistence off by default", cfg, err)
	}
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	port := s.Port()
	s.Kill()
	if s.Running() {
		t.Fatal("Running after Kill")
	}
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING answered after Kill")
	}
	s.Kill() // killing a stopped server is a no-op
	s.Restart()
	if s.Port() != port {
		t.Fatalf("Restart moved the port from %d to %d", port, s.Port())
	}
	if r, err := s.Do("GET", "k"); err != nil || r != nil {
		t.Fatalf("GET after a crash without persistence = %v, %v; want nil", r, err)
	}
	s.Stop()
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING answered after Stop")
	}
}

func TestArgsOverrideAndPersistAcrossKill(t *testing.T) {
	t.Parallel()
	s := Start(t, "--appendonly", "yes", "--appendfsync", "always")
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	s.Restart()
	if r, err := s.Do("GET", "k"); err != nil || r != "v" {
		t.Fatalf("GET after kill with appendfsync always = %v, %v; want v", r, err)
	}
}

func TestBadArgsFailClearly(t *testing.T) {
	t.Parallel()
	lookup(t)
	s := &Server{tb: testOwner{t}, bin: "redis-server", dir: t.TempDir(), args: []string{"--no-such-directive", "1"}}
	t.Cleanup(s.cleanup)
	err := s.startFresh(false)
	if err == nil || !strings.Contains(err.Error(), "exited during start-up") {
		t.Fatalf("startFresh with a bad directive = %v; want an exit error", err)
	}
}

func TestPortCollisionRetries(t *testing.T) {
	t.Parallel()
	lookup(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	s := &Server{tb: testOwner{t}, bin: "redis-server", dir: t.TempDir(), port: l.Addr().(*net.TCPAddr).Port}
	t.Cleanup(s.cleanup)
	inUse, err := s.spawn()
	if err == nil || !inUse {
		t.Fatalf("spawn on a taken port = %v, inUse %v; want an in-use failure", err, inUse)
	}
	if err := s.startFresh(false); err != nil {
		t.Fatalf("startFresh after a collision: %v", err)
	}
}

type fakeTB struct {
	testing.TB
	skipped, failed string
}

func (f *fakeTB) Helper()                        {}
func (f *fakeTB) Skipf(format string, a ...any)  { f.skipped = fmt.Sprintf(format, a...) }
func (f *fakeTB) Fatalf(format string, a ...any) { f.failed = fmt.Sprintf(format, a...) }

func TestMissingServerSkipsOrFails(t *testing.T) {
	missing := func() (string, error) { return "", exec.ErrNotFound }

	t.Setenv(RequireEnv, "")
	f := &fakeTB{TB: t}
	lookupWith(f, missing)
	if !strings.Contains(f.skipped, "SKIPPING") || f.failed != "" {
		t.Fatalf("without %s: skipped %q, failed %q; want a loud skip", RequireEnv, f.skipped, f.failed)
	}

	t.Setenv(RequireEnv, "1")
	f = &fakeTB{TB: t}
	lookupWith(f, missing)
	if f.failed == "" || f.skipped != "" {
		t.Fatalf("with %s=1: skipped %q, failed %q; want a failure", RequireEnv, f.skipped, f.failed)
	}

	f = &fakeTB{TB: t}
	lookupWith(f, func() (string, error) { return "", errors.New("redis-server 6.2.0 is too old") })
	if !strings.Contains(f.failed, "too old") {
		t.Fatalf("old server with %s=1: failed %q", RequireEnv, f.failed)
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 3, 0)
	if got := len(c.Addrs()); got != 3 {
		t.Fatalf("Addrs has %d nodes, want 3", got)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: c.Addrs(), DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	for i := range 300 {
		wg.Go(func() {
			k := fmt.Sprintf("key:%d", i)
			if err := client.Do(ctx, client.B().Set().Key(k).Value(k).Build()).Error(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Nothing to fail over to: Redis' default node timeout, so that a
	// loaded machine's pauses never take the cluster down.
	wantNodeTimeout(t, c, "15000")
	// Every master holds some of the keys: the slots are really spread.
	for i := range 3 {
		n, err := c.Master(i).Do("DBSIZE")
		if err != nil || n.(int64) == 0 {
			t.Fatalf("master %d DBSIZE = %v, %v; want some keys", i, n, err)
		}
	}
}

func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("failover waits for the node timeout")
	}
	t.Parallel()
	c := StartCluster(t, 3, 1)
	if got := len(c.Nodes()); got != 6 {
		t.Fatalf("%d nodes, want 6", got)
	}
	if r, err := c.Replica(0, 0).Do("ROLE"); err != nil || r.([]any)[0] != "slave" {
		t.Fatalf("replica 0 ROLE = %v, %v", r, err)
	}
	wantNodeTimeout(t, c, "1000")
	c.Master(0).Kill()
	c.WaitOK(t) // the replica takes over master 0's slots
	if r, err := c.Replica(0, 0).Do("ROLE"); err != nil || r.([]any)[0] != "master" {
		t.Fatalf("after failover replica 0 ROLE = %v, %v; want master", r, err)
	}
	c.Master(0).Restart()
	c.WaitOK(t)
	if r, err := c.Master(0).Do("ROLE"); err != nil || r.([]any)[0] != "slave" {
		t.Fatalf("restarted old master ROLE = %v, %v; want slave", r, err)
	}
}

func TestHostOutsideATest(t *testing.T) {
	t.Parallel()
	lookup(t)
	h := NewHost(t.TempDir())
	s, err := h.Start("--appendonly", "yes", "--appendfsync", "always")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do("SET", "k", "v"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := s.Relaunch(); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Do("GET", "k"); err != nil || r != "v" {
		t.Fatalf("GET after Relaunch = %v, %v; want v", r, err)
	}
	h.Close()
	if s.Running() {
		t.Fatal("server still running after Host.Close")
	}
	if _, err := s.Do("PING"); err == nil {
		t.Fatal("PING answered after Host.Close")
	}
	h.Close() // a second Close does nothing
}

func wantNodeTimeout(t *testing.T, c *Cluster, ms string) {
	t.Helper()
	for i, n := range c.Nodes() {
		r, err := n.Do("CONFIG", "GET", "cluster-node-timeout")
		if err != nil {
			t.Fatalf("node %d: CONFIG GET: %v", i, err)
		}
		if kv, ok := r.([]any); !ok || len(kv) != 2 || fmt.Sprint(kv[1]) != ms {
			t.Fatalf("node %d: cluster-node-timeout %v, want %s", i, r, ms)
		}
	}
}

// TestPortTakenByAnotherRedis: a redis-server of another test that won the
// race for a port answers PING too; start-up must see that the port is not
// its own and retry elsewhere, never hand out the other server.
func TestPortTakenByAnotherRedis(t *testing.T) {
	t.Parallel()
	other := Start(t)
	if _, err := other.Do("SET", "owner", "other"); err != nil {
		t.Fatal(err)
	}
	s := &Server{tb: testOwner{t}, bin: other.bin, dir: t.TempDir(), port: other.port}
	t.Cleanup(s.cleanup)
	inUse, err := s.spawn()
	if err == nil || !inUse {
		t.Fatalf("spawn on a port another redis-server holds = %v, inUse %v; want an in-use failure", err, inUse)
	}
	if err := s.startFresh(false); err != nil {
		t.Fatalf("startFresh after the collision: %v", err)
	}
	if s.port == other.port {
		t.Fatalf("started on the other server's port %d", s.port)
	}
	if v, err := other.Do("GET", "owner"); err != nil || v != "other" {
		t.Errorf("the other server: %v, %v", v, err)
	}
	if v, err := s.Do("GET", "owner"); err != nil || v != nil {
		t.Errorf("the new server holds the other's data: %v, %v", v, err)
	}
}

// TestReadyAfterLoading: a relaunched server answers INFO while it still
// loads its dataset, and every other command with LOADING; it is ready only
// once the data is back.
func TestReadyAfterLoading(t *testing.T) {
	t.Parallel()
	// The loading lasts about 0.2s (key-load-delay is in us per key), and
	// answers clients every KiB loaded.
	s := Start(t, "--key-load-delay", "50", "--loading-process-events-interval-bytes", "1024")
	if _, err := s.Do("EVAL", "for i = 1, 4000 do redis.call('SET', 'k' .. i, 'v') end return 1", "0"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Do("SAVE"); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	if r, err := s.Do("GET", "k4000"); err != nil || r != "v" {
		t.Fatalf("GET right after the restart = %v, %v; want v", r, err)
	}
}
