package redistest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Moving slots and masters, the steps of redis-cli --cluster reshard,
// add-node and del-node, one at a time so that a test can act between
// them. Node indexes are those of Nodes.

// KeySlot returns the Cluster slot of key, as a running node computes it
// (CLUSTER KEYSLOT).
func (c *Cluster) KeySlot(key string) (int, error) {
	for _, s := range c.Nodes() {
		if !s.Running() {
			continue
		}
		v, err := s.Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			return 0, err
		}
		n, _ := v.(int64)
		return int(n), nil
	}
	return 0, errors.New("redistest: no node running")
}

// SlotOwner returns the node that serves slot, by the view of the first
// running node (CLUSTER NODES).
func (c *Cluster) SlotOwner(slot int) (int, error) {
	view, err := c.view()
	if err != nil {
		return 0, err
	}
	for _, n := range view {
		if n.master && n.serves(slot) {
			if i := c.index(n.id); i >= 0 {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("redistest: no known master serves slot %d", slot)
}

// SlotsOf returns the slots node i serves, by its own view.
func (c *Cluster) SlotsOf(i int) ([]int, error) {
	view, err := c.viewOf(c.Node(i))
	if err != nil {
		return nil, err
	}
	id := c.id(i)
	for _, n := range view {
		if n.id == id {
			return n.slots(), nil
		}
	}
	return nil, fmt.Errorf("redistest: node %d does not know itself", i)
}

// BeginMigration opens the move of slot from node from to node to: IMPORTING
// on the target first, then MIGRATING on the source, as redis-cli does.
// From then on a command on keys of the slot that the source lacks is
// redirected (ASK) to the target, and one whose keys are split between
// them, or partly missing, is answered TRYAGAIN.
func (c *Cluster) BeginMigration(slot, from, to int) error {
	s := strconv.Itoa(slot)
	if _, err := c.Node(to).Do("CLUSTER", "SETSLOT", s, "IMPORTING", c.id(from)); err != nil {
		return fmt.Errorf("redistest: SETSLOT %d IMPORTING on node %d: %w", slot, to, err)
	}
	if _, err := c.Node(from).Do("CLUSTER", "SETSLOT", s, "MIGRATING", c.id(to)); err != nil {
		return fmt.Errorf("redistest: SETSLOT %d MIGRATING on node %d: %w", slot, from, err)
	}
	return nil
}

// MigrateKeys moves up to n of slot's keys from node from to node to in one
// MIGRATE (redis-cli moves --cluster-pipeline keys, 10 by default, per
// MIGRATE). It returns how many it moved: 0 once the source holds none.
func (c *Cluster) MigrateKeys(slot, from, to, n int) (int, error) {
	src, dst := c.Node(from), c.Node(to)
	v, err := src.Do("CLUSTER", "GETKEYSINSLOT", strconv.Itoa(slot), strconv.Itoa(n))
	if err != nil {
		return 0, err
	}
	list, _ := v.([]any)
	if len(list) == 0 {
		return 0, nil
	}
	args := []string{"MIGRATE", "127.0.0.1", strconv.Itoa(dst.Port()), "", "0", "5000", "KEYS"}
	for _, k := range list {
		ks, _ := k.(string)
		args = append(args, ks)
	}
	if _, err := src.Do(args...); err != nil {
		return 0, fmt.Errorf("redistest: MIGRATE %d keys of slot %d from node %d to node %d: %w", len(list), slot, from, to, err)
	}
	return len(list), nil
}

// FinishMigration gives slot to node to: SETSLOT NODE on the target, then
// on the source, then on every other running master, as redis-cli does.
// The source's keys must have moved (MigrateKeys).
func (c *Cluster) FinishMigration(slot, from, to int) error {
	s, id := strconv.Itoa(slot), c.id(to)
	order := []int{to, from}
	for i := range c.Nodes() {
		if i != to && i != from {
			order = append(order, i)
		}
	}
	for _, i := range order {
		n := c.Node(i)
		if !n.Running() || c.removed(i) {
			continue
		}
		if role, err := n.Do("ROLE"); err != nil {
			return err
		} else if r, _ := role.([]any); len(r) == 0 || r[0] != "master" {
			continue
		}
		if _, err := n.Do("CLUSTER", "SETSLOT", s, "NODE", id); err != nil {
			return fmt.Errorf("redistest: SETSLOT %d NODE on node %d: %w", slot, i, err)
		}
	}
	return nil
}

// MoveSlot moves slot from node from to node to with all its keys, batch
// keys per MIGRATE: BeginMigration, MigrateKeys until none is left,
// FinishMigration.
func (c *Cluster) MoveSlot(slot, from, to, batch int) error {
	if err := c.BeginMigration(slot, from, to); err != nil {
		return err
	}
	for {
		n, err := c.MigrateKeys(slot, from, to, batch)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
	}
	return c.FinishMigration(slot, from, to)
}

// AddMaster starts a new cluster node with the cluster's arguments and
// replicas replicas of it, introduces them (CLUSTER MEET), attaches the
// replicas and waits until the cluster is healthy (Ready) with them. The
// new master serves no slot until slots are moved to it. It returns the
// master's index in Nodes; its replicas follow it.
func (c *Cluster) AddMaster(replicas int) (int, error) {
	first := -1
	for i, s := range c.Nodes() {
		if s.Running() && !c.removed(i) {
			first = i
			break
		}
	}
	if first < 0 {
		return 0, errors.New("redistest: no node running to meet")
	}
	meet := c.Node(first)
	made := make([]*Server, 1+replicas)
	ids := make([]string, len(made))
	for k := range made {
		dir, err := c.owner.MkDir()
		if err != nil {
			return 0, err
		}
		s := &Server{tb: c.owner, bin: c.bin, dir: dir, nodeTimeout: c.timeout, args: append([]string(nil), c.args...)}
		c.owner.Cleanup(s.cleanup)
		if err := s.startFresh(true); err != nil {
			return 0, err
		}
		id, err := s.Do("CLUSTER", "MYID")
		if err != nil {
			return 0, err
		}
		ids[k], _ = id.(string)
		if _, err := s.Do("CLUSTER", "MEET", "127.0.0.1", strconv.Itoa(meet.port), strconv.Itoa(meet.cport)); err != nil {
			return 0, err
		}
		made[k] = s
	}
	for k, r := range made[1:] {
		if err := poll(func() error {
			nodes, err := r.Do("CLUSTER", "NODES")
			if err != nil {
				return err
			}
			if s, _ := nodes.(string); !strings.Contains(s, ids[0]) {
				return fmt.Errorf("replica %d does not know its master yet", k)
			}
			_, err = r.Do("CLUSTER", "REPLICATE", ids[0])
			return err
		}); err != nil {
			return 0, err
		}
	}
	c.mu.Lock()
	idx := len(c.nodes)
	c.nodes = append(c.nodes, made...)
	c.ids = append(c.ids, ids...)
	c.mu.Unlock()
	return idx, c.Ready(readyTimeout)
}

// RemoveMaster takes master i, which must serve no slot (move them away
// first), and its replicas out of the cluster, as redis-cli --cluster
// del-node does: each is stopped and every other node forgets it (CLUSTER
// FORGET), replicas first. Their indexes stay in Nodes, not running.
func (c *Cluster) RemoveMaster(i int) error {
	if slots, err := c.SlotsOf(i); err != nil {
		return err
	} else if len(slots) > 0 {
		return fmt.Errorf("redistest: RemoveMaster(%d): it still serves %d slots", i, len(slots))
	}
	// Its replicas, each by its own view (a replica cannot forget its
	// master, so a replica missed would fail the removal).
	var out []int
	for k, s := range c.Nodes() {
		if k == i || !s.Running() || c.removed(k) {
			continue
		}
		view, err := c.viewOf(s)
		if err != nil {
			return err
		}
		for _, n := range view {
			if n.myself && n.masterID == c.id(i) {
				out = append(out, k)
			}
		}
	}
	out = append(out, i)
	for _, j := range out {
		c.Node(j).Stop()
		c.mu.Lock()
		c.gone[j] = true
		c.mu.Unlock()
		for k, s := range c.Nodes() {
			if k == j || !s.Running() {
				continue
			}
			if _, err := s.Do("CLUSTER", "FORGET", c.id(j)); err != nil && !strings.Contains(err.Error(), "Unknown node") {
				return fmt.Errorf("redistest: node %d: CLUSTER FORGET node %d: %w", k, j, err)
			}
		}
	}
	return c.Ready(readyTimeout)
}

// Removed reports whether RemoveMaster took node i out of the cluster: it
// is not to be restarted.
func (c *Cluster) Removed(i int) bool { return c.removed(i) }

func (c *Cluster) removed(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gone[i]
}

func (c *Cluster) id(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[i]
}

// index returns the index of the node named id, or -1.
func (c *Cluster) index(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, v := range c.ids {
		if v == id {
			return i
		}
	}
	return -1
}

// viewNode is one line of CLUSTER NODES.
type viewNode struct {
	id, masterID string
	master       bool
	myself       bool // the node whose view this is
	ranges       [][2]int
}

func (n viewNode) serves(slot int) bool {
	for _, r := range n.ranges {
		if slot >= r[0] && slot <= r[1] {
			return true
		}
	}
	return false
}

func (n viewNode) slots() []int {
	var out []int
	for _, r := range n.ranges {
		for s := r[0]; s <= r[1]; s++ {
			out = append(out, s)
		}
	}
	return out
}

// view is CLUSTER NODES of the first running node that answers.
func (c *Cluster) view() ([]viewNode, error) {
	var errs []error
	for i, s := range c.Nodes() {
		if !s.Running() || c.removed(i) {
			continue
		}
		v, err := c.viewOf(s)
		if err == nil {
			return v, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("redistest: no node answered CLUSTER NODES: %w", errors.Join(errs...))
}

func (c *Cluster) viewOf(s *Server) ([]viewNode, error) {
	v, err := s.Do("CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	text, _ := v.(string)
	var out []viewNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		n := viewNode{id: f[0], master: strings.Contains(f[2], "master"), myself: strings.Contains(f[2], "myself"), masterID: f[3]}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue // a slot migrating or importing: still its owner's
			}
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil {
				n.ranges = append(n.ranges, [2]int{a, b})
			}
		}
		out = append(out, n)
	}
	return out, nil
}
