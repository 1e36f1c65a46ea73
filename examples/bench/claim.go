package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/scriptargs"
	"github.com/obol-gateway/obol/receipt"
)

// workload is the claim every side of rows 1 and 2 makes: a fresh key of one
// tool on one connection, with a header binding.
type workload struct {
	scope   idempotency.Scope
	route   receipt.RouteRecord
	hash    string // sha256:...
	fp      string // sha256:...
	keyBase string // the storage key without the idempotency key
	args    claimArgs
	packed  string // the route record as redisstore sends it to the claim script
	// bucket and member are the unknown index entry the reference's claims
	// write (KEYS[2] and an argument; see benchArgs); pending is the pending
	// approvals bucket they get as KEYS[3] (and never write: no approval).
	bucket, pending, member string
	nonce                   atomic.Uint64 // per measurement, so keys never repeat in a run
}

func newWorkload() (*workload, error) {
	w := &workload{
		scope: idempotency.Scope{Workspace: "ws_bench", Connection: "conn_bench", Tool: "bench.create_charge"},
	}
	route := idempotency.Route{Connection: "conn_bench", Provider: "benchpay", Tool: "bench.create_charge",
		Method: "POST", Host: "127.0.0.1:9000", Path: "/v1/charges", Binding: effectspec.BindingHeader}
	w.route, w.fp = route.Record(), route.Fingerprint()
	// As the store sends it: the route's fields as the record stores them
	// (tag, length, bytes); the connection and tool are the scope's, which
	// the store does not keep twice. No length is a quote or a comma, which
	// redis-benchmark's CSV report would not escape. The probe of claimRows
	// reads the route back through the store.
	for _, f := range []struct {
		tag byte
		v   string
	}{{'p', route.Provider}, {'M', route.Method}, {'H', route.Host}, {'P', route.Path}} {
		w.packed += string([]byte{f.tag, byte(len(f.v))}) + f.v
	}
	var err error
	if w.hash, err = idempotency.RequestHash([]byte(`{"amount": 1200, "currency": "usd", "customer": "cus_42"}`)); err != nil {
		return nil, err
	}
	k := idempotency.NewKey()
	full, err := w.scope.StorageKey(idempotency.DefaultPrefix, k)
	if err != nil {
		return nil, err
	}
	w.keyBase = strings.TrimSuffix(full, k.String())
	// The member as redisstore writes it (JSON of connection, tool and key),
	// for the reference with a random key in it and its quotes and commas
	// made letters, which redis-benchmark's CSV report does not escape: the
	// same length costs the same.
	w.member = strings.NewReplacer(`"`, "q", ",", "s").Replace(
		`{"c":"` + w.scope.Connection + `","t":"` + w.scope.Tool + `","k":"idt_00000000000000000000__rand_int__"}`)
	// redis-benchmark runs on one Redis, so one bucket (of any slot) serves
	// every key; redisstore sends the bucket of the key's own slot.
	w.bucket = idempotency.DefaultPrefix + "unk:" + w.scope.Workspace + ":{0}"
	w.pending = idempotency.DefaultPrefix + "apv:" + w.scope.Workspace + ":{0}"
	// As redisstore sends them: digests and the vendor key as their bytes.
	vk := idempotency.VendorKey(idempotency.NewDeploymentID(), w.scope, k, w.hash)
	w.args = claimArgs{rh: rawHex(strings.TrimPrefix(w.hash, "sha256:")), b: "h", fp: rawHex(strings.TrimPrefix(w.fp, "sha256:")),
		rc: w.route.Connection, rp: w.route.Provider, ks: "s", op: idempotency.NewOpID(),
		vk: rawHex(strings.TrimPrefix(vk.String(), "idt_"))}
	return w, nil
}

func rawHex(h string) string {
	b, _ := hex.DecodeString(h)
	return string(b)
}

