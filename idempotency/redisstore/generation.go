package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// Generations (docs/DESIGN.md, "The record and its lifecycle", Store
// amnesia): the per-master sentinels (sentinel.go) see a Redis that came
// back empty within a lease, but not one that went back in time (a restored
// snapshot, DEBUG RELOAD of an older RDB, a promoted replica that missed
// writes), and a claim in that lease dispatches again. So every Cluster
// slot also holds a generation sentinel, {prefix}meta:gen:{T} (T: the
// slot's hash tag, slotTags; one, {prefix}meta:gen, on a single Redis),
// a counter without TTL:
//
//   - claim and reserve declare it as their last key and run inside
//     gen_wrap (lua/common.lua): a sentinel that is gone, or behind the
//     highest generation this store has seen in that slot, answers
//     data_lost and runs nothing; an answer that reserves an attempt moves
//     it on. Every reply carries the generation, which the store keeps
//     (one atomic per slot), so it costs one GET and, on a reservation,
//     one INCR inside the script: no round trip, and no Redis CPU beyond
//     noise (README.md, Measurements).
//   - A data_lost answer is a loss as a vanished sentinel is: the store
//     stops claiming, writes the fleet's marker and Health reports it.
//   - With Options.RequireInit (production) the sentinels are written once,
//     by Init (refserver store init); New reads them all: none is a store
//     never initialised (ErrUninitialized: New refuses rather than start
//     over on a Redis that may have lost the fleet's data), some gone is a
//     loss (New starts stopped), and the values are the generations seen,
//     so a claim finds every sentinel or refuses. (New reads them in one
//     pipeline: 0.12 s on a 3-master Cluster, 16,384 GETs; one GET on a
//     single Redis.) Without it a sentinel is made by its slot's first
//     reservation (the gateway sends 0, "seen none"), as development and
//     staging start on an empty store.
//   - Store.AcknowledgeDataLoss makes the sentinels that are gone again
//     (with RequireInit), and every store that adopts the acknowledgement
//     forgets the generations it remembered. One that has not read it yet
//     and finds a slot behind what it remembers stops (it never overwrites
//     an acknowledgement it has not read) until its next reading adopts it.

// genKey is the generation sentinel of slot on a Cluster.
func genKey(prefix string, slot int) string {
	return prefix + "meta:gen:{" + slotTags()[slot] + "}"
}

// gens are a store's generation sentinels and the highest generation it
// has seen in each (0: none yet). A Cluster client has one per slot (a
// script may declare keys of one slot only); a single Redis, which keeps or
// loses its data as a whole, one for every slot, {prefix}meta:gen, so a
// rollback is seen by the next claim whatever its slot.
type gens struct {
	keys []string
	seen []atomic.Int64
	// epoch moves before and after each reset (odd while one runs): a
	// claim whose generation was read in another epoch proves no loss.
	epoch atomic.Int64
}

func newGens(prefix string, cluster bool) *gens {
	g := &gens{keys: []string{prefix + "meta:gen"}}
	if cluster {
		g.keys = make([]string, clusterSlots)
		for s := range g.keys {
			g.keys[s] = genKey(prefix, s)
		}
	}
	g.seen = make([]atomic.Int64, len(g.keys))
	return g
}

// index is slot's sentinel.
func (g *gens) index(slot int) int {
	if len(g.keys) == 1 {
		return 0
	}
	return slot
}

// key is the sentinel of slot.
func (g *gens) key(slot int) string { return g.keys[g.index(slot)] }

// learn keeps v if it is higher than what slot's sentinel was seen at.
func (g *gens) learn(slot int, v int64) {
	p := &g.seen[g.index(slot)]
	for {
		old := p.Load()
		if v <= old || p.CompareAndSwap(old, v) {
			return
		}
	}
}

// reset forgets every generation seen (an acknowledged loss). A store that
// requires initialised sentinels keeps 1: each is there, and one gone is a
// loss again.
func (g *gens) reset(require bool) {
	v := int64(0)
	if require {
		v = 1
	}
	g.epoch.Add(1)
	for i := range g.seen {
		g.seen[i].Store(v)
	}
	g.epoch.Add(1)
}

// genKeyOf is the generation sentinel of slot.
func (s *Store) genKeyOf(slot int) string {
	if s.scope.amnesia == nil {
		return genKey(s.prefix, slot) // declared, never read: the check is off
	}
	return s.scope.amnesia.gens.key(slot)
}

// genArg is the gen argument of a claim or reserve in slot: the highest
// generation seen there, or -1 with the check off; and the epoch it was
// read in.
func (s *Store) genArg(slot int) (int64, int) {
	if s.scope.amnesia == nil {
		return 0, -1
	}
	g := s.scope.amnesia.gens
	e := g.epoch.Load()
	return e, int(g.seen[g.index(slot)].Load())
}

