package redistest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const clusterSlots = 16384

// Cluster is a Redis Cluster of redis-server processes on loopback.
type Cluster struct {
	nodes    []*Server
	ids      []string
	masters  int
	replicas int

	// For AddMaster: how the nodes were made.
	owner   owner
	bin     string
	args    []string
	timeout int

	mu   sync.Mutex
	gone map[int]bool // nodes RemoveMaster took out of the cluster
}

// StartCluster starts masters*(1+replicasPerMaster) cluster-enabled nodes,
// spreads the 16384 slots evenly over the masters, attaches the replicas and
// waits until every node reports cluster_state:ok with all slots assigned and
// every replica is in sync. args are passed to every node as in Start. Like
// Start, it skips or fails the test when redis-server is missing.
func StartCluster(t testing.TB, masters, replicasPerMaster int, args ...string) *Cluster {
	t.Helper()
	if masters < 1 || replicasPerMaster < 0 {
		t.Fatalf("redistest: StartCluster(%d, %d): need at least one master and no negative replica count", masters, replicasPerMaster)
	}
	c, err := startCluster(testOwner{t}, lookup(t), masters, replicasPerMaster, args)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startCluster starts and assembles the cluster; every node is handed to
// t.Cleanup first, so a failure leaves no process behind.
func startCluster(t owner, bin string, masters, replicasPerMaster int, args []string) (*Cluster, error) {
	n := masters * (1 + replicasPerMaster)
	// Replicas are there to fail over to, quickly. Without them a node that
	// other nodes mark failed only takes the cluster down (CLUSTERDOWN)
	// until they hear it again, which a loaded machine's pauses of a second
	// or more did to tests that never stop a node: Redis' default
	// (15 s) there.
	timeout := 15000
	if replicasPerMaster > 0 {
		timeout = 1000
	}
	c := &Cluster{nodes: make([]*Server, n), ids: make([]string, n), masters: masters, replicas: replicasPerMaster,
		owner: t, bin: bin, args: append([]string(nil), args...), timeout: timeout, gone: map[int]bool{}}
	for i := range c.nodes {
		dir, err := t.MkDir()
		if err != nil {
			return nil, err
		}
		c.nodes[i] = &Server{tb: t, bin: bin, dir: dir, nodeTimeout: timeout, args: append([]string(nil), args...)}
		t.Cleanup(c.nodes[i].cleanup)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range c.nodes {
		wg.Go(func() { errs[i] = s.startFresh(true) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := c.assemble(); err != nil {
		return nil, fmt.Errorf("redistest: assemble cluster: %w", err)
	}
	return c, c.Ready(assembleTimeout)
}

// Addrs returns the addresses of all nodes, masters first.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Nodes() {
		out = append(out, s.Addr())
	}
	return out
}

// Nodes returns all nodes: first the masters 0..m-1, then the replicas of
// master 0, of master 1, and so on, then the masters AddMaster added, in
// order. Indexes refer to the initial roles; a failover does not reorder
// them, and a master RemoveMaster took out keeps its index (it is no
// longer running).
func (c *Cluster) Nodes() []*Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Server(nil), c.nodes...)
}

// Node returns node i as ordered by Nodes.
func (c *Cluster) Node(i int) *Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

// Master returns the initial master i.
func (c *Cluster) Master(i int) *Server { return c.Node(i) }

// Replica returns the initial replica j of master i.
func (c *Cluster) Replica(i, j int) *Server { return c.Node(c.masters + i*c.replicas + j) }

// WaitOK waits until every running node reports cluster_state:ok, knows every
// node, sees all slots served, and every running initial replica's link to
// its master is up. Call it after killing or restarting nodes.
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	if err := c.Ready(readyTimeout); err != nil {
		t.Fatal(err)
	}
}

// Ready is WaitOK for a program that is not a test: it waits up to timeout
// and returns what is still wrong instead of failing a test.
func (c *Cluster) Ready(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := c.healthy()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: cluster not ready within %v: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) assemble() error {
	for i, s := range c.nodes {
		id, err := s.Do("CLUSTER", "MYID")
		if err != nil {
			return err
		}
		c.ids[i], _ = id.(string)
		// Distinct epochs up front, as redis-cli does, so that the nodes need
		// not resolve epoch collisions after meeting.
		if _, err := s.Do("CLUSTER", "SET-CONFIG-EPOCH", strconv.Itoa(i+1)); err != nil {
			return err
		}
	}
	per := clusterSlots / c.masters
	for i := 0; i < c.masters; i++ {
		lo, hi := i*per, (i+1)*per-1
		if i == c.masters-1 {
			hi = clusterSlots - 1
		}
		if _, err := c.nodes[i].Do("CLUSTER", "ADDSLOTSRANGE", strconv.Itoa(lo), strconv.Itoa(hi)); err != nil {
			return err
		}
	}
	first := c.nodes[0]
	for _, s := range c.nodes[1:] {
		if _, err := s.Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(first.port), strconv.Itoa(first.cport)); err != nil {
			return err
		}
	}
	for m := 0; m < c.masters; m++ {
		for j := 0; j < c.replicas; j++ {
			r := c.Replica(m, j)
			// REPLICATE needs the master to be known to the replica already.
			if err := poll(func() error {
				nodes, err := r.Do("CLUSTER", "NODES")
				if err != nil {
					return err
				}
				if s, _ := nodes.(string); !strings.Contains(s, c.ids[m]) {
					return fmt.Errorf("node %s does not know master %s yet", r.Addr(), c.Master(m).Addr())
				}
				_, err = r.Do("CLUSTER", "REPLICATE", c.ids[m])
				return err
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Cluster) healthy() error {
	c.mu.Lock()
	nodes := append([]*Server(nil), c.nodes...)
	known := len(c.nodes) - len(c.gone)
	c.mu.Unlock()
	for _, s := range nodes {
		if !s.Running() {
			continue
		}
		info, err := s.Do("CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: %w", s.Addr(), err)
		}
		fields := infoFields(info)
		for k, want := range map[string]string{
			"cluster_state":          "ok",
			"cluster_slots_assigned": strconv.Itoa(clusterSlots),
			"cluster_slots_ok":       strconv.Itoa(clusterSlots),
			"cluster_known_nodes":    strconv.Itoa(known),
		} {
			if fields[k] != want {
				return fmt.Errorf("%s: %s is %q, want %q", s.Addr(), k, fields[k], want)
			}
		}
		repl, err := s.Do("INFO", "replication")
		if err != nil {
			return fmt.Errorf("%s: %w", s.Addr(), err)
		}
		// REPLICATE took effect before the first wait (assemble), so only the
		// link needs checking; after a failover roles may have swapped.
		if f := infoFields(repl); f["role"] == "slave" && f["master_link_status"] != "up" {
			return fmt.Errorf("%s: replica link is %q", s.Addr(), f["master_link_status"])
		}
	}
	return nil
}

func infoFields(v any) map[string]string {
	s, _ := v.(string)
	out := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		if k, val, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = val
		}
	}
	return out
}

func poll(f func() error) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}
