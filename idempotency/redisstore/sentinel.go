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

	"github.com/obol-gateway/obol/idempotency"
)

// Store amnesia (docs/DESIGN.md, "The record and its lifecycle", Store
// amnesia): a Redis that lost its data (restarted without persistence, a
// failover to a replica that had not synced, a FLUSHALL) forgets every
// claim, and a retry would dispatch again. So the store watches sentinels:
//
//   - One sentinel per master, {prefix}meta:sentinel:{T}, where the hash tag
//     T (slotTags) puts it in the first slot of that master's slot ranges
//     (on a standalone Redis, one key). Its value is random and has no TTL.
//     New places them (SET NX GET: the first gateway's value wins and every
//     other adopts it) and remembers the values.
//   - The sentinels are re-read with the fleet's scope version, in the same
//     pipeline (scope.go): at most once per lease, and at once after Health
//     found a node unreachable or loading (a Redis that went away is checked
//     as soon as it is back). Only a sentinel that is gone, or that holds a
//     value other than the one remembered (it was gone and a gateway placed
//     it again), is a loss. A scope version that moves, a closing mark or an
//     advance is not; a sentinel that cannot be read now (its master is
//     failing over) is judged at the next reading.
//   - On a loss the store stops claiming ([idempotency.ErrStoreDataLost]:
//     503 store_data_lost), Health reports
//     it, the function given to Store.NotifyDataLoss is called, and the data-lost marker
//     {prefix}meta:data_lost is written, so that every gateway of the fleet
//     stops at its next reading and one that starts later starts stopped.
//     Reserve, Renew, Finalize, Settle and the give-back go on: calls in
//     flight end (a Reserve in a slot whose generation sentinel is gone or
//     behind is refused as a claim is: generation.go).
//   - Store.AcknowledgeDataLoss (an operator's decision) places the
//     sentinels again, restores the scope version and the deployment id if
//     they are gone, and turns the marker into an acknowledgement with a
//     new generation, "ack:G". A running store that reads a generation it
//     does not know adopts the sentinels as they are now and claims again;
//     one whose own sentinel vanished writes the marker only over a marker
//     it knows (a script), so a late reading never undoes an acknowledgement.
//
// On a Cluster the sentinels follow their slots: a slot that migrates takes
// its sentinel to the new master, where it is still watched. A master that
// holds no watched sentinel (one added to the Cluster, or one whose
// sentinel slot moved away) gets one at the next reading: every reading on
// a Cluster also asks CLUSTER SLOTS (concurrently with the pipeline), and a
// master without a sentinel gets one placed (SET NX GET) in its first slot.
// Its data is watched from then on; a loss before that is not seen.
//
// Cost: one reading per lease, on one claim (concurrent claims wait for
// it); on a Cluster it spans every master and CLUSTER SLOTS (README.md,
// Measurements).

// markerKey is the fleet's data-lost marker.
func markerKey(prefix string) string { return prefix + "meta:data_lost" }

// sentinelKey is the sentinel in slot.
func sentinelKey(prefix string, slot int) string {
	return prefix + "meta:sentinel:{" + slotTags()[slot] + "}"
}

// Marker values: a recorded loss, or the acknowledgement of generation G.
const (
	markerLost = "lost:"
	markerAck  = "ack:"
)

// markLostSrc writes the loss marker unless the marker is an
// acknowledgement that the writer has not seen (ARGV[2], the one it knows,
// or ""): that acknowledgement is newer than the writer's reading.
const markLostSrc = `local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 4) == 'ack:' and v ~= ARGV[2] then return v end
redis.call('SET', KEYS[1], ARGV[1])
return false
`

// amnesia is a store's watch of its sentinels.
type amnesia struct {
	client  rueidis.Client
	prefix  string
	cluster bool
	onLoss  atomic.Pointer[func(error)]
	// gens: the generation sentinels and the highest generation seen in
	// each (generation.go); require: [Options.RequireInit].
	gens    *gens
	require bool

	mu      sync.Mutex
	watched map[string]string // sentinel key -> value placed or adopted
	gen     string            // the acknowledgement known ("ack:G"), or ""
	epoch   int               // moves at each adoption: older readings are dropped

	lost atomic.Pointer[idempotency.DataLoss] // nil while no loss is known
}