// genReply unwraps the reply of a script run inside gen_wrap: the body's
// reply, the slot's generation learned, or, for data_lost, the loss
// recorded and its error.
func (s *Store) genReply(ctx context.Context, slot, seen int, epoch int64, arr []rueidis.RedisMessage) ([]rueidis.RedisMessage, error) {
	if len(arr) != 2 {
		return nil, errors.New("reply without the slot's generation")
	}
	inner, err1 := arr[0].ToArray()
	g, err2 := arr[1].AsInt64()
	if err := errors.Join(err1, err2); err != nil {
		return nil, err
	}
	a := s.scope.amnesia
	if a == nil {
		return inner, nil
	}
	if st, _ := status(inner); st == statusDataLost {
		if e := a.gens.epoch.Load(); e != epoch || e%2 == 1 {
			// The generations were reset (an acknowledgement) since seen
			// was read: no proof of a loss; nothing was written.
			return nil, errors.New("the generations seen were reset meanwhile; retry")
		}
		return nil, a.slotLost(ctx, slot, g, seen)
	}
	a.gens.learn(slot, g)
	return inner, nil
}

// slotLost records that slot's generation sentinel is gone (g -1) or
// behind seen, writes the fleet's marker and returns the claims' error.
func (a *amnesia) slotLost(ctx context.Context, slot int, g int64, seen int) error {
	if a.lost.Load() == nil {
		k := a.gens.key(slot)
		how := "is gone: Redis lost its data"
		if g >= 0 {
			how = fmt.Sprintf("holds generation %d, behind %d that this gateway saw: Redis went back in time "+
				"(a restored snapshot, a reload, a replica promoted without the latest writes)", g, seen)
		}
		a.mu.Lock()
		gen := a.gen
		a.mu.Unlock()
		a.markLost(ctx, fmt.Sprintf("the generation sentinel %s (Cluster slot %d) %s", k, slot, how), k, gen)
	}
	return a.err()
}

// markLost records a loss seen at key k and writes the fleet's marker over
// anything but an acknowledgement this store has not seen (markLostSrc).
func (a *amnesia) markLost(ctx context.Context, detail, k, gen string) {
	value := markerLost + strconv.FormatInt(a.nowMS(), 10) + ":" + k
	// Best effort: a marker not written now is written at the next loss
	// seen; this store stops claiming either way.
	err := a.client.Do(ctx, a.client.B().Eval().Script(markLostSrc).Numkeys(1).Key(markerKey(a.prefix)).
		Arg(value, gen).Build()).Error()
	if err != nil && !rueidis.IsRedisNil(err) {
		detail += " (the marker could not be written yet)"
	}
	a.setLost(detail)
}

// genState is what a reading of every generation sentinel found.
type genState struct {
	vals    []int64 // by sentinel; 0: missing
	missing int
}

// readGens reads every generation sentinel.
func readGens(ctx context.Context, client rueidis.Client, g *gens) (genState, error) {
	st := genState{vals: make([]int64, len(g.keys))}
	cmds := make(rueidis.Commands, len(g.keys))
	for i, k := range g.keys {
		cmds[i] = client.B().Get().Key(k).Build()
	}
	for i, r := range client.DoMulti(ctx, cmds...) {
		v, err := r.ToString()
		switch {
		case rueidis.IsRedisNil(err):
			st.missing++
			continue
		case err != nil:
			return genState{}, fmt.Errorf("redisstore: generation sentinel %s: %w", g.keys[i], err)
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return genState{}, fmt.Errorf("%w: generation sentinel %s holds no generation", errCorruptRecord, g.keys[i])
		}
		st.vals[i] = n
	}
	return st, nil
}

// fillGens writes generation 1 to every missing sentinel of st (SET NX: a
// sentinel another gateway wrote meanwhile is kept) and returns how many
// it wrote.
func fillGens(ctx context.Context, client rueidis.Client, g *gens, st genState) (int, error) {
	var cmds rueidis.Commands
	for i, v := range st.vals {
		if v == 0 {
			cmds = append(cmds, client.B().Set().Key(g.keys[i]).Value("1").Nx().Build())
		}
	}
	placed := 0
	for _, r := range client.DoMulti(ctx, cmds...) {
		switch err := r.Error(); {
		case err == nil:
			placed++
		case !rueidis.IsRedisNil(err):
			return placed, fmt.Errorf("redisstore: generation sentinels: %w", err)
		}
	}
	return placed, nil
}
