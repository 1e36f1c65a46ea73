package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/scriptargs"
)

// serveLimit is the limit server of row 4 (the harness starts itself with
// OBOL_BENCH_ROLE=limit): the bare server whose tool handler also runs,
// around its vendor call, the claim script and the finalize script, by
// EVALSHA through a rueidis client configured as refserver's is. It pays
// the two round trips the contract requires of a first call (claim before
// the send, finalize before the answer) and none of the CPU work around
// them: no key resolution, request hash, vendor key, scrubbing, record
// encoding, receipt or schema check.
//
// Its arguments are refserver's: at start it makes one claim and one
// finalize of row 4's tool through redisstore.Store on a client that
// records the commands, and keeps them as templates. A call sends the same
// script with the same keys and arguments but its own record key, op ids,
// vendor key, incarnation and index member, all of the same lengths, so its
// record is the size of refserver's.
func serveLimit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return serveForward(ctx, "limit server", true, args, stdout, stderr)
}

// limit holds the client and the two command templates.
type limit struct {
	client   rueidis.Client
	claim    template
	finalize template
	oldKey   string // the idempotency key of the templates' record
}

// template is one EVALSHA as the store sent it, and where the per-call
// values stand in it.
type template struct {
	cmd               []string // EVALSHA sha numkeys keys... args...
	op, vk, inc, memb int      // argument positions in cmd; -1 when absent
}

// newLimit connects as refserver does (redisstore.ParseURL, no client
// cache, pooled connections) and records the templates of row 4's tool.
func newLimit(ctx context.Context, redisURL, vendorURL string) (*limit, error) {
	spec := effectspec.Spec{Tool: mcpTool, Effect: effectspec.EffectWrite, Route: effectspec.RouteNative,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingHeader, Header: "Idempotency-Key"}}
	return newLimitOf(ctx, redisURL, limitCall{
		spec: spec,
		target: idempotency.RouteTarget{Connection: "conn_pay", Provider: "benchpay",
			Method: http.MethodPost, URL: vendorURL, Credential: vendorEnv},
		args: `{"amount":1200,"currency":"usd","customer":"cus_0"}`,
		result: &idempotency.StoredResult{Status: http.StatusCreated,
			Header: http.Header{"Content-Type": {"application/json"}, "Request-Id": {"req_1000"}},
			Body:   []byte(`{"id":"ch_1000","object":"charge","amount":1200,"currency":"usd","status":"succeeded"}`)},
	})
}

// limitCall is the call whose claim and finalize a limit server records:
// the tool's spec and route as refserver's config makes them, the
// arguments, and the result refserver stores.
type limitCall struct {
	spec   effectspec.Spec
	target idempotency.RouteTarget
	args   string
	result *idempotency.StoredResult
}

// newLimitOf is newLimit for any call.
func newLimitOf(ctx context.Context, redisURL string, call limitCall) (*limit, error) {
	opt, err := redisstore.ParseURL(redisURL)
	if err != nil {
		return nil, err
	}
	opt.DisableCache = true
	opt.DisableAutoPipelining = true
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	l := &limit{client: client}
	if err := l.record(ctx, call); err != nil {
		client.Close()
		return nil, err
	}
	return l, nil
}

// recorder is a rueidis.Client that keeps the EVALSHA commands sent
// through it.
type recorder struct {
	rueidis.Client
	mu    sync.Mutex
	evals [][]string
}

func (r *recorder) keep(cmd rueidis.Completed) {
	c := cmd.Commands()
	if len(c) > 0 && strings.EqualFold(c[0], "EVALSHA") {
		r.mu.Lock()
		r.evals = append(r.evals, slices.Clone(c))
		r.mu.Unlock()
	}
}

func (r *recorder) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	r.keep(cmd)
	return r.Client.Do(ctx, cmd)
}

func (r *recorder) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for _, c := range cmds {
		r.keep(c)
	}
	return r.Client.DoMulti(ctx, cmds...)
}

