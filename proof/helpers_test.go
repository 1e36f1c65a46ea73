package proof

import (
	"bufio"
	"bytes"
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

// refserverBin builds ./refserver once per test binary.
var refserverBin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "proof-refserver-")
	if err != nil {
		return "", err
	}
	buildDir = dir
	bin := filepath.Join(dir, "refserver")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/obol-gateway/obol/refserver").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build refserver: %v\n%s", err, out)
	}
	return bin, nil
})

var buildDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// gateway is one running refserver process.
type gateway struct {
	cmd    *exec.Cmd
	base   string
	stderr *syncBuffer
	done   chan struct{}
	err    error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
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
func startGateway(t testing.TB, cfgPath, redisURL string) *gateway {
	t.Helper()
	bin, err := refserverBin()
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{stderr: &syncBuffer{}, done: make(chan struct{})}
	g.cmd = exec.Command(bin, "-addr", "127.0.0.1:0", "-config", cfgPath, "-redis", redisURL)
	g.cmd.Env = append(os.Environ(), "PROOF_VENDOR_SECRET="+vendorSecret)
	g.cmd.Stderr = g.stderr
	out, err := g.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() { g.err = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		g.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-g.done:
		case <-time.After(15 * time.Second):
			g.cmd.Process.Kill()
			<-g.done
		}
		logs := g.stderr.String()
		for _, secret := range []string{vendorSecret, apiKey, approverKey} {
			if strings.Contains(logs, secret) {
				t.Errorf("gateway log holds the secret %q", secret)
			}
		}
		if t.Failed() {
			t.Logf("gateway %s stderr (tail):\n%s", g.base, tail(logs, 30))
		}
	})
	timeout := time.After(60 * time.Second)
	for g.base == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				<-g.done
				t.Fatalf("refserver exited before listening:\n%s", g.stderr.String())
			}
			if _, rest, found := strings.Cut(l, "listening on "); found {
				g.base, _, _ = strings.Cut(rest, " ")
			}
		case <-timeout:
			t.Fatalf("refserver did not start:\n%s", g.stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	return g
}

// kill9 crashes the gateway: SIGKILL, nothing is flushed or finalized.
func (g *gateway) kill9(t testing.TB) {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	<-g.done
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
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
	refusal    struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Data    struct {
			Reason string `json:"reason"`
			Status int    `json:"status"`
			Key    string `json:"idempotency_key"`
		} `json:"data"`
	}
	refused bool
	result  struct {
		IsError bool `json:"isError"`
		Content []struct{ Text string }
		Meta    struct {
			Key     string      `json:"dev.obol/idempotency-key"`
			Receipt wireReceipt `json:"dev.obol/receipt"`
		} `json:"_meta"`
	}
	body []byte
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
	params, _ := json.Marshal(map[string]any{"name": tool, "arguments": args})
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":` + string(params) + `}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/mcp", strings.NewReader(body))
	if err != nil {
		return reply{transport: err}
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Idempotency-Key", key)
	resp, err := httpClient.Do(req)
	if err != nil {
		return reply{transport: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	r := reply{httpStatus: resp.StatusCode, body: raw}
	if err != nil {
		r.transport = err
		return r
	}
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		r.transport = fmt.Errorf("HTTP %d, undecodable body %q: %w", resp.StatusCode, raw, err)
		return r
	}
	if len(env.Error) > 0 {
		r.refused = true
		if err := json.Unmarshal(env.Error, &r.refusal); err != nil {
			r.transport = fmt.Errorf("error %s: %w", env.Error, err)
		}
		return r
	}
	if err := json.Unmarshal(env.Result, &r.result); err != nil {
		r.transport = fmt.Errorf("result %s: %w", env.Result, err)
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