// initAmnesia reads the marker and, with opts.RequireInit, the generation
// sentinels (refusing a store that has none); start places the sentinels.
func initAmnesia(ctx context.Context, client rueidis.Client, opts Options) (*amnesia, error) {
	a := &amnesia{client: client, prefix: opts.Prefix, cluster: client.Mode() == rueidis.ClientModeCluster}
	a.gens = newGens(a.prefix, a.cluster)
	m, err := client.Do(ctx, client.B().Get().Key(markerKey(a.prefix)).Build()).ToString()
	switch {
	case rueidis.IsRedisNil(err):
	case err != nil:
		return nil, fmt.Errorf("redisstore: data-loss marker: %w", err)
	case strings.HasPrefix(m, markerAck):
		a.gen = m
	default:
		a.setLost(fmt.Sprintf("%s records a loss of data that no operator has acknowledged yet", markerKey(a.prefix)))
	}
	a.require = opts.RequireInit
	if !a.require {
		// The generation sentinels are made by each slot's first
		// reservation.
		return a, nil
	}
	st, err := readGens(ctx, client, a.gens)
	if err != nil {
		return nil, err
	}
	switch {
	case st.missing == 0:
	case a.lost.Load() != nil:
		// Nothing is written during a loss: the acknowledgement does it.
	case st.missing == len(st.vals):
		return nil, fmt.Errorf("%w: no generation sentinel (%s) is in Redis: initialise the store once (refserver store init); "+
			"if this Redis held the fleet's data before, it lost it, and calls whose records are gone may be dispatched again",
			ErrUninitialized, a.gens.keys[0])
	default:
		first := 0
		for st.vals[first] != 0 {
			first++
		}
		a.markLost(ctx, fmt.Sprintf("%d of the %d generation sentinels (%s among them) are gone: Redis lost data",
			st.missing, len(st.vals), a.gens.keys[first]), a.gens.keys[first], a.gen)
	}
	for i, v := range st.vals {
		a.gens.seen[i].Store(v)
	}
	return a, nil
}

// placeAll places the sentinels ([New], once the fleet's keys are read).
func (a *amnesia) placeAll(ctx context.Context) error {
	watched, err := a.place(ctx, nil)
	if err != nil {
		return err
	}
	a.watched = watched
	return nil
}

// err is the error a claim gets while a loss is known.
func (a *amnesia) err() error {
	if l := a.lost.Load(); l != nil {
		return fmt.Errorf("redisstore: %w: %s; this gateway stops claiming until an operator acknowledges the loss",
			idempotency.ErrStoreDataLost, l.Detail)
	}
	return nil
}

// setLost records a loss once and tells NotifyDataLoss's function.
func (a *amnesia) setLost(detail string) {
	l := &idempotency.DataLoss{Lost: true, Detail: detail, Since: time.Now()}
	if a.lost.CompareAndSwap(nil, l) {
		if f := a.onLoss.Load(); f != nil {
			(*f)(a.err())
		}
	}
}

// reading is one pass of the watch: the commands to pipeline with the scope
// version, and what to judge them against.
type reading struct {
	epoch int
	keys  []string
	vals  []string
	slots chan clusterMap // the CLUSTER SLOTS asked concurrently; nil off a Cluster
}

// start begins a reading: the marker and every watched sentinel, and on a
// Cluster the slot map, asked concurrently.
func (a *amnesia) start(ctx context.Context) (*reading, rueidis.Commands) {
	a.mu.Lock()
	r := &reading{epoch: a.epoch}
	for k, v := range a.watched {
		r.keys = append(r.keys, k)
		r.vals = append(r.vals, v)
	}
	a.mu.Unlock()
	cmds := rueidis.Commands{a.client.B().Get().Key(markerKey(a.prefix)).Build()}
	for _, k := range r.keys {
		cmds = append(cmds, a.client.B().Get().Key(k).Build())
	}
	if a.cluster {
		r.slots = make(chan clusterMap, 1)
		go func() {
			m, err := readClusterMap(ctx, a.client)
			if err != nil {
				m = nil // the coverage is checked at the next reading
			}
			r.slots <- m
		}()
	}
	return r, cmds
}