// last returns the last EVALSHA recorded and forgets them all.
func (r *recorder) last() ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.evals) == 0 {
		return nil, errors.New("the store sent no EVALSHA")
	}
	c := r.evals[len(r.evals)-1]
	r.evals = nil
	return c, nil
}

// record makes one claim and one finalize of call as refserver's
// orchestrator does (refserver's config: 30s lease, 24h retention; a
// supplied key; the call's stored result) and keeps the commands.
func (l *limit) record(ctx context.Context, call limitCall) error {
	rec := &recorder{Client: l.client}
	st, err := redisstore.New(ctx, rec, redisstore.Options{Prefix: idempotency.DefaultPrefix, Retention: 24 * time.Hour, Lease: 30 * time.Second})
	if err != nil {
		return err
	}
	spec := call.spec
	route, err := idempotency.NewRoute(spec, call.target)
	if err != nil {
		return err
	}
	hash, err := idempotency.RequestHash([]byte(call.args))
	if err != nil {
		return err
	}
	scope := idempotency.Scope{Workspace: "ws_bench", Connection: call.target.Connection, Tool: spec.Tool}
	key := idempotency.NewKey()
	l.oldKey = key.String()
	rec.last() // the store's own start-up scripts
	res, err := st.Claim(ctx, idempotency.ClaimRequest{Scope: scope, Key: key, KeySource: idempotency.KeySupplied,
		RequestHash: hash, Binding: route.Binding, Route: route.Record(),
		Timeout: spec.AttemptTimeout(), VendorWindow: spec.VendorWindow(), OpID: idempotency.NewOpID()})
	if err != nil {
		return err
	}
	if res.Status != idempotency.StatusClaimed || res.Token != 1 {
		return fmt.Errorf("the template claim answered %s, token %d", res.Status, res.Token)
	}
	cc, err := rec.last()
	if err != nil {
		return err
	}
	_, err = st.Finalize(ctx, idempotency.FinalizeRequest{Scope: scope, Key: key, Token: res.Token,
		Outcome: effectspec.Accepted, Incarnation: res.Incarnation, OpID: idempotency.NewOpID(),
		Result: call.result})
	if err != nil {
		return err
	}
	fc, err := rec.last()
	if err != nil {
		return err
	}
	if l.claim, err = newTemplate(cc, scriptargs.ClaimSpec); err != nil {
		return err
	}
	if l.finalize, err = newTemplate(fc, scriptargs.FinalizeSpec); err != nil {
		return err
	}
	// The template record must not count as a measured one.
	return l.client.Do(ctx, l.client.B().Del().Key(cc[3]).Build()).Error()
}

func newTemplate(cmd []string, spec scriptargs.Args) (template, error) {
	if len(cmd) < 3 {
		return template{}, errors.New("short EVALSHA")
	}
	nk, err := strconv.Atoi(cmd[2])
	if err != nil || nk != len(spec.Keys()) {
		return template{}, fmt.Errorf("%s: EVALSHA with %s keys, want %d", spec.Script(), cmd[2], len(spec.Keys()))
	}
	pos := func(name string) int {
		if i := slices.Index(spec.Names(), name); i >= 0 && 3+nk+i < len(cmd) {
			return 3 + nk + i
		}
		return -1
	}
	t := template{cmd: cmd, op: pos("op"), vk: pos("vk"), inc: pos("inc"), memb: pos("member")}
	if t.op < 0 || t.memb < 0 || t.inc < 0 {
		return template{}, fmt.Errorf("%s: no op, member or inc argument", spec.Script())
	}
	return t, nil
}

