package proof

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/obol-gateway/obol/receipt"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/refservertest"
	"github.com/obol-gateway/obol/retry"
)

// Credentials of the test configuration. They are test values, and the
// suite checks that none of them reaches a gateway's log.
const (
	vendorSecret = "vendor_sk_proof_never_log_me_91ab"
	apiKey       = "ob_proof_workspace_key"
	approverKey  = "ob_proof_approver_key"
	workspace    = "ws_proof"
)

// Tools of the test configuration, one per binding kind.
var bindingTools = []struct{ binding, tool string }{
	{"header", "pay.charge"},
	{"body_pointer", "crm.contact"},
	{"unsupported", "chat.post"},
}

// gatewayConfig renders a refserver configuration whose tools all point at
// vendorURL. The environment is "test" so that the unsupported tool runs.
func gatewayConfig(vendorURL, lease string) string {
	return `{
  "key_prefix": "proof:", "lease": "` + lease + `", "environment": "test",
  "workspaces": [{"id": "` + workspace + `", "api_keys": ["` + apiKey + `"]}],
  "approver_keys": [{"name": "proof-operator", "key": "` + approverKey + `"}],
  "connections": [{"id": "conn_v", "provider": "proofvendor", "base_url": "` + vendorURL + `", "secret_env": "PROOF_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "path": "/charge", "spec": {"tool": "pay.charge",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/contact", "spec": {"tool": "crm.contact",
      "idempotency": {"binding": "body_pointer", "pointer": "/idem"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/chat", "spec": {"tool": "chat.post",
      "idempotency": {"binding": "unsupported"}, "status": {"accepted": [201]}}}
  ]
}`
}

// vendor is a counting vendor. Every request carries a "ref" member in its
// JSON body (the test puts the call's client key there), so requests are
// counted per call whatever the binding, even when no key is propagated; the
// propagated key is checked to be the call's vendor key.
type vendor struct {
	*httptest.Server
	mu      sync.Mutex
	byRef   map[string]int
	keyOf   map[string]string // ref -> propagated (vendor) key seen; none for unsupported
	refOf   map[string]string // propagated key -> the ref it was first seen with
	badKey  int               // the client's key, or not the one vendor key of its slot
	badAuth int
	seq     int
	delay   time.Duration
	// block, if set, is called with the ref of every request before it is
	// answered; it may block (crash windows) or return at once.
	block func(ref string)
}

func newVendor(t testing.TB, delay time.Duration) *vendor {
	v := &vendor{byRef: map[string]int{}, keyOf: map[string]string{}, refOf: map[string]string{}, delay: delay}
	v.Server = httptest.NewServer(http.HandlerFunc(v.serve))
	t.Cleanup(v.Close)
	return v
}