// judge reads a reading's replies (the marker's first). A reply that is an
// error is no verdict: it is read again at the next reading.
func (a *amnesia) judge(ctx context.Context, r *reading, res []rueidis.RedisResult) {
	var slots clusterMap
	if r.slots != nil {
		slots = <-r.slots
	}
	marker, merr := res[0].ToString()
	a.mu.Lock()
	if r.epoch != a.epoch {
		a.mu.Unlock()
		return // an adoption happened meanwhile
	}
	gen := a.gen
	a.mu.Unlock()
	switch {
	case merr == nil && strings.HasPrefix(marker, markerAck) && marker != gen:
		// An operator acknowledged since this store last looked.
		a.adopt(ctx, marker)
		return
	case merr == nil && !strings.HasPrefix(marker, markerAck):
		a.setLost(fmt.Sprintf("%s records a loss of data that no operator has acknowledged yet", markerKey(a.prefix)))
		return
	case merr != nil && !rueidis.IsRedisNil(merr):
		return
	}
	for i, k := range r.keys {
		v, err := res[1+i].ToString()
		switch {
		case rueidis.IsRedisNil(err):
			a.vanished(ctx, k, "is gone", gen)
			return
		case err == nil && v != r.vals[i]:
			a.vanished(ctx, k, "was gone and has been placed again", gen)
			return
		}
	}
	if slots != nil && a.lost.Load() == nil {
		a.cover(ctx, slots, r.epoch)
	}
}

// vanished records the loss of sentinel k and writes the fleet's marker.
func (a *amnesia) vanished(ctx context.Context, k, how, gen string) {
	// A marker not written now is written at the next reading, which finds
	// the sentinel still gone.
	a.markLost(ctx, fmt.Sprintf("the sentinel %s (Cluster slot %d) %s: Redis lost data under a running gateway", k, keySlot(k), how), k, gen)
}

// adopt takes the sentinels as they are now, under the acknowledgement gen.
func (a *amnesia) adopt(ctx context.Context, gen string) {
	watched, err := a.place(ctx, nil)
	if err != nil {
		return // adopted at the next reading
	}
	a.mu.Lock()
	a.watched, a.gen = watched, gen
	a.epoch++
	a.gens.reset(a.require)
	a.lost.Store(nil)
	a.mu.Unlock()
}

// cover places a sentinel on every master of slots that holds none of the
// watched ones.
func (a *amnesia) cover(ctx context.Context, slots clusterMap, epoch int) {
	a.mu.Lock()
	held := make([]int, 0, len(a.watched))
	for k := range a.watched {
		held = append(held, keySlot(k))
	}
	a.mu.Unlock()
	var need []int
	for _, ranges := range slots {
		covered := false
		for _, s := range held {
			covered = covered || ranges.has(s)
		}
		if !covered {
			need = append(need, ranges.first())
		}
	}
	if len(need) == 0 {
		return
	}
	placed, err := a.placeSlots(ctx, need)
	if err != nil {
		return
	}
	a.mu.Lock()
	if a.epoch == epoch {
		for k, v := range placed {
			a.watched[k] = v
		}
	}
	a.mu.Unlock()
}

// place puts a sentinel in the first slot of every master (slot 0 off a
// Cluster), or adopts the one there, and returns them all. slots, if not
// nil, is the Cluster's slot map already read.
func (a *amnesia) place(ctx context.Context, slots clusterMap) (map[string]string, error) {
	want := []int{0}
	if a.cluster {
		if slots == nil {
			var err error
			if slots, err = readClusterMap(ctx, a.client); err != nil {
				return nil, fmt.Errorf("redisstore: sentinels: CLUSTER SLOTS: %w", err)
			}
		}
		want = want[:0]
		for _, ranges := range slots {
			want = append(want, ranges.first())
		}
	}
	return a.placeSlots(ctx, want)
}