// build returns t's command for another record: key, member, incarnation
// and vendor key (if t has one and vk is not empty) as given, fresh random
// bytes of the same length for op ids, and the record's own index buckets
// (slotBucket).
func (t template) build(c rueidis.Client, recordKey, oldKey, newKey, inc, vk string) rueidis.Completed {
	cmd := t.args(recordKey, oldKey, newKey, inc)
	if vk != "" && t.vk >= 0 && cmd[t.vk] != "" {
		cmd[t.vk] = vk
	}
	return c.B().Arbitrary(cmd[0]).Args(cmd[1:]...).Build()
}

// args is build's command as strings, with a random vendor key.
func (t template) args(recordKey, oldKey, newKey, inc string) []string {
	cmd := slices.Clone(t.cmd)
	cmd[3] = recordKey
	nk, _ := strconv.Atoi(cmd[2])
	for i := 4; i < 3+nk && i < len(cmd); i++ {
		cmd[i] = slotBucket(cmd[i], newKey)
	}
	cmd[t.op] = random(len(cmd[t.op]))
	if t.vk >= 0 && cmd[t.vk] != "" {
		cmd[t.vk] = random(len(cmd[t.vk]))
	}
	cmd[t.inc] = inc
	cmd[t.memb] = strings.Replace(cmd[t.memb], oldKey, newKey, 1)
	return cmd
}

// slotBucket is bucket (an index bucket, "...:{tag}") for the record of
// key: the store keeps one bucket per cluster slot of the record key, so
// refserver's calls, whose keys are random, each make and empty a bucket
// of their own (ZADD in the claim, ZREM in the finalize). One bucket for
// every call, as the template has, would spare the limit server that
// work. The tag is 14 bits of the key, as many buckets as there are
// slots; on one Redis which slot a key falls in costs nothing.
func slotBucket(bucket, key string) string {
	i := strings.LastIndexByte(bucket, '{')
	if i < 0 || !strings.HasSuffix(bucket, "}") || len(key) < 8 {
		return bucket
	}
	n, err := strconv.ParseUint(key[len(key)-4:], 16, 16)
	if err != nil {
		return bucket
	}
	return bucket[:i+1] + strconv.FormatUint(n&0x3fff, 10) + "}"
}

func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return string(b)
}

// around runs one call's claim, send and finalize: what refserver's store
// sends, and nothing else.
func (l *limit) around(ctx context.Context, send func() error) error {
	return l.aroundKeyed(ctx, func(string) error { return send() })
}

// aroundKeyed is around whose send gets the record's vendor key in its
// text form (idt_ and 32 hex digits), as a gateway sends it.
func (l *limit) aroundKeyed(ctx context.Context, send func(vendorKey string) error) error {
	key := idempotency.NewKey().String()
	rk := strings.Replace(l.claim.cmd[3], l.oldKey, key, 1)
	inc := random(len(l.claim.cmd[l.claim.inc]))
	var vk [16]byte
	rand.Read(vk[:])
	if err := l.run(ctx, l.claim.build(l.client, rk, l.oldKey, key, inc, string(vk[:])), "claimed"); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	if err := send("idt_" + hex.EncodeToString(vk[:])); err != nil {
		return err
	}
	if err := l.run(ctx, l.finalize.build(l.client, rk, l.oldKey, key, inc, ""), "finalized"); err != nil {
		return fmt.Errorf("finalize: %w", err)
	}
	return nil
}

// run sends cmd and checks the status its script answered: the first
// element of the reply (of the body's reply, for a claim), as the store
// reads it.
func (l *limit) run(ctx context.Context, cmd rueidis.Completed, want string) error {
	arr, err := l.client.Do(ctx, cmd).ToArray()
	if err != nil {
		return err
	}
	if len(arr) == 2 && arr[0].IsArray() {
		// claim's reply beside its slot's generation (redisstore,
		// generation.go)
		if arr, err = arr[0].ToArray(); err != nil {
			return err
		}
	}
	if len(arr) == 0 {
		return errors.New("empty script reply")
	}
	if got, err := arr[0].ToString(); err != nil || got != want {
		return fmt.Errorf("answered %q, want %q", got, want)
	}
	return nil
}