func (v *vendor) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var b struct {
		Ref  string `json:"ref"`
		Idem string `json:"idem"`
	}
	_ = json.Unmarshal(body, &b)
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		key = b.Idem
	}
	v.mu.Lock()
	v.byRef[b.Ref]++
	v.seq++
	n := v.seq
	if key != "" {
		// The vendor must see the slot's vendor key (docs/DESIGN.md, "The key
		// on the vendor hop"): never the client's key (the ref), the same one
		// on every attempt of a call, and one no other call shares.
		prev, seen := v.keyOf[b.Ref]
		owner, taken := v.refOf[key]
		if key == b.Ref || (seen && prev != key) || (taken && owner != b.Ref) {
			v.badKey++
		}
		v.keyOf[b.Ref] = key
		v.refOf[key] = b.Ref
	}
	if r.Header.Get("Authorization") != "Bearer "+vendorSecret {
		v.badAuth++
	}
	block := v.block
	v.mu.Unlock()
	if block != nil {
		block(b.Ref)
	}
	if v.delay > 0 {
		time.Sleep(v.delay)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"id":"obj_%d","path":%q}`, n, r.URL.Path)
}

func (v *vendor) count(ref string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.byRef[ref]
}

// sentKey is the key propagated with ref's requests ("" when none was).
func (v *vendor) sentKey(ref string) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.keyOf[ref]
}

func (v *vendor) total() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, c := range v.byRef {
		n += c
	}
	return n
}

func (v *vendor) setBlock(f func(ref string)) {
	v.mu.Lock()
	v.block = f
	v.mu.Unlock()
}

func (v *vendor) integrity(t testing.TB) {
	t.Helper()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.badKey != 0 || v.badAuth != 0 {
		t.Errorf("vendor: %d requests carried the client's key or not their slot's one vendor key, %d lacked the connection secret", v.badKey, v.badAuth)
	}
}

func TestMain(m *testing.M) { refservertest.Main(m) }

// gateway is one running refserver process; cmd and done are its
// Server's, under the names the tests use.
type gateway struct {
	base string
	cmd  *exec.Cmd
	done <-chan struct{}
	*refservertest.Server
}

// writeConfig writes cfg into the test's temporary directory.
func writeConfig(t testing.TB, cfg string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "gateway.json")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// startGateway starts a refserver on a free loopback port against redisURL.
// When the test ends it stops the gateway and checks that its log holds
// none of the test's secrets.
func startGateway(t testing.TB, cfgPath, redisURL string) *gateway {
	t.Helper()
	s := refservertest.Start(t, refservertest.Options{
		Args:    []string{"-config", cfgPath, "-redis", redisURL},
		Env:     []string{"PROOF_VENDOR_SECRET=" + vendorSecret},
		LogTail: 30,
		Stopped: func(logs string) {
			for _, secret := range []string{vendorSecret, apiKey, approverKey} {
				if strings.Contains(logs, secret) {
					t.Errorf("gateway log holds the secret %q", secret)
				}
			}
		},
	})
	return &gateway{base: s.Base, cmd: s.Cmd, done: s.Done(), Server: s}
}

// kill9 crashes the gateway: SIGKILL, nothing is flushed or finalized.
func (g *gateway) kill9(t testing.TB) {
	t.Helper()
	if err := g.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	<-g.Done()
}

// httpClient carries the raw JSON-RPC calls: enough idle connections for
// every concurrent caller, and no retry of its own (a POST is never retried
// by net/http).
var httpClient = &http.Client{
	Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second},
	Timeout:   30 * time.Second,
}

// reply is one tools/call answer over raw JSON-RPC.
type reply struct {
	httpStatus int
	transport  error // the request failed below HTTP (e.g. the gateway died)
	refusal    refservertest.RPCError
	refused    bool
	result     refservertest.Result
	body       []byte
}

func (r reply) text() string {
	if len(r.result.Content) == 0 {
		return ""
	}
	return r.result.Content[0].Text
}

func (r reply) String() string {
	switch {
	case r.transport != nil:
		return "transport error: " + r.transport.Error()
	case r.refused:
		return fmt.Sprintf("refused %s/%d: %s", r.refusal.Data.Reason, r.refusal.Data.Status, r.refusal.Message)
	}
	rc := r.result.Meta.Receipt
	return fmt.Sprintf("result %s attempts=%d replayed=%v text=%q", rc.Outcome, rc.AttemptCount, rc.Replayed, r.text())
}

// wireReceipt is the receipt as the wire carries it, decoded with the
// library's own type so a drift between the two shows up as a test failure.
type wireReceipt = receipt.Receipt

// callTool sends one tools/call as a raw JSON-RPC POST (refserver runs the
// SDK stateless, so no initialize is needed) with key as Idempotency-Key.
func callTool(ctx context.Context, base, tool, key string, args any) reply {
	c := refservertest.Client{Base: base, APIKey: apiKey, HTTP: httpClient}
	a := c.CallTool(ctx, refservertest.Request{Tool: tool, Key: key, Args: args})
	r := reply{httpStatus: a.HTTPStatus, transport: a.Err, result: a.Result, body: a.Body}
	if a.Error != nil {
		r.refused, r.refusal = true, *a.Error
	}
	return r
}

// getReceipt reads GET /v1/receipts/{key}?tool=NAME.
func getReceipt(t testing.TB, base, tool, key string) (int, wireReceipt, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/receipts/"+key+"?tool="+tool, nil)
	req.Header.Set("Authorization", "Bearer "+apiKey)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("GET receipt: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var rc wireReceipt
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &rc); err != nil {
			t.Fatalf("receipt %q: %v", raw, err)
		}
	}
	return resp.StatusCode, rc, raw
}

// figures are the numbers every test reports.
type figures struct {
	calls, duplicates, attemptMismatches, recordsLost int
	notes                                             []string
}

func (f *figures) note(format string, args ...any) {
	f.notes = append(f.notes, fmt.Sprintf(format, args...))
}

// report logs the figures in one greppable line and fails the test when
// one of the promises was broken.
func (f *figures) report(t testing.TB, start time.Time) {
	t.Helper()
	t.Logf("FIGURES %s: calls=%d duplicates=%d attempt_count_mismatches=%d records_lost=%d wall=%v %s",
		t.Name(), f.calls, f.duplicates, f.attemptMismatches, f.recordsLost, time.Since(start).Round(time.Millisecond), strings.Join(f.notes, " "))
	if f.duplicates != 0 || f.attemptMismatches != 0 || f.recordsLost != 0 {
		t.Errorf("promise broken: duplicates=%d attempt_count_mismatches=%d records_lost=%d", f.duplicates, f.attemptMismatches, f.recordsLost)
	}
}

// --- library-level harness ---------------------------------------------

// libSpecJSON is the header-binding tool the library-level tests call.
const libSpecJSON = `{"tool": "pay.charge", "idempotency": {"binding": "header", "header": "Idempotency-Key"},
  "status": {"accepted": [201], "retryable": [503]}}`

var libScope = idempotency.Scope{Workspace: workspace, Connection: "conn_v", Tool: "pay.charge"}

func libSpec(t testing.TB) effectspec.Spec {
	t.Helper()
	s, err := effectspec.Parse([]byte(libSpecJSON))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newClient connects rueidis to addrs without client-side caching. Its
// timeouts are short so that a dead node fails calls quickly.
func newClient(t testing.TB, addrs ...string) rueidis.Client {
	t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:      addrs,
		DisableCache:     true,
		ConnWriteTimeout: 2 * time.Second,
		Dialer:           net.Dialer{Timeout: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newStore(t testing.TB, c rueidis.Client, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := redisstore.New(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// countingStore wraps a Store and remembers which claims were answered
// "already applied" (a re-sent claim whose first send had run).
type countingStore struct {
	idempotency.Store
	mu      sync.Mutex
	applied map[idempotency.Key]int
	claimed map[idempotency.Key]int // claims answered claimed (acknowledged reservations)
}

func newCountingStore(s idempotency.Store) *countingStore {
	return &countingStore{Store: s, applied: map[idempotency.Key]int{}, claimed: map[idempotency.Key]int{}}
}

func (c *countingStore) Claim(ctx context.Context, req idempotency.ClaimRequest) (idempotency.ClaimResult, error) {
	res, err := c.Store.Claim(ctx, req)
	if err == nil {
		c.mu.Lock()
		if res.AlreadyApplied {
			c.applied[req.Key]++
		}
		if res.Status == idempotency.StatusClaimed {
			c.claimed[req.Key]++
		}
		c.mu.Unlock()
	}
	return res, err
}

func (c *countingStore) wasApplied(k idempotency.Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.applied[k] > 0
}

func (c *countingStore) acked() []idempotency.Key {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]idempotency.Key, 0, len(c.claimed))
	for k := range c.claimed {
		out = append(out, k)
	}
	return out
}

// libCall runs one call of the header-binding tool through o, with the key
// as the vendor-visible ref.
func libCall(ctx context.Context, o *retry.Orchestrator, target retry.Target, spec effectspec.Spec, key idempotency.Key) (retry.Answer, error) {
	args, _ := json.Marshal(map[string]any{"ref": key.String(), "amount": 100})
	route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{Connection: "conn_v", Provider: "proofvendor",
		URL: "http://vendor/charge", Credential: "PROOF_VENDOR_SECRET"})
	if err != nil {
		return retry.Answer{}, err
	}
	return o.Do(ctx, retry.Call{
		Scope: libScope, Key: key, KeySource: idempotency.KeySupplied, Arguments: args, Spec: spec,
		Route: route, Target: target,
	})
}