// placeSlots SET NX GETs a fresh sentinel in each slot and returns the
// value each now holds.
func (a *amnesia) placeSlots(ctx context.Context, slots []int) (map[string]string, error) {
	cmds := make(rueidis.Commands, len(slots))
	keys := make([]string, len(slots))
	fresh := make([]string, len(slots))
	for i, s := range slots {
		keys[i] = sentinelKey(a.prefix, s)
		fresh[i] = idempotency.NewOpID()
		cmds[i] = a.client.B().Set().Key(keys[i]).Value(fresh[i]).Nx().Get().Build()
	}
	out := make(map[string]string, len(slots))
	for i, r := range a.client.DoMulti(ctx, cmds...) {
		old, err := r.ToString()
		switch {
		case rueidis.IsRedisNil(err):
			out[keys[i]] = fresh[i]
		case err != nil:
			return nil, fmt.Errorf("redisstore: sentinel %s: %w", keys[i], err)
		default:
			out[keys[i]] = old
		}
	}
	return out, nil
}

// acknowledge is [Store.AcknowledgeDataLoss] after its reading.
func (a *amnesia) acknowledge(ctx context.Context) (map[string]string, string, error) {
	watched, err := a.place(ctx, nil)
	if err != nil {
		return nil, "", err
	}
	if a.require {
		// The generation sentinels gone are made again (generation 1),
		// before the marker that lets the fleet claim.
		st, err := readGens(ctx, a.client, a.gens)
		if err != nil {
			return nil, "", err
		}
		if _, err := fillGens(ctx, a.client, a.gens, st); err != nil {
			return nil, "", err
		}
	}
	gen := markerAck + idempotency.NewOpID()
	if err := a.client.Do(ctx, a.client.B().Set().Key(markerKey(a.prefix)).Value(gen).Build()).Error(); err != nil {
		return nil, "", fmt.Errorf("redisstore: data-loss marker: %w", err)
	}
	a.mu.Lock()
	a.watched, a.gen = watched, gen
	a.epoch++
	a.gens.reset(a.require)
	a.lost.Store(nil)
	a.mu.Unlock()
	return watched, gen, nil
}

// clusterMap is each master's slot ranges, by the master's address.
type clusterMap map[string]slotRanges

type slotRanges [][2]int

func (r slotRanges) has(slot int) bool {
	for _, x := range r {
		if slot >= x[0] && slot <= x[1] {
			return true
		}
	}
	return false
}

func (r slotRanges) first() int {
	f := clusterSlots
	for _, x := range r {
		f = min(f, x[0])
	}
	return f
}

// readClusterMap reads CLUSTER SLOTS: for each range its first and last
// slot, then its master's address and id.
func readClusterMap(ctx context.Context, client rueidis.Client) (clusterMap, error) {
	rows, err := client.Do(ctx, client.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, err
	}
	m := clusterMap{}
	for _, row := range rows {
		f, err := row.ToArray()
		if err != nil || len(f) < 3 {
			return nil, errors.New("unreadable CLUSTER SLOTS reply")
		}
		lo, err1 := f[0].AsInt64()
		hi, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err := errors.Join(err1, err2, err3); err != nil || len(node) < 2 || lo < 0 || hi >= clusterSlots || lo > hi {
			return nil, errors.New("unreadable CLUSTER SLOTS reply")
		}
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		id := host + ":" + strconv.FormatInt(port, 10)
		if len(node) > 2 {
			if s, err := node[2].ToString(); err == nil && s != "" {
				id = s
			}
		}
		m[id] = append(m[id], [2]int{int(lo), int(hi)})
	}
	if len(m) == 0 {
		return nil, errors.New("CLUSTER SLOTS lists no master")
	}
	return m, nil
}