// argv makes a byte string passable to redis-benchmark: argv cannot carry a
// NUL, and its CSV report quotes the command, so every byte becomes a letter.
// The scripts treat these values as opaque bytes: the same length costs the
// same.
func argv(v string) string {
	b := []byte(v)
	for i, c := range b {
		b[i] = 'a' + c%26
	}
	return string(b)
}

// keyer makes unique keys without crypto/rand in the measured loop:
// "idt_" + 16 hex of the measurement + 16 hex of a counter.
type keyer struct {
	prefix string
	n      atomic.Uint64
}

func (w *workload) keyer() *keyer {
	return &keyer{prefix: fmt.Sprintf("idt_%016x", w.nonce.Add(1)<<32|uint64(time.Now().UnixNano())&0xffffffff)}
}

func (k *keyer) next() idempotency.Key {
	s := strconv.FormatUint(k.n.Add(1), 16)
	key, err := idempotency.ParseKey(k.prefix + strings.Repeat("0", 16-len(s)) + s)
	if err != nil {
		panic(err) // unreachable: the form is fixed
	}
	return key
}

// loop runs op on c goroutines for d and returns completed operations per
// second. The first error stops it.
func loop(ctx context.Context, c int, d time.Duration, op func(ctx context.Context) error) (ops int64, perSec float64, err error) {
	var (
		stop  atomic.Bool
		total atomic.Int64
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	start := time.Now()
	timer := time.AfterFunc(d, func() { stop.Store(true) })
	defer timer.Stop()
	for range c {
		wg.Go(func() {
			var n int64
			for !stop.Load() && ctx.Err() == nil {
				if err := op(ctx); err != nil {
					once.Do(func() { first = err })
					stop.Store(true)
					break
				}
				n++
			}
			total.Add(n)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first == nil {
		first = ctx.Err()
	}
	return total.Load(), float64(total.Load()) / elapsed.Seconds(), first
}

// sample is one measurement of a claim implementation: the client-side
// rate and the Redis CPU time per claim.
type sample struct {
	perSec    float64
	redisUsec float64
}

func (s sample) String() string {
	return fmt.Sprintf("%s (Redis %.1fµs/claim)", rate(s.perSec), s.redisUsec)
}

// measure runs f (which returns the claims made and the rate), checks that
// those claims landed (ops less a slack fraction to ops plus extra records)
// and reads the Redis CPU time they took.
func (e *env) measure(ctx context.Context, f func() (ops int64, perSec float64, err error), slack float64, extra int64) (sample, error) {
	cpu0, err := e.redisCPU(ctx)
	if err != nil {
		return sample{}, err
	}
	ops, r, err := f()
	if err != nil {
		return sample{}, err
	}
	// Read before checkKeys, whose SCAN is no claim's cost.
	cpu1, err := e.redisCPU(ctx)
	if err != nil {
		return sample{}, err
	}
	if err := e.checkKeys(ctx, int64(float64(ops)*(1-slack)), ops+extra); err != nil {
		return sample{}, err
	}
	return sample{perSec: r, redisUsec: (cpu1 - cpu0) / float64(ops)}, nil
}

// measureOurs runs redisstore.Store.Claim on fresh keys. Each op is one
// Claim (the EVALSHA of the claim script through rueidis, which pipelines
// concurrent callers on shared connections); no finalize.
func measureOurs(ctx context.Context, e *env, w *workload, c int, d time.Duration) (sample, error) {
	k := w.keyer()
	return e.measure(ctx, func() (int64, float64, error) {
		return loop(ctx, c, d, func(ctx context.Context) error {
			res, err := e.store.Claim(ctx, idempotency.ClaimRequest{
				Scope: w.scope, Key: k.next(), KeySource: idempotency.KeySupplied, RequestHash: w.hash,
				Binding: effectspec.BindingHeader, Route: w.route,
			})
			if err == nil && res.Status != idempotency.StatusClaimed {
				err = fmt.Errorf("claim of a fresh key answered %s", res.Status)
			}
			return err
		})
	}, 0, 0)
}

// measureHand runs the go-redis claim of handClaim on fresh keys.
func measureHand(ctx context.Context, e *env, h *handClaim, w *workload, c int, d time.Duration) (sample, error) {
	k := w.keyer()
	return e.measure(ctx, func() (int64, float64, error) {
		return loop(ctx, c, d, func(ctx context.Context) error {
			st, err := h.claim(ctx, w.keyBase+k.next().String(), w.args)
			if err == nil && st != "claimed" {
				err = fmt.Errorf("go-redis claim of a fresh key answered %s", st)
			}
			return err
		})
	}, 0, 0)
}

// redisCPU returns the CPU time the Redis process has used (user plus
// system, INFO cpu), in microseconds: the server-side cost of a claim,
// parsing and socket I/O included, which command statistics leave out.
func (e *env) redisCPU(ctx context.Context) (float64, error) {
	info, err := e.client.Do(ctx, e.client.B().Info().Section("cpu").Build()).ToString()
	if err != nil {
		return 0, err
	}
	var total float64
	for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
		v, err := strconv.ParseFloat(infoField(info, f), 64)
		if err != nil {
			return 0, fmt.Errorf("INFO cpu: %s: %w", f, err)
		}
		total += v
	}
	return total * 1e6, nil
}

// checkKeys proves that the measured claims landed: the database holds
// between lo and hi records, besides the workspace's unknown index buckets
// (one per slot that a record hashed to; one for redis-benchmark) and the
// fleet's meta keys, which flush keeps.
func (e *env) checkKeys(ctx context.Context, lo, hi int64) error {
	n, err := e.dbsize(ctx)
	if err != nil {
		return err
	}
	for _, pattern := range []string{idempotency.DefaultPrefix + "unk:ws_bench*", idempotency.DefaultPrefix + "meta:*"} {
		var cursor uint64
		for {
			sc, err := e.client.Do(ctx, e.client.B().Scan().Cursor(cursor).Match(pattern).Count(10000).Build()).AsScanEntry()
			if err != nil {
				return err
			}
			n -= int64(len(sc.Elements))
			if cursor = sc.Cursor; cursor == 0 {
				break
			}
		}
	}
	if n < lo || n > hi {
		return fmt.Errorf("%d records in Redis after the measurement, want %d to %d", n, lo, hi)
	}
	return nil
}

// benchArgs is the redis-benchmark command line of the Redis-side limit:
// EVALSHA of our own claim script on a fresh key, with the arguments
// redisstore sends, encoded as it encodes them (internal/scriptargs: no
// approval, no ticket, lease 10s, retention 24h, unknown retention 7 days,
// attempt timeout 30s, no refusal, a vendor window of 24h) and its keys
// (the record, an index bucket, a pending approvals bucket: w.bucket,
// w.pending, and the generation sentinel). __rand_int__ makes the keys unique: 12 digits (after 20
// zeros: 32 digits, like our keys) drawn from 2*10^9, the most -r takes (an
// int), so a million requests repeat about 250 keys, which then answer
// in_progress: 0.03% of cheaper calls, in the limit's favour.
func (e *env) benchArgs(w *workload, c, n int) []string {
	host, port, _ := net.SplitHostPort(e.o.redisHostPort)
	a := w.args
	return append([]string{
		"-h", host, "-p", port, "--dbnum", strconv.Itoa(e.o.db),
		"-c", strconv.Itoa(c), "-P", strconv.Itoa(e.o.pipeline), "-n", strconv.Itoa(n),
		"-r", "2000000000", "--csv",
		"EVALSHA", e.claimSHA, "4", w.keyBase + "idt_00000000000000000000__rand_int__", w.bucket, w.pending,
		benchGenKey,
	}, scriptargs.ClaimSpec.Argv(&scriptargs.Claim{
		ScopeVersion: strconv.Itoa(idempotency.ScopeVersion), RequestHash: argv(a.rh), Binding: a.b, Fingerprint: argv(a.fp),
		Route: w.packed, KeySource: a.ks, Op: a.op, Lease: "10000", Retention: strconv.FormatInt((24 * time.Hour).Milliseconds(), 10),
		VendorKey: argv(a.vk), URetention: strconv.FormatInt((7 * 24 * time.Hour).Milliseconds(), 10), Timeout: 30000,
		Member: w.member, Window: int((24 * time.Hour).Milliseconds()), Incarnation: benchIncarnation, Gen: 0,
		MaxAttempts: effectspec.DefaultMaxAttempts,
	})...)
}

// benchGenKey is the generation sentinel of a single Redis (redisstore,
// generation.go): every claim's last key there.
const benchGenKey = idempotency.DefaultPrefix + "meta:gen"

// benchIncarnation is the incarnation of every record the Redis-side limit
// makes: 8 bytes, as redisstore's crypto/rand ones.
const benchIncarnation = "inc00001"

// measureLimit runs redis-benchmark with n requests and returns its rate.
// Random keys may repeat (see benchArgs), so 1% fewer records may land; it
// may send up to one pipeline per client more than n.
func measureLimit(ctx context.Context, e *env, w *workload, c, n int) (sample, error) {
	return e.measure(ctx, func() (int64, float64, error) {
		cmd := exec.CommandContext(ctx, e.o.benchBin, e.benchArgs(w, c, n)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return 0, 0, fmt.Errorf("redis-benchmark: %w: %s", err, lastLine(errb.String()))
		}
		r, err := parseBenchCSV(out.Bytes())
		return int64(n), r, err
	}, 0.01, int64(c*e.o.pipeline))
}

// parseBenchCSV reads the rps column of redis-benchmark --csv. A server
// error is printed as a line of its own and leaves no result row.
func parseBenchCSV(out []byte) (float64, error) {
	if i := bytes.Index(out, []byte("Error from server")); i >= 0 {
		line, _, _ := bytes.Cut(out[i:], []byte("\n"))
		return 0, fmt.Errorf("redis-benchmark: %s", line)
	}
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		return 0, fmt.Errorf("redis-benchmark output: %w", err)
	}
	if len(recs) < 2 || len(recs[0]) < 2 || recs[0][1] != "rps" || len(recs[1]) < 2 {
		return 0, fmt.Errorf("redis-benchmark output: no result row in %q", out)
	}
	r, err := strconv.ParseFloat(recs[1][1], 64)
	if err != nil || r <= 0 {
		return 0, fmt.Errorf("redis-benchmark output: rps %q", recs[1][1])
	}
	return r, nil
}

// claimRows measures rows 1 and 2. Per concurrency and round it measures
// ours, redis-benchmark and go-redis back to back, rotating which goes first,
// with the database flushed before each; the rows show medians.
func claimRows(ctx context.Context, o *options, e *env, t *table) error {
	w, err := newWorkload()
	if err != nil {
		return err
	}
	// The script redis-benchmark sends must answer as ours does.
	probe := w.keyBase + idempotency.NewKey().String()
	a := e.benchArgs(w, 1, 1)
	i := indexOf(a, "EVALSHA")
	reply, err := e.client.Do(ctx, e.client.B().Evalsha().Sha1(e.claimSHA).Numkeys(4).Key(probe, w.bucket, w.pending, benchGenKey).
		Arg(a[i+7:]...).Build()).ToArray()
	if err == nil && len(reply) == 2 {
		reply, err = reply[0].ToArray() // {the claim's reply, the generation}
	}
	if err != nil || len(reply) == 0 {
		return fmt.Errorf("probe EVALSHA of the claim script: %v", err)
	}
	if st, _ := reply[0].ToString(); st != "claimed" {
		return fmt.Errorf("probe EVALSHA of the claim script answered %q", st)
	}
	pk, err := idempotency.ParseKey(strings.TrimPrefix(probe, w.keyBase))
	if err != nil {
		return err
	}
	// The probe's fingerprint is its own argument; the route's facts are
	// what the packed route must carry.
	rec, err := e.store.Lookup(ctx, w.scope, pk)
	got, want := rec.Route, w.route
	got.Fingerprint, want.Fingerprint = "", ""
	if err != nil || got != want {
		return fmt.Errorf("probe EVALSHA of the claim script: the store reads back route %+v, %v; want %+v", got, err, want)
	}
	if _, err := exec.LookPath(o.benchBin); err != nil && o.rows[1] {
		return fmt.Errorf("redis-benchmark: %w", err)
	}
	for _, c := range o.concurrency {
		var ours, limit, hand []sample
		var h *handClaim
		if o.rows[2] {
			h = newHandClaim(o.redisHostPort, o.db, c)
		}
		// Calibrate redis-benchmark's request count to the duration.
		n := 20000
		if o.rows[1] {
			if err := e.flush(ctx); err != nil {
				return err
			}
			r, err := measureLimit(ctx, e, w, c, n)
			if err != nil {
				return err
			}
			n = max(1000, int(r.perSec*o.duration.Seconds()))
		}
		sides := []func() error{
			func() error {
				r, err := measureOurs(ctx, e, w, c, o.duration)
				ours = append(ours, r)
				return err
			},
		}
		if o.rows[1] {
			sides = append(sides, func() error {
				r, err := measureLimit(ctx, e, w, c, n)
				limit = append(limit, r)
				n = max(1000, int(r.perSec*o.duration.Seconds()))
				return err
			})
		}
		if h != nil {
			sides = append(sides, func() error {
				r, err := measureHand(ctx, e, h, w, c, o.duration)
				hand = append(hand, r)
				return err
			})
		}
		for round := range o.rounds {
			for j := range sides {
				if err := e.flush(ctx); err != nil {
					return err
				}
				if err := sides[(round+j)%len(sides)](); err != nil {
					if h != nil {
						h.close()
					}
					return fmt.Errorf("concurrency %d: %w", c, err)
				}
			}
			fmt.Fprintf(o.progress, "claim c=%d round %d: ours %v, limit %v, go-redis %v\n", c, round+1,
				last(ours), last(limit), last(hand))
		}
		if h != nil {
			h.close()
		}
		mo := medianSample(ours)
		if o.rows[1] {
			ml := medianSample(limit)
			r := mo.perSec / ml.perSec
			tgt, v := "-", info
			if c == 200 {
				tgt, v = ">= 0.80", verdict(r >= 0.8)
			}
			t.add(row{"1", fmt.Sprintf("claim, c=%d: Store.Claim vs redis-benchmark EVALSHA -P %d", c, o.pipeline),
				mo.String(), ml.String(), fmt.Sprintf("%.2f", r), tgt, v})
		}
		if o.rows[2] {
			mh := medianSample(hand)
			r := mo.perSec / mh.perSec
			t.add(row{"2", fmt.Sprintf("claim, c=%d: Store.Claim vs go-redis WATCH/HMGET/MULTI", c),
				mo.String(), mh.String(), fmt.Sprintf("%.2fx", r), ">= 2x", verdict(r >= 2)})
		}
	}
	return e.flush(ctx)
}

func last(xs []sample) sample {
	if len(xs) == 0 {
		return sample{}
	}
	return xs[len(xs)-1]
}

// medianSample takes the median of each figure on its own.
func medianSample(xs []sample) sample {
	var r, u []float64
	for _, x := range xs {
		r, u = append(r, x.perSec), append(u, x.redisUsec)
	}
	return sample{median(r), median(u)}
}

func indexOf(a []string, s string) int {
	for i, v := range a {
		if v == s {
			return i
		}
	}
	panic(errors.New("indexOf: " + s))
}
