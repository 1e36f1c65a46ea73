package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/obol-gateway/obol/receipt"
	"io"
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

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
)

const (
	e2eSecret   = "vendor_sk_e2e_never_log_me_4c1d"
	e2eKeyOne   = "ob_e2e_workspace_one"
	e2eKeyTwo   = "ob_e2e_workspace_two"
	e2eKeyAdmin = "ob_e2e_approver"
)

// e2eConfig points every tool at the test vendor ({{VENDOR}}).
const e2eConfig = `{
  "key_prefix": "e2e:", "lease": "10s", "environment": "production",
  "workspaces": [{"id": "ws_one", "api_keys": ["` + e2eKeyOne + `"]}, {"id": "ws_two", "api_keys": ["` + e2eKeyTwo + `"]}],
  "approver_keys": [{"name": "ops-e2e", "key": "` + e2eKeyAdmin + `"}],
  "connections": [{"id": "conn_v", "provider": "testvendor", "base_url": "{{VENDOR}}", "secret_env": "E2E_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "path": "/charge", "spec": {"tool": "pay.charge",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"},
      "status": {"accepted": [201], "definitely_rejected": [402], "retryable": [503]}}},
    {"connection": "conn_v", "path": "/slow", "spec": {"tool": "pay.slow",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/refund", "spec": {"tool": "pay.refund", "approval": "required",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/chat", "spec": {"tool": "chat.post",
      "idempotency": {"binding": "unsupported"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/mail-a", "spec": {"tool": "mail.a",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}},
    {"connection": "conn_v", "path": "/mail-b", "spec": {"tool": "mail.b",
      "idempotency": {"binding": "body_pointer", "pointer": "/idem"}, "status": {"accepted": [201]}}}
  ],
  "capabilities": [{"name": "cap.mail", "providers": ["mail.a", "mail.b"], "pin": "mail.a"}]
}`

// testVendor counts requests per path and per path and key, and checks the
// connection secret.
type testVendor struct {
	*httptest.Server
	mu      sync.Mutex
	byPath  map[string]int
	byKey   map[string]int
	badAuth int
	slowGot chan struct{} // a request reached /slow
	seq     int
}