// DataLoss reports whether this store knows of a loss of data and has
// stopped claiming; the zero DataLoss when the check is off
// ([Options.SkipDataLossCheck]). It reads nothing: the state is the latest
// reading's (docs/DESIGN.md, "The record and its lifecycle", Store amnesia).
func (s *Store) DataLoss() idempotency.DataLoss {
	if s.scope.amnesia == nil {
		return idempotency.DataLoss{}
	}
	if l := s.scope.amnesia.lost.Load(); l != nil {
		return *l
	}
	return idempotency.DataLoss{}
}

// NotifyDataLoss has f called with the error claims get whenever the store
// sees a loss of data (docs/DESIGN.md, "The record and its lifecycle", Store amnesia): at once if it knows
// of one now (the fleet's marker, read by [New]), and once per loss from then
// on (a loss after an acknowledgement calls it again). f runs on the path
// of the claim or health check that saw the loss and must not block. It
// does nothing when the check is off ([Options.SkipDataLossCheck]).
func (s *Store) NotifyDataLoss(f func(error)) {
	a := s.scope.amnesia
	if a == nil || f == nil {
		return
	}
	a.onLoss.Store(&f)
	if a.lost.Load() != nil {
		f(a.err())
	}
}

// AcknowledgeDataLoss is an operator's acknowledgement that the store lost
// data: calls whose records were lost may be dispatched again (a vendor
// with a binding deduplicates them only if the deployment id is unchanged,
// [Options.DeploymentID]). It first reads the sentinels and the marker as a
// claim would (so a loss not seen yet is seen); if no loss is known it
// writes nothing. Otherwise it restores the fleet's scope version if it is
// gone (SET NX), writes the deployment id back (the configured one,
// [Options.DeploymentID], over any other; without one, only if it is gone),
// makes the generation sentinels that are gone again (with RequireInit;
// generation.go), places the sentinels again and writes the
// acknowledgement to the marker, which every gateway of the fleet reads at
// its next reading and claims again, forgetting the generations it
// remembered. It fails with [idempotency.ErrInvalidRequest] when the check
// is off.
func (s *Store) AcknowledgeDataLoss(ctx context.Context) (idempotency.DataLossAcknowledgement, error) {
	a := s.scope.amnesia
	if a == nil {
		return idempotency.DataLossAcknowledgement{}, fmt.Errorf("redisstore: acknowledge: %w: the data-loss check is off (SkipDataLossCheck)", idempotency.ErrInvalidRequest)
	}
	if err := s.scope.read(ctx); err != nil {
		return idempotency.DataLossAcknowledgement{}, opError("acknowledge", err)
	}
	l := a.lost.Load()
	if l == nil {
		return idempotency.DataLossAcknowledgement{Sentinels: len(a.watchedKeys())}, nil
	}
	// The fleet's keys first: a gateway that starts once the marker is
	// lifted finds them as the fleet had them.
	// A configured deployment id is written over whatever a gateway wrote
	// meanwhile, so the fleet's vendor keys stay the same (DESIGN 5a).
	dep := s.client.B().Set().Key(deploymentKey(s.prefix)).Value(s.deployment).Nx().Build()
	if s.deploymentSet {
		dep = s.client.B().Set().Key(deploymentKey(s.prefix)).Value(s.deployment).Build()
	}
	restore := rueidis.Commands{s.client.B().Set().Key(s.scope.key).Value(s.scope.want).Nx().Build(), dep}
	for _, r := range s.client.DoMulti(ctx, restore...) {
		if err := r.Error(); err != nil && !rueidis.IsRedisNil(err) {
			return idempotency.DataLossAcknowledgement{}, opError("acknowledge", err)
		}
	}
	watched, _, err := a.acknowledge(ctx)
	if err != nil {
		return idempotency.DataLossAcknowledgement{}, opError("acknowledge", err)
	}
	return idempotency.DataLossAcknowledgement{Acknowledged: true, Detail: l.Detail, Sentinels: len(watched)}, nil
}

// watchedKeys lists the watched sentinels, sorted.
func (a *amnesia) watchedKeys() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]string, 0, len(a.watched))
	for k := range a.watched {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// nowMS is the wall clock in ms, for the marker's text.
func (a *amnesia) nowMS() int64 { return time.Now().UnixMilli() }