func newTestVendor(t *testing.T) *testVendor {
	v := &testVendor{byPath: map[string]int{}, byKey: map[string]int{}, slowGot: make(chan struct{}, 64)}
	v.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		if key == "" {
			var b struct {
				Idem string `json:"idem"`
			}
			json.Unmarshal(body, &b)
			key = b.Idem
		}
		v.mu.Lock()
		v.byPath[r.URL.Path]++
		v.byKey[r.URL.Path+" "+key]++
		v.seq++
		n := v.seq
		if r.Header.Get("Authorization") != "Bearer "+e2eSecret {
			v.badAuth++
		}
		v.mu.Unlock()
		if r.URL.Path == "/slow" {
			v.slowGot <- struct{}{}
			time.Sleep(400 * time.Millisecond)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Set-Cookie", "session=vendor-secret-cookie")
		var want struct {
			Answer int `json:"answer"`
		}
		json.Unmarshal(body, &want)
		if want.Answer != 0 { // a call that asks for another answer gets it
			w.WriteHeader(want.Answer)
			return
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"obj_%d","path":%q,"args":%s}`, n, r.URL.Path, body)
	}))
	t.Cleanup(v.Close)
	return v
}

func (v *testVendor) count(path, key string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if key == "" {
		return v.byPath[path]
	}
	return v.byKey[path+" "+key]
}

func TestMain(m *testing.M) { refservertest.Main(m) }

// proc is a gateway under test: a refserver process the test started
// (Server is set), or one in this process (base only).
type proc struct {
	base string
	*refservertest.Server
}

type syncBuffer = refservertest.Buffer

// e2eDeployment is the deployment id (OBOL_DEPLOYMENT_ID) startRefserver
// gives a gateway whose configuration names none.
const e2eDeployment = "5d0c8e2a9b7f41c3a6e18f02d4b97c35"

// startRefserver runs the built refserver with args, the test vendor's
// secret in its environment, and stops it when the test ends. With -config
// and -redis it runs "refserver store init" first, as an operator does
// before a production fleet starts (a store that records a loss refuses
// it; the server then starts stopped), and a configuration without
// deployment_id gets e2eDeployment from the environment.
func startRefserver(t *testing.T, args ...string) *proc {
	t.Helper()
	env := []string{"E2E_VENDOR_SECRET=" + e2eSecret}
	cfg, redis := flagArg(args, "-config"), flagArg(args, "-redis")
	if cfg != "" {
		if raw, err := os.ReadFile(cfg); err != nil {
			t.Fatal(err)
		} else if !strings.Contains(string(raw), `"deployment_id"`) {
			env = append(env, "OBOL_DEPLOYMENT_ID="+e2eDeployment)
		}
	}
	if cfg != "" && redis != "" {
		cmd := exec.Command(refservertest.Build(t), "store", "init", "-config", cfg, "-redis", redis)
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil && !strings.Contains(string(out), "acknowledge") {
			t.Fatalf("refserver store init: %v\n%s", err, out)
		}
	}
	s := refservertest.Start(t, refservertest.Options{Args: args, Env: env})
	return &proc{base: s.Base, Server: s}
}

// flagArg is the value of flag name in args, or "".
func flagArg(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// headerTransport adds fixed headers to every request.
type headerTransport struct{ h http.Header }

func (ht headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range ht.h {
		r.Header[k] = v
	}
	return http.DefaultTransport.RoundTrip(r)
}

// session connects an MCP client that sends apiKey and, if not empty, key
// on every request.
func (p *proc) session(t *testing.T, apiKey, key string) *mcp.ClientSession {
	t.Helper()
	return newSession(t, p.base, apiKey, key)
}

func newSession(t *testing.T, base, apiKey, key string) *mcp.ClientSession {
	t.Helper()
	h := http.Header{"Authorization": {"Bearer " + apiKey}}
	if key != "" {
		h.Set("Idempotency-Key", key)
	}
	return sessionWith(t, base, h)
}

// wireReceipt is the receipt as the wire carries it, decoded with the
// library's own type so a drift between the two shows up as a test failure.
type wireReceipt = receipt.Receipt

// answer is a tools/call result or refusal, decoded.
type answer struct {
	res     *mcp.CallToolResult
	err     error
	refusal errorData
	rc      wireReceipt
	key     string
	text    string
	ticket  string
}

func call(t *testing.T, s *mcp.ClientSession, name string, args any, ticket string) answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	if ticket != "" {
		params.Meta = mcp.Meta{metaTicket: ticket}
	}
	res, err := s.CallTool(ctx, params)
	a := answer{res: res, err: err}
	if err != nil {
		var we *jsonrpc.Error
		if !errors.As(err, &we) {
			t.Fatalf("%s: error without JSON-RPC error data: %v", name, err)
		}
		if err := json.Unmarshal(we.Data, &a.refusal); err != nil {
			t.Fatalf("%s: error.data %s: %v", name, we.Data, err)
		}
		return a
	}
	b, _ := json.Marshal(res.Meta[metaReceipt])
	if err := json.Unmarshal(b, &a.rc); err != nil {
		t.Fatalf("receipt %s: %v", b, err)
	}
	a.key, _ = res.Meta[metaKey].(string)
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			a.text = tc.Text
		}
	}
	if ap, ok := res.Meta[metaApprove].(map[string]any); ok {
		a.ticket, _ = ap["ticket"].(string)
		if ap["status"] != "pending" {
			t.Errorf("approval status %v", ap["status"])
		}
	}
	return a
}

func (a answer) wantRefusal(t *testing.T, reason string, status int) {
	t.Helper()
	if a.err == nil {
		t.Fatalf("got a result (outcome %s), want refusal %s", a.rc.Outcome, reason)
	}
	if a.refusal.Reason != reason || a.refusal.Status != status {
		t.Fatalf("refusal %+v (%v), want %s/%d", a.refusal, a.err, reason, status)
	}
}

func (a answer) wantOutcome(t *testing.T, outcome string, replayed bool) {
	t.Helper()
	if a.err != nil {
		t.Fatalf("refused: %v", a.err)
	}
	if string(a.rc.Outcome) != outcome || a.rc.Replayed != replayed {
		t.Fatalf("outcome %s replayed %v, want %s replayed %v", a.rc.Outcome, a.rc.Replayed, outcome, replayed)
	}
}

// sent counts v's requests at path for ws_one's call of tool with clientKey, by
// the vendor_key its receipt shows (docs/DESIGN.md, "The key on the vendor
// hop"), after checking that the client's key itself never reached the vendor.
// A call with no record counts 0.
func (p *proc) sent(t *testing.T, v *testVendor, tool, path, clientKey string) int {
	t.Helper()
	if n := v.count(path, clientKey); n != 0 {
		t.Errorf("%s: the vendor received the client's key %d times", path, n)
	}
	code, m := p.post(t, "GET", "/v1/receipts/"+clientKey+"?tool="+tool, e2eKeyOne, "")
	if code == 404 {
		return 0
	}
	vk, _ := m["vendor_key"].(string)
	if code != 200 || vk == "" || vk == clientKey {
		t.Fatalf("receipt of %s: %d %v; want a vendor_key other than the client's key", clientKey, code, m)
	}
	return v.count(path, vk)
}

// post sends a /v1 request and decodes the JSON answer.
func (p *proc) post(t *testing.T, method, path, bearer, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s %s: %d %q", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m
}

func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	vendor := newTestVendor(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.json")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendor.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())

	charge := map[string]any{"amount": 1200, "currency": "usd"}

	t.Run("tools/list", func(t *testing.T) {
		s := p.session(t, e2eKeyOne, "")
		res, err := s.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		if len(names) != 7 || !strings.Contains(strings.Join(names, ","), "cap.mail") {
			t.Errorf("tools %v", names)
		}
	})

	k1 := idempotency.NewKey().String()
	t.Run("replay", func(t *testing.T) {
		s := p.session(t, e2eKeyOne, k1)
		first := call(t, s, "pay.charge", charge, "")
		first.wantOutcome(t, "accepted", false)
		if first.key != k1 || first.rc.IdempotencyKey != k1 || first.rc.KeySource != "supplied" || first.rc.AttemptCount != 1 ||
			first.rc.Status != 201 || first.rc.Workspace != "ws_one" || first.rc.Binding != "header" || first.rc.Propagation != "header" {
			t.Errorf("first receipt %+v key %s", first.rc, first.key)
		}
		if first.res.StructuredContent == nil || !strings.Contains(first.text, `"amount":1200`) {
			t.Errorf("content %q structured %v", first.text, first.res.StructuredContent)
		}
		again := call(t, s, "pay.charge", map[string]any{"currency": "usd", "amount": 1200}, "") // key order does not matter
		again.wantOutcome(t, "accepted", true)
		if again.text != first.text || again.rc.AttemptCount != 1 || again.rc.RequestHash != first.rc.RequestHash {
			t.Errorf("replay differs: %q vs %q, receipt %+v", again.text, first.text, again.rc)
		}
		if n := p.sent(t, vendor, "pay.charge", "/charge", k1); n != 1 {
			t.Errorf("vendor saw %d requests for the key, want 1", n)
		}
	})

	t.Run("request_mismatch", func(t *testing.T) {
		s := p.session(t, e2eKeyOne, k1)
		call(t, s, "pay.charge", map[string]any{"amount": 999, "currency": "usd"}, "").wantRefusal(t, "request_mismatch", 422)
		if n := p.sent(t, vendor, "pay.charge", "/charge", k1); n != 1 {
			t.Errorf("vendor saw %d requests for the key, want 1", n)
		}
	})

	t.Run("malformed key is HTTP 400", func(t *testing.T) {
		before := vendor.count("/charge", "")
		for _, hv := range [][]string{{"idt_nothex"}, {k1, k1}} {
			resp, body, err := (refservertest.Client{Base: p.base, APIKey: e2eKeyOne}).Post(context.Background(), strings.NewReader(
				`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay.charge","arguments":{"amount":1}}}`),
				func(req *http.Request) { req.Header["Idempotency-Key"] = hv })
			if resp == nil {
				t.Fatal(err)
			}
			var m struct {
				Error struct {
					Data errorData `json:"data"`
				} `json:"error"`
			}
			json.Unmarshal(body, &m)
			if resp.StatusCode != 400 || m.Error.Data.Reason != "malformed_key" || resp.Header.Get("Idempotency-Key") != "" {
				t.Errorf("%q: %d %s", hv, resp.StatusCode, body)
			}
		}
		// The SDK client sees the same refusal as a JSON-RPC error.
		h := http.Header{"Authorization": {"Bearer " + e2eKeyOne}, "Idempotency-Key": {"bogus"}}
		client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
		_, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: p.base + "/mcp",
			HTTPClient: &http.Client{Transport: headerTransport{h}}, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
		var we *jsonrpc.Error
		if !errors.As(err, &we) || !strings.Contains(string(we.Data), `"malformed_key"`) {
			t.Errorf("client connect with a malformed key: %v", err)
		}
		if after := vendor.count("/charge", ""); after != before {
			t.Errorf("vendor saw %d new requests", after-before)
		}
	})

	t.Run("minted key", func(t *testing.T) {
		s := p.session(t, e2eKeyOne, "")
		a := call(t, s, "pay.charge", map[string]any{"amount": 5}, "")
		a.wantOutcome(t, "accepted", false)
		if _, err := idempotency.ParseKey(a.key); err != nil || a.rc.KeySource != "minted" || p.sent(t, vendor, "pay.charge", "/charge", a.key) != 1 {
			t.Errorf("minted key %q source %s", a.key, a.rc.KeySource)
		}
	})

	t.Run("16 concurrent calls reach the vendor once", func(t *testing.T) {
		k := idempotency.NewKey().String()
		sessions := make([]*mcp.ClientSession, 16)
		for i := range sessions {
			sessions[i] = p.session(t, e2eKeyOne, k)
		}
		answers := make([]answer, len(sessions))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, s := range sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				answers[i] = call(t, s, "pay.slow", map[string]any{"n": 1}, "")
			}()
		}
		close(start)
		wg.Wait()
		fresh, replays, inProgress := 0, 0, 0
		for _, a := range answers {
			switch {
			case a.err == nil && a.rc.Outcome == "accepted" && !a.rc.Replayed:
				fresh++
			case a.err == nil && a.rc.Outcome == "accepted":
				replays++
			case a.refusal.Reason == "in_progress" && a.refusal.Status == 409:
				inProgress++
				// The hint runs to the attempt's deadline (30s by default),
				// not to the end of a 10s lease its owner renews.
				if a.refusal.RetryAfterMS == nil || *a.refusal.RetryAfterMS <= 10_000 {
					t.Errorf("in_progress refusal without a retry_after_ms to the attempt's deadline: %+v", a.refusal)
				}
			default:
				t.Errorf("unexpected answer: %+v %v", a.rc, a.err)
			}
		}
		if fresh != 1 || fresh+replays+inProgress != 16 {
			t.Errorf("fresh %d, replays %d, in_progress %d", fresh, replays, inProgress)
		}
		if n := p.sent(t, vendor, "pay.slow", "/slow", k); n != 1 {
			t.Errorf("vendor saw %d requests for the key, want 1", n)
		}
		t.Logf("fresh %d, replays %d, in_progress %d", fresh, replays, inProgress)
	})

	t.Run("approval", func(t *testing.T) {
		k := idempotency.NewKey().String()
		refund := map[string]any{"charge": "obj_1", "amount": 500}
		s := p.session(t, e2eKeyOne, k)
		held := call(t, s, "pay.refund", refund, "")
		held.wantOutcome(t, "held", false)
		if !idempotency.ValidTicketID(held.ticket) || held.rc.AttemptCount != 0 {
			t.Fatalf("held: ticket %q receipt %+v", held.ticket, held.rc)
		}
		// Before the decision, the same call answers the same ticket.
		if again := call(t, s, "pay.refund", refund, held.ticket); again.ticket != held.ticket || again.rc.Outcome != "held" {
			t.Errorf("pending resume: %+v ticket %s err %v", again.rc, again.ticket, again.err)
		}
		// Another key on the ticket is denied, never reconciled.
		other := p.session(t, e2eKeyOne, idempotency.NewKey().String())
		call(t, other, "pay.refund", refund, held.ticket).wantRefusal(t, "approval_key_mismatch", 422)

		if code, m := p.post(t, "POST", "/v1/approvals/"+held.ticket+"/approve", e2eKeyOne, ""); code != 401 {
			t.Errorf("approve with a workspace key: %d %v", code, m)
		}
		if n := vendor.count("/refund", ""); n != 0 {
			t.Fatalf("vendor saw %d refunds before approval", n)
		}
		code, m := p.post(t, "POST", "/v1/approvals/"+held.ticket+"/approve", e2eKeyAdmin, "")
		if code != 200 || m["status"] != "approved" || m["idempotency_key"] != k {
			t.Fatalf("approve: %d %v", code, m)
		}
		// A resume after approval with another key is still a mismatch.
		call(t, other, "pay.refund", refund, held.ticket).wantRefusal(t, "approval_key_mismatch", 422)
		// A resume with no key uses the ticket's key.
		nokey := p.session(t, e2eKeyOne, "")
		done := call(t, nokey, "pay.refund", refund, held.ticket)
		done.wantOutcome(t, "accepted", false)
		if done.key != k || done.rc.AttemptCount != 1 {
			t.Errorf("resume: key %s receipt %+v", done.key, done.rc)
		}
		call(t, s, "pay.refund", refund, held.ticket).wantOutcome(t, "accepted", true)
		if n := p.sent(t, vendor, "pay.refund", "/refund", k); n != 1 || vendor.count("/refund", "") != 1 {
			t.Errorf("vendor saw %d refunds for the key (%d in all), want 1", n, vendor.count("/refund", ""))
		}
		// Deny after approve is refused; the record is untouched.
		if code, m := p.post(t, "POST", "/v1/approvals/"+held.ticket+"/deny", e2eKeyAdmin, ""); code == 200 {
			t.Errorf("deny after approve: %d %v", code, m)
		}
	})

	t.Run("deny", func(t *testing.T) {
		k := idempotency.NewKey().String()
		s := p.session(t, e2eKeyOne, k)
		held := call(t, s, "pay.refund", map[string]any{"amount": 1}, "")
		if code, m := p.post(t, "POST", "/v1/approvals/"+held.ticket+"/deny", e2eKeyAdmin, ""); code != 200 || m["status"] != "denied" {
			t.Fatalf("deny: %d %v", code, m)
		}
		call(t, s, "pay.refund", map[string]any{"amount": 1}, held.ticket).wantRefusal(t, "denied", 403)
		if n := p.sent(t, vendor, "pay.refund", "/refund", k); n != 0 {
			t.Errorf("vendor saw %d requests for a denied call", n)
		}
	})

	t.Run("receipts are scoped to the workspace", func(t *testing.T) {
		code, m := p.post(t, "GET", "/v1/receipts/"+k1+"?tool=pay.charge", e2eKeyOne, "")
		if code != 200 || m["idempotency_key"] != k1 || m["outcome"] != "accepted" || m["attempt_count"] != 1.0 || m["workspace"] != "ws_one" {
			t.Errorf("own receipt: %d %v", code, m)
		}
		if code, m := p.post(t, "GET", "/v1/receipts/"+k1+"?tool=pay.charge", e2eKeyTwo, ""); code != 404 || m["reason"] != "not_found" {
			t.Errorf("another workspace: %d %v", code, m)
		}
		if code, _ := p.post(t, "GET", "/v1/receipts/"+k1+"?tool=pay.charge", "", ""); code != 401 {
			t.Errorf("no key: %d", code)
		}
		if code, m := p.post(t, "GET", "/v1/receipts/idt_bad?tool=pay.charge", e2eKeyOne, ""); code != 400 || m["reason"] != "malformed_key" {
			t.Errorf("bad key: %d %v", code, m)
		}
	})

	t.Run("a completed capability call replays after a pin change", func(t *testing.T) {
		k := idempotency.NewKey().String()
		mail := map[string]any{"to": "ada@example.com"}
		s := p.session(t, e2eKeyOne, k)
		first := call(t, s, "cap.mail", mail, "")
		first.wantOutcome(t, "accepted", false)
		if first.rc.Tool != "cap.mail" || first.rc.Route.Connection != "conn_v" || first.rc.Route.Tool != "mail.a" ||
			p.sent(t, vendor, "cap.mail", "/mail-a", k) != 1 {
			t.Fatalf("first: %+v", first.rc)
		}
		if code, m := p.post(t, "POST", "/v1/capabilities/cap.mail/pin", e2eKeyAdmin, `{"provider": "mail.b"}`); code != 200 || m["pin"] != "mail.b" {
			t.Fatalf("pin: %d %v", code, m)
		}
		// The completed call replays its stored result and original route,
		// whatever the pin says now; nothing is sent.
		again := call(t, s, "cap.mail", mail, "")
		again.wantOutcome(t, "accepted", true)
		if again.text != first.text || again.rc.Route != first.rc.Route || again.rc.Propagation != "header" {
			t.Errorf("replay after the pin change: %+v, want the original route %+v", again.rc, first.rc.Route)
		}
		if n := vendor.count("/mail-b", ""); n != 0 {
			t.Errorf("the new provider saw %d requests", n)
		}
		// A new key goes to the new provider, with the key in the body.
		k2 := idempotency.NewKey().String()
		call(t, p.session(t, e2eKeyOne, k2), "cap.mail", mail, "").wantOutcome(t, "accepted", false)
		if n := p.sent(t, vendor, "cap.mail", "/mail-b", k2); n != 1 {
			t.Errorf("new provider saw %d requests for a new key", n)
		}
		// An unknown call whose route moved is a destination_conflict: its
		// retry would go to another vendor. Nothing is sent.
		k3 := idempotency.NewKey().String()
		fail := map[string]any{"to": "bob@example.com", "answer": 500}
		call(t, p.session(t, e2eKeyOne, k3), "cap.mail", fail, "").wantOutcome(t, "unknown", false)
		if code, m := p.post(t, "POST", "/v1/capabilities/cap.mail/pin", e2eKeyAdmin, `{"provider": "mail.a"}`); code != 200 || m["pin"] != "mail.a" {
			t.Fatalf("pin back: %d %v", code, m)
		}
		before := vendor.count("/mail-a", "") + vendor.count("/mail-b", "")
		call(t, p.session(t, e2eKeyOne, k3), "cap.mail", fail, "").wantRefusal(t, "destination_conflict", 409)
		if after := vendor.count("/mail-a", "") + vendor.count("/mail-b", ""); after != before {
			t.Errorf("a destination_conflict sent %d requests", after-before)
		}
		// Pinned back: the first call still replays with its route.
		if back := call(t, s, "cap.mail", mail, ""); back.err != nil || !back.rc.Replayed || back.rc.Route != first.rc.Route {
			t.Errorf("replay after pinning back: %+v %v", back.rc, back.err)
		}
		// Each receipt names the provider that served it (mail.a propagates
		// by header, mail.b by body pointer), whatever the pin is now.
		for key, want := range map[string][2]string{k: {"header", "mail.a"}, k2: {"body_pointer", "mail.b"}} {
			code, m := p.post(t, "GET", "/v1/receipts/"+key+"?tool=cap.mail", e2eKeyOne, "")
			route, _ := m["route"].(map[string]any)
			if code != 200 || m["propagation"] != want[0] || m["tool"] != "cap.mail" || route["tool"] != want[1] {
				t.Errorf("capability receipt: %d %v, want propagation %s through %s", code, m, want[0], want[1])
			}
		}
		if code, _ := p.post(t, "POST", "/v1/capabilities/cap.mail/pin", e2eKeyAdmin, `{"provider": "pay.charge"}`); code != 400 {
			t.Errorf("pin to a non-provider: %d", code)
		}
	})

	t.Run("refusals touch nothing", func(t *testing.T) {
		k := idempotency.NewKey().String()
		s := p.session(t, e2eKeyOne, k)
		call(t, s, "chat.post", map[string]any{"text": "hi"}, "").wantRefusal(t, "policy_denied", 403)
		call(t, s, "no.such", map[string]any{}, "").wantRefusal(t, "unknown_tool", 404)
		call(t, s, "pay.charge", map[string]any{"x": strings.Repeat("a", maxArgBytes)}, "").wantRefusal(t, "arguments_too_large", 413)
		call(t, s, "pay.charge", charge, "apt_nothex").wantRefusal(t, "invalid_request", 400)
		call(t, s, "pay.charge", charge, "apt_00000000000000000000000000000000").wantRefusal(t, "not_found", 404)
		if n := vendor.count("/chat", ""); n != 0 {
			t.Errorf("vendor saw %d chat requests", n)
		}
		if code, m := p.post(t, "GET", "/v1/receipts/"+k+"?tool=pay.charge", e2eKeyOne, ""); code != 404 {
			t.Errorf("a refused call left a record: %d %v", code, m)
		}
		// The key is still free for a real call.
		call(t, s, "pay.charge", charge, "").wantOutcome(t, "accepted", false)
	})

	t.Run("metrics and health", func(t *testing.T) {
		resp, err := http.Get(p.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, want := range []string{`obol_claims_total{result="claimed"}`, `obol_claims_total{result="replay"}`,
			`obol_attempts_total{phase="responded"}`, `obol_outcomes_total{outcome="accepted"}`, "obol_replays_total",
			`obol_refusals_total{reason="request_mismatch"}`, "obol_call_duration_seconds_bucket"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		// Every series of the store histogram exists from the start; the
		// calls above must have been observed in the ones on their path.
		for _, series := range []string{`obol_store_duration_seconds_count{op="claim"} `, `obol_store_duration_seconds_count{op="finalize"} `} {
			_, rest, ok := strings.Cut(string(b), series)
			n, _, _ := strings.Cut(rest, "\n")
			if !ok || n == "0" {
				t.Errorf("metrics: %s= %q, want calls observed", series, n)
			}
		}
		if code, m := p.post(t, "GET", "/healthz", "", ""); code != 200 || m["status"] != "ok" {
			t.Errorf("healthz: %d %v", code, m)
		}
	})

	t.Run("graceful shutdown finishes an in-flight call", func(t *testing.T) {
		k := idempotency.NewKey().String()
		s := p.session(t, e2eKeyOne, k)
		for len(vendor.slowGot) > 0 {
			<-vendor.slowGot
		}
		got := make(chan answer, 1)
		go func() { got <- call(t, s, "pay.slow", map[string]any{"n": 2}, "") }()
		select {
		case <-vendor.slowGot:
		case <-time.After(10 * time.Second):
			t.Fatal("the call never reached the vendor")
		}
		if err := p.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		a := <-got
		a.wantOutcome(t, "accepted", false)
		select {
		case <-p.Done():
			if err := p.Err(); err != nil {
				t.Errorf("exit: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("refserver did not exit after SIGTERM")
		}
	})

	logs := p.Log()
	for _, secret := range []string{e2eSecret, e2eKeyOne, e2eKeyTwo, e2eKeyAdmin, "vendor-secret-cookie"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the logs hold %q", secret)
		}
	}
	if !strings.Contains(logs, `msg=tools/call`) {
		t.Errorf("no call logs:\n%s", logs)
	}
}

// TestEndToEndClusterTwoGateways runs two refserver processes on one Redis
// Cluster (a comma-separated seed list): a call through one is a replay
// through the other, concurrent calls through both reach the vendor once, and
// a capability pin posted to one holds on the other and across a restart.
func TestEndToEndClusterTwoGateways(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a Redis Cluster")
	}
	cluster := redistest.StartCluster(t, 3, 0)
	vendor := newTestVendor(t)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendor.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	seeds := "redis://" + strings.Join(cluster.Addrs(), ",")
	gw := []*proc{
		startRefserver(t, "-config", cfgPath, "-redis", seeds),
		startRefserver(t, "-config", cfgPath, "-redis", seeds),
	}

	k := idempotency.NewKey().String()
	charge := map[string]any{"amount": 42}
	call(t, gw[0].session(t, e2eKeyOne, k), "pay.charge", charge, "").wantOutcome(t, "accepted", false)
	call(t, gw[1].session(t, e2eKeyOne, k), "pay.charge", charge, "").wantOutcome(t, "accepted", true)
	call(t, gw[1].session(t, e2eKeyOne, k), "pay.charge", map[string]any{"amount": 43}, "").wantRefusal(t, "request_mismatch", 422)
	if n := gw[0].sent(t, vendor, "pay.charge", "/charge", k); n != 1 {
		t.Errorf("vendor saw %d requests, want 1", n)
	}

	k2 := idempotency.NewKey().String()
	var sessions []*mcp.ClientSession
	for i := 0; i < 8; i++ {
		sessions = append(sessions, gw[i%2].session(t, e2eKeyOne, k2))
	}
	var wg sync.WaitGroup
	answers := make([]answer, len(sessions))
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = call(t, s, "pay.slow", map[string]any{"n": 3}, "")
		}()
	}
	wg.Wait()
	fresh := 0
	for _, a := range answers {
		switch {
		case a.err == nil && a.rc.Outcome == "accepted":
			if !a.rc.Replayed {
				fresh++
			}
		case a.refusal.Reason != "in_progress":
			t.Errorf("unexpected answer %+v %v", a.rc, a.err)
		}
	}
	if n := gw[0].sent(t, vendor, "pay.slow", "/slow", k2); n != 1 || fresh != 1 {
		t.Errorf("vendor saw %d requests, %d fresh answers; want 1 and 1", n, fresh)
	}
	// A receipt is readable through either gateway.
	if code, m := gw[1].post(t, "GET", "/v1/receipts/"+k+"?tool=pay.charge", e2eKeyOne, ""); code != 200 || m["attempt_count"] != 1.0 {
		t.Errorf("receipt through the other gateway: %d %v", code, m)
	}

	// A pin posted to one gateway routes new keys through the other.
	mail := map[string]any{"to": "ada@example.com"}
	k3 := idempotency.NewKey().String()
	call(t, gw[0].session(t, e2eKeyOne, k3), "cap.mail", mail, "").wantOutcome(t, "accepted", false)
	if code, m := gw[0].post(t, "POST", "/v1/capabilities/cap.mail/pin", e2eKeyAdmin, `{"provider": "mail.b"}`); code != 200 || m["previous"] != "mail.a" {
		t.Fatalf("pin through gateway 0: %d %v", code, m)
	}
	k4 := idempotency.NewKey().String()
	call(t, gw[1].session(t, e2eKeyOne, k4), "cap.mail", mail, "").wantOutcome(t, "accepted", false)
	if n := gw[0].sent(t, vendor, "cap.mail", "/mail-b", k4); n != 1 {
		t.Errorf("a new key through gateway 1: mail.b saw %d requests, want 1", n)
	}
	for i, g := range gw {
		// A completed call replays through every gateway, whatever the pin.
		if a := call(t, g.session(t, e2eKeyOne, k3), "cap.mail", mail, ""); a.err != nil || !a.rc.Replayed || a.rc.Route.Tool != "mail.a" {
			t.Errorf("existing key through gateway %d: %+v %v, want a replay through mail.a", i, a.rc, a.err)
		}
		if na, nb := gw[0].sent(t, vendor, "cap.mail", "/mail-a", k3), gw[0].sent(t, vendor, "cap.mail", "/mail-b", k3); na != 1 || nb != 0 {
			t.Errorf("existing key through gateway %d: mail.a %d, mail.b %d requests; want 1 and 0", i, na, nb)
		}
	}

	// A restarted gateway keeps the stored pin, not its configured one.
	gw[1].stop(t)
	restarted := startRefserver(t, "-config", cfgPath, "-redis", seeds)
	k5 := idempotency.NewKey().String()
	call(t, restarted.session(t, e2eKeyOne, k5), "cap.mail", mail, "").wantOutcome(t, "accepted", false)
	if na, nb := restarted.sent(t, vendor, "cap.mail", "/mail-a", k5), restarted.sent(t, vendor, "cap.mail", "/mail-b", k5); na != 0 || nb != 1 {
		t.Errorf("after a restart: mail.a %d, mail.b %d requests; want 0 and 1", na, nb)
	}
	if !strings.Contains(restarted.Log(), "capability pin kept from the store") {
		t.Errorf("the restarted gateway did not log the kept pin:\n%s", restarted.Log())
	}
}
