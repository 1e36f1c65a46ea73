package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/mcpgateway/admin"
	"github.com/obol-gateway/obol/retry"
)

const (
	approverKey = "ob_approver_0123456789"
	keyOne      = "ob_live_one_0123456789"
	keyTwo      = "ob_live_two_0123456789"
)

// fixture is an admin handler on a store on a redis-server, with an orchestrator
// to make calls of two tools: pay.charge (its vendor answers 500, so a
// call ends unknown) and pay.refund (held for approval).
type fixture struct {
	t     *testing.T
	store *redisstore.Store
	orch  *retry.Orchestrator
	specs map[string]effectspec.Spec
	url   string
	api   admin.Client

	mu       sync.Mutex
	refusals map[string]int
	settled  map[effectspec.Outcome]int
	pins     map[string]string
}

// newStore is a store on the Redis at addr, and what closes its client.
func newStore(addr string) (*redisstore.Store, func(), error) {
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, nil, err
	}
	store, err := redisstore.New(context.Background(), client, redisstore.Options{SkipEvictionCheck: true, ReadTimeout: time.Minute})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return store, client.Close, nil
}

func newFixture(t *testing.T, edit func(*admin.Config)) *fixture {
	t.Helper()
	// A real Redis: a listing reads every slot's bucket (16384, pipelined),
	// which miniredis answers slowly under the race detector.
	store, closeStore, err := newStore(redistest.Start(t).Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	f := &fixture{t: t, store: store, orch: &retry.Orchestrator{Store: store}, specs: map[string]effectspec.Spec{},
		refusals: map[string]int{}, settled: map[effectspec.Outcome]int{}, pins: map[string]string{"cap.pay": "pay.charge"}}
	for _, raw := range []string{
		`{"tool": "pay.charge", "effect": "write", "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}`,
		`{"tool": "pay.refund", "effect": "write", "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}, "approval": "required"}`,
	} {
		spec, err := effectspec.Parse([]byte(raw))
		if err != nil {
			t.Fatal(err)
		}
		f.specs[spec.Tool] = spec
	}
	cfg := admin.Config{
		// Generous: a listing reads every slot's bucket, slowly on a
		// loaded machine under the race detector.
		StoreTimeout: time.Minute,
		Store:        store,
		Approver:     func(tok string) (string, bool) { return "ops-oncall", tok == approverKey },
		Workspace: func(tok string) (string, bool) {
			ws, ok := map[string]string{keyOne: "ws_one", keyTwo: "ws_two"}[tok]
			return ws, ok
		},
		Workspaces: []string{"ws_one", "ws_two"},
		Scope: func(ws, name string) (idempotency.Scope, bool) {
			_, ok := f.specs[name]
			return idempotency.Scope{Workspace: ws, Connection: "conn_pay", Tool: name}, ok
		},
		Providers: func(c string) ([]string, bool) {
			return []string{"pay.charge", "pay.refund"}, c == "cap.pay"
		},
		SetPin: func(_ context.Context, c, p string) (string, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			prev := f.pins[c]
			f.pins[c] = p
			return prev, nil
		},
		Redact: func(s string) string { return strings.ReplaceAll(s, "sk_live_4242", "[redacted]") },
		OnRefusal: func(r string) {
			f.mu.Lock()
			f.refusals[r]++
			f.mu.Unlock()
		},
		OnSettle: func(o effectspec.Outcome) {
			f.mu.Lock()
			f.settled[o]++
			f.mu.Unlock()
		},
	}
	if edit != nil {
		edit(&cfg)
	}
	h, err := admin.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	f.api = admin.Client{BaseURL: srv.URL, Key: approverKey}
	return f
}

// call makes one call of tool in ws; its vendor answers status.
func (f *fixture) call(ws, tool string, status int) retry.Answer {
	f.t.Helper()
	spec := f.specs[tool]
	target := retry.TargetFunc(func(context.Context, retry.Attempt) retry.Result {
		return retry.Result{Phase: retry.Responded, Status: status, Body: []byte(`{}`)}
	})
	route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{Connection: "conn_pay", Provider: "pay",
		URL: "https://pay.example/v1/" + tool, Credential: idempotency.NoCredential})
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := f.orch.Do(context.Background(), retry.Call{Scope: idempotency.Scope{Workspace: ws, Connection: "conn_pay", Tool: tool},
		Key: idempotency.NewKey(), KeySource: idempotency.KeyMinted, Arguments: json.RawMessage(`{"amount":1}`),
		Spec: spec, Route: route, Target: target})
	if err != nil && out.Ticket == "" {
		f.t.Fatalf("call %s: %v", tool, err)
	}
	if want := map[int]string{500: "unknown", 201: "held"}[status]; string(out.Receipt.Outcome) != want {
		f.t.Fatalf("call %s: outcome %s, want %s", tool, out.Receipt.Outcome, want)
	}
	return out
}

// send sends one raw request and decodes its JSON answer.
func (f *fixture) send(method, path, bearer, body string) (int, map[string]any) {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

func reasonOf(err error) string {
	var e *admin.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// TestSettleUnknownCall: an unknown call is listed for an approver and
// settled once through the Client, under a compare-and-set on its attempt
// count; workspace keys can neither list nor settle, bad bodies change
// nothing and quote no value, the note is redacted, the settle is counted.
func TestSettleUnknownCall(t *testing.T) {
	f := newFixture(t, nil)
	out := f.call("ws_one", "pay.charge", 500)
	if out.Receipt.Outcome != "unknown" {
		t.Fatalf("outcome %s, want unknown", out.Receipt.Outcome)
	}
	ctx := context.Background()
	page, err := f.api.ListUnknown(ctx, admin.ListRequest{Workspace: "ws_one"})
	if err != nil || len(page.Unknown) != 1 || page.Unknown[0].IdempotencyKey != out.Key.String() || page.Cursor != "" {
		t.Fatalf("list: %v %+v", err, page)
	}
	listed := page.Unknown[0]
	if page, err := f.api.ListUnknown(ctx, admin.ListRequest{Workspace: "ws_two"}); err != nil || len(page.Unknown) != 0 {
		t.Fatalf("ws_two lists %+v (%v)", page, err)
	}
	// A tool no longer configured is left out: its receipts endpoint could
	// not name it either. Configured again, the record is listed again.
	spec := f.specs["pay.charge"]
	delete(f.specs, "pay.charge")
	if page, err := f.api.ListUnknown(ctx, admin.ListRequest{Workspace: "ws_one"}); err != nil || len(page.Unknown) != 0 {
		t.Fatalf("unconfigured tool: list %v %+v, want it left out", err, page)
	}
	f.specs["pay.charge"] = spec
	for _, c := range []struct {
		bearer string
		code   int
	}{{keyOne, 403}, {"", 401}, {"ob_nobody", 401}} {
		if code, m := f.send("GET", "/v1/unknown?workspace=ws_one", c.bearer, ""); code != c.code {
			t.Errorf("list with %q: %d %v, want %d", c.bearer, code, m, c.code)
		}
	}
	for _, q := range []string{"workspace=", "workspace=ws_nope", "limit=0", "limit=x", "workspace=ws_one&cursor=zz"} {
		if code, m := f.send("GET", "/v1/unknown?"+q, approverKey, ""); code != 400 || m["reason"] != "invalid_request" {
			t.Errorf("list ?%s: %d %v", q, code, m)
		}
	}
	resolve := "/v1/receipts/" + out.Key.String() + "/resolve?tool=pay.charge&workspace=ws_one"
	for _, body := range []string{
		`{"outcome":"accepted","outcome":"definitely_rejected","attempt_count":1}`,
		`{"outcome":"accepted","Outcome":"accepted","attempt_count":1}`,
		`{"outcome":"accepted","attempt_count":1,"by":"sk_live_4242"}`,
		`{"outcome":"accepted","attempt_count":1} {}`,
		`{"outcome":"unknown","attempt_count":1,"note":"sk_live_4242"}`,
		`{"outcome":"in_progress","attempt_count":1}`,
		`{"note":"sk_live_4242","attempt_count":1}`,
		`{"outcome":"accepted","attempt_count":1,"note":"sk_live_4242\u0000"}`,
		`{"outcome":"accepted","attempt_count":1,"note":"sk_live_4242\nforged"}`,
		`{"outcome":"accepted","attempt_count":1,"note":"` + strings.Repeat("n", idempotency.MaxNoteBytes+1) + `"}`,
		`{"outcome":"accepted","attempt_count":0}`,
		`{"outcome":"accepted","note":"sk_live_4242"}`, // no attempt_count
		`{"outcome":"accepted","attempt_count":null}`,
		`{"outcome":"accepted","attempt_count":1,"note":"paid \u202egnp.exe"}`,
		`{"outcome":"accepted","attempt_count":1,"note":"paid\u2028forged line"}`,
		`{"outcome":"accepted","attempt_count":1,"note":"paid\u200b4242"}`,
		`{"outcome":"accepted","attempt_count":1,"note":"paid\ufeff"}`,
		``,
	} {
		code, m := f.send("POST", resolve, approverKey, body)
		if code != 400 || m["reason"] != "invalid_request" {
			t.Errorf("%.60s: %d %v", body, code, m)
		}
		if msg, _ := m["message"].(string); strings.Contains(msg, "4242") {
			t.Errorf("%.60s: the refusal quotes a value: %q", body, msg)
		}
	}
	if code, m := f.send("POST", resolve, keyOne, `{"outcome":"accepted","attempt_count":1}`); code != 403 {
		t.Errorf("settle with a workspace key: %d %v", code, m)
	}
	if page, err := f.api.ListUnknown(ctx, admin.ListRequest{Workspace: "ws_one"}); err != nil || len(page.Unknown) != 1 {
		t.Fatalf("after refused settles, listed %+v (%v)", page, err)
	}
	stale := listed.AttemptCount + 1
	if _, err := f.api.Settle(ctx, "ws_one", "pay.charge", out.Key.String(), admin.Resolve{Outcome: "accepted", AttemptCount: &stale}); reasonOf(err) != "stale" {
		t.Fatalf("stale settle: %v", err)
	}
	if _, err := f.api.Settle(ctx, "ws_two", "pay.charge", out.Key.String(), admin.Resolve{Outcome: "accepted", AttemptCount: &listed.AttemptCount}); reasonOf(err) != "not_found" {
		t.Errorf("settle in another workspace: %v", err)
	}
	if _, err := f.api.Settle(ctx, "ws_one", "nope", out.Key.String(), admin.Resolve{Outcome: "accepted", AttemptCount: &listed.AttemptCount}); reasonOf(err) != "unknown_tool" {
		t.Errorf("settle of an unknown tool: %v", err)
	}
	rc, err := f.api.Settle(ctx, "ws_one", "pay.charge", out.Key.String(),
		admin.Resolve{Outcome: "accepted", AttemptCount: &listed.AttemptCount, Note: "vendor says ch_1, sk_live_4242"})
	if err != nil || rc.Outcome != "accepted" || rc.Resolution == nil {
		t.Fatalf("settle: %v %+v", err, rc)
	}
	if r := rc.Resolution; r.By != "ops-oncall" || r.Note != "vendor says ch_1, [redacted]" {
		t.Errorf("resolution %+v", r)
	}
	if _, err := f.api.Settle(ctx, "ws_one", "pay.charge", out.Key.String(), admin.Resolve{Outcome: "accepted", AttemptCount: &listed.AttemptCount}); reasonOf(err) != "not_unknown" {
		t.Errorf("second settle: %v", err)
	}
	if page, err := f.api.ListUnknown(ctx, admin.ListRequest{}); err != nil || len(page.Unknown) != 0 {
		t.Errorf("after the settle, listed %+v (%v)", page, err)
	}
	if code, m := f.send("GET", "/v1/receipts/"+out.Key.String()+"?tool=pay.charge", keyOne, ""); code != 200 || m["resolution"] == nil {
		t.Errorf("receipt after the settle: %d %v", code, m)
	}
	for _, c := range []struct{ bearer, tool string }{{keyTwo, "pay.charge"}, {keyOne, "nope"}, {approverKey, "pay.charge"}} {
		if code, m := f.send("GET", "/v1/receipts/"+out.Key.String()+"?tool="+c.tool, c.bearer, ""); code != 404 && code != 401 {
			t.Errorf("receipt with %s for %s: %d %v", c.bearer, c.tool, code, m)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.settled["accepted"] != 1 || f.refusals["stale"] != 1 || f.refusals["forbidden"] < 2 {
		t.Errorf("settles %v, refusals %v", f.settled, f.refusals)
	}
}

// TestFleetListings: without ?workspace= both listings cover every
// configured workspace in order, paged one at a time with an f-cursor, each
// item once; a malformed cursor is refused as such.
func TestFleetListings(t *testing.T) {
	f := newFixture(t, nil)
	want := map[string]string{}
	tickets := map[string]bool{}
	for _, ws := range []string{"ws_one", "ws_two", "ws_two"} {
		want[f.call(ws, "pay.charge", 500).Key.String()] = ws
		tickets[f.call(ws, "pay.refund", 201).Ticket] = true
	}
	ctx := context.Background()
	got, order, cursor, pages := map[string]string{}, []string{}, "", 0
	for {
		page, err := f.api.ListUnknown(ctx, admin.ListRequest{Cursor: cursor, Limit: 1})
		if err != nil || len(page.Unknown) > 1 || pages > 10 {
			t.Fatalf("page %d: %v %+v", pages, err, page)
		}
		for _, r := range page.Unknown {
			got[r.IdempotencyKey] = r.Workspace
			order = append(order, r.Workspace)
		}
		pages++
		if cursor = page.Cursor; cursor == "" {
			break
		}
		if !strings.HasPrefix(cursor, "f") {
			t.Fatalf("cursor %q", cursor)
		}
	}
	if len(got) != 3 || order[0] != "ws_one" || order[2] != "ws_two" {
		t.Fatalf("listed %v in order %v, want %v", got, order, want)
	}
	for k, ws := range want {
		if got[k] != ws {
			t.Errorf("%s: %q, want %q", k, got[k], ws)
		}
	}
	seen := map[string]bool{}
	for cursor, pages = "", 0; ; pages++ {
		page, err := f.api.ListApprovals(ctx, admin.ListRequest{Cursor: cursor, Limit: 2})
		if err != nil || pages > 10 {
			t.Fatalf("approvals page %d: %v", pages, err)
		}
		for _, p := range page.Pending {
			if !tickets[p.Ticket] || seen[p.Ticket] || p.State != "held" || p.Tool != "pay.refund" {
				t.Fatalf("pending %+v", p)
			}
			seen[p.Ticket] = true
		}
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	if len(seen) != 3 {
		t.Errorf("listed %d pending approvals, want 3", len(seen))
	}
	for _, bad := range []string{"x", "f9:", "f01:", "f-1:", "0:abc"} {
		for _, path := range []string{"/v1/unknown", "/v1/approvals"} {
			if _, err := f.api.ListApprovals(ctx, admin.ListRequest{Cursor: bad}); path == "/v1/approvals" && reasonOf(err) != "invalid_request" {
				t.Errorf("%s cursor %q: %v", path, bad, err)
			}
			if code, m := f.send("GET", path+"?cursor="+bad, approverKey, ""); code != 400 || m["message"] != "malformed cursor" {
				t.Errorf("%s cursor %q: %d %v", path, bad, code, m)
			}
		}
	}
}

// TestDecide: an approver approves a held call once; the other decision is
// 409 already_decided, a bad ticket 400, a workspace key 401.
func TestDecide(t *testing.T) {
	f := newFixture(t, nil)
	out := f.call("ws_one", "pay.refund", 201)
	if out.Ticket == "" {
		t.Fatal("no ticket")
	}
	ctx := context.Background()
	tk, err := f.api.Decide(ctx, out.Ticket, true)
	if err != nil || tk.Status != "approved" || tk.Workspace != "ws_one" || tk.Tool != "pay.refund" || tk.IdempotencyKey != out.Key.String() {
		t.Fatalf("approve: %v %+v", err, tk)
	}
	if again, err := f.api.Decide(ctx, out.Ticket, true); err != nil || again != tk {
		t.Errorf("approve again: %v %+v", err, again)
	}
	if _, err := f.api.Decide(ctx, out.Ticket, false); reasonOf(err) != "already_decided" {
		t.Errorf("deny after approve: %v", err)
	}
	if _, err := f.api.Decide(ctx, "not-a-ticket", true); reasonOf(err) != "invalid_request" {
		t.Errorf("bad ticket: %v", err)
	}
	ws := admin.Client{BaseURL: f.url, Key: keyOne}
	if _, err := ws.Decide(ctx, out.Ticket, false); reasonOf(err) != "unauthorized" {
		t.Errorf("a workspace key decides: %v", err)
	}
}

// TestPin: the pin endpoint checks the capability, the body (strictly) and
// the provider before its hook moves the pin; without the hook it is 501.
func TestPin(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	p, err := f.api.PinCapability(ctx, "cap.pay", "pay.refund")
	if err != nil || p != (admin.Pin{Capability: "cap.pay", Pin: "pay.refund", Previous: "pay.charge"}) {
		t.Fatalf("pin: %v %+v", err, p)
	}
	if _, err := f.api.PinCapability(ctx, "cap.nope", "pay.refund"); reasonOf(err) != "unknown_tool" {
		t.Errorf("pin of no capability: %v", err)
	}
	if _, err := f.api.PinCapability(ctx, "cap.pay", "mail.a"); reasonOf(err) != "invalid_request" {
		t.Errorf("pin to a stranger: %v", err)
	}
	for _, body := range []string{`{"provider":"pay.charge","Provider":"pay.refund"}`, `{"provider":"pay.charge"} {}`, `{"provider":4242}`, ``} {
		if code, m := f.send("POST", "/v1/capabilities/cap.pay/pin", approverKey, body); code != 400 || strings.Contains(m["message"].(string), "pay.") {
			t.Errorf("%s: %d %v", body, code, m)
		}
	}
	if f.pins["cap.pay"] != "pay.refund" {
		t.Errorf("pin %s after refused pins", f.pins["cap.pay"])
	}
	g := newFixture(t, func(c *admin.Config) { c.SetPin = nil })
	if _, err := g.api.PinCapability(ctx, "cap.pay", "pay.refund"); reasonOf(err) != "not_implemented" {
		t.Errorf("pin without SetPin: %v", err)
	}
}

// TestHealth: /healthz reports the store's health and the durability.
func TestHealth(t *testing.T) {
	f := newFixture(t, func(c *admin.Config) { c.Durability = "aof" })
	if code, m := f.send("GET", "/healthz", "", ""); code != 200 || m["status"] != "ok" || m["durability"] != "aof" {
		t.Errorf("healthz: %d %v", code, m)
	}
	down := newFixture(t, func(c *admin.Config) { c.Store = bare{c.Store, errors.New("connection refused")} })
	if code, m := down.send("GET", "/healthz", "", ""); code != 503 || m["status"] != "unavailable" || m["reason"] != "unreachable" {
		t.Errorf("healthz of a store that is down: %d %v", code, m)
	}
}

// bare is a store with none of the optional parts; with err set, its
// ticket reads and decisions fail with it, or wait for their context to
// end when err is context.DeadlineExceeded.
type bare struct {
	idempotency.Store
	err error
}

func (b bare) Ticket(ctx context.Context, id string) (idempotency.Ticket, error) {
	if b.err == nil {
		return b.Store.Ticket(ctx, id)
	}
	return idempotency.Ticket{}, b.err
}

func (b bare) Decide(ctx context.Context, req idempotency.DecideRequest) (idempotency.Ticket, error) {
	if errors.Is(b.err, context.DeadlineExceeded) {
		<-ctx.Done()
		return idempotency.Ticket{}, ctx.Err()
	}
	return b.Store.Decide(ctx, req)
}

// TestStoreWithoutParts: an endpoint whose part the store lacks refuses,
// and a store call that does not answer ends with its bound as 503
// store_unavailable.
func TestStoreWithoutParts(t *testing.T) {
	f := newFixture(t, func(c *admin.Config) {
		c.Store = bare{Store: c.Store, err: context.DeadlineExceeded}
		c.StoreTimeout = 50 * time.Millisecond
	})
	for _, c := range []struct {
		method, path, body, reason string
		code                       int
	}{
		{"GET", "/v1/unknown", "", "not_implemented", 501},
		{"GET", "/v1/approvals", "", "not_implemented", 501},
		{"POST", "/v1/scope-version/advance", "", "not_implemented", 501},
		{"POST", "/v1/store/acknowledge-data-loss", "", "invalid_request", 400},
		{"POST", "/v1/approvals/apt_00000000000000000000000000000001/approve", "", "store_unavailable", 503},
	} {
		if code, m := f.send(c.method, c.path, approverKey, c.body); code != c.code || m["reason"] != c.reason {
			t.Errorf("%s %s: %d %v, want %d %s", c.method, c.path, code, m, c.code, c.reason)
		}
	}
	if _, err := admin.New(admin.Config{}); !errors.Is(err, admin.ErrInvalidConfig) {
		t.Errorf("New of an empty Config: %v", err)
	}
}

// parts is a store whose advance and acknowledgement answer as set.
type parts struct {
	idempotency.Store
	adv idempotency.Advance
	ack idempotency.DataLossAcknowledgement
	err error
}

func (p *parts) AdvanceScope(_ context.Context, req idempotency.AdvanceRequest) (idempotency.Advance, error) {
	a := p.adv
	a.To = req.To
	return a, p.err
}

func (p *parts) AcknowledgeDataLoss(context.Context) (idempotency.DataLossAcknowledgement, error) {
	return p.ack, p.err
}

func (p *parts) DataLoss() idempotency.DataLoss { return idempotency.DataLoss{} }

func (p *parts) NotifyDataLoss(func(error)) {}

func (p *parts) ListUnknown(ctx context.Context, req idempotency.ListRequest) (idempotency.UnknownPage, error) {
	return p.Store.(idempotency.Settler).ListUnknown(ctx, req)
}

func (p *parts) Settle(context.Context, idempotency.SettleRequest) (idempotency.Record, error) {
	return idempotency.Record{}, p.err
}

// TestAdvanceAndAcknowledge: an advance checks its body, answers each
// phase, and a records_live refusal carries the advance to the Client;
// an acknowledgement answers whether a loss was recorded.
func TestAdvanceAndAcknowledge(t *testing.T) {
	st := &parts{}
	f := newFixture(t, func(c *admin.Config) { st.Store = c.Store; c.Store = st })
	ctx := context.Background()
	below, neg := idempotency.ScopeVersion, -1
	for _, req := range []admin.AdvanceRequest{{To: &below}, {Strand: &neg}} {
		if _, err := f.api.AdvanceScope(ctx, req); reasonOf(err) != "invalid_request" {
			t.Errorf("advance %+v: %v", req, err)
		}
	}
	if code, m := f.send("POST", "/v1/scope-version/advance", approverKey, `{"to":2,"owner":1}`); code != 400 {
		t.Errorf("unknown field: %d %v", code, m)
	}
	if code, m := f.send("POST", "/v1/scope-version/advance", keyOne, ``); code != 403 {
		t.Errorf("advance with a workspace key: %d %v", code, m)
	}
	st.adv = idempotency.Advance{Phase: idempotency.AdvanceClosing, From: idempotency.ScopeVersion, RetryAfterMS: 1500}
	if a, err := f.api.AdvanceScope(ctx, admin.AdvanceRequest{}); err != nil || a.Phase != "closing" || a.RetryAfterMS != 1500 ||
		a.To != idempotency.ScopeVersion+1 || a.Counts == nil {
		t.Errorf("closing: %v %+v", err, a)
	}
	st.adv = idempotency.Advance{Phase: idempotency.AdvanceRecordsLive, Live: 3,
		Counts: []idempotency.RecordCount{{Version: idempotency.ScopeVersion, State: effectspec.Unknown, Records: 3}}}
	a, err := f.api.AdvanceScope(ctx, admin.AdvanceRequest{})
	if reasonOf(err) != "records_live" || a.Live != 3 || len(a.Counts) != 1 || a.Counts[0].State != "unknown" || a.Status != 409 {
		t.Errorf("records_live: %v %+v", err, a)
	}

	st.ack = idempotency.DataLossAcknowledgement{Sentinels: 2}
	if ack, err := f.api.AcknowledgeDataLoss(ctx); err != nil || ack.Acknowledged || !strings.Contains(ack.Message, "nothing changed") {
		t.Errorf("nothing to acknowledge: %v %+v", err, ack)
	}
	st.ack = idempotency.DataLossAcknowledgement{Acknowledged: true, Detail: "sentinel 0 vanished", Sentinels: 2}
	if ack, err := f.api.AcknowledgeDataLoss(ctx); err != nil || !ack.Acknowledged || ack.Lost != "sentinel 0 vanished" ||
		!strings.Contains(ack.Message, "deduplicate them only if the deployment id is unchanged") {
		t.Errorf("acknowledged: %v %+v", err, ack)
	}
	st.err = idempotency.ErrInvalidRequest
	if _, err := f.api.AcknowledgeDataLoss(ctx); reasonOf(err) != "invalid_request" {
		t.Errorf("check off: %v", err)
	}
}

// TestSettleInProgress: a settle of a call whose attempt may still be
// running is 409 in_progress with retry_after_ms (at least 1), which the
// Client reads.
func TestSettleInProgress(t *testing.T) {
	st := &parts{}
	f := newFixture(t, func(c *admin.Config) { st.Store = c.Store; c.Store = st })
	n := 1
	for _, c := range []struct {
		after time.Duration
		want  int64
	}{{1500 * time.Millisecond, 1500}, {0, 1}} {
		st.err = &idempotency.AttemptRunningError{RetryAfter: c.after}
		_, err := f.api.Settle(context.Background(), "ws_one", "pay.charge", idempotency.NewKey().String(), admin.Resolve{Outcome: "accepted", AttemptCount: &n})
		var e *admin.Error
		if !errors.As(err, &e) || e.Reason != "in_progress" || e.Status != 409 || e.RetryAfterMS != c.want ||
			!strings.Contains(string(e.Body), `"retry_after_ms":`) {
			t.Errorf("retry after %s: %v %+v", c.after, err, e)
		}
	}
	st.err = idempotency.ErrNotUnknown
	if _, err := f.api.Settle(context.Background(), "ws_one", "pay.charge", idempotency.NewKey().String(), admin.Resolve{Outcome: "accepted", AttemptCount: &n}); reasonOf(err) != "not_unknown" {
		t.Errorf("not unknown: %v", err)
	}
}

// TestClientNotAnAnswer: an answer that is not the API's (a proxy's page)
// is an error matching ErrNotAnswer that quotes it printably, cut short.
func TestClientNotAnAnswer(t *testing.T) {
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		w.Write([]byte("<html>bad\x1b[31m gateway" + strings.Repeat("x", 500)))
	}))
	defer proxy.Close()
	_, err := (&admin.Client{BaseURL: proxy.URL, Key: approverKey}).ListUnknown(context.Background(), admin.ListRequest{})
	if !errors.Is(err, admin.ErrNotAnswer) || strings.Contains(err.Error(), "\x1b") || !strings.HasPrefix(err.Error(), "HTTP 502: ") ||
		len(err.Error()) > 300 {
		t.Errorf("error %q", err)
	}
}

// TestListedReceiptRoundTrip: a listed receipt decodes to what encodes to
// the same bytes, so a client prints the gateway's JSON as it came.
func TestListedReceiptRoundTrip(t *testing.T) {
	f := newFixture(t, nil)
	f.call("ws_one", "pay.charge", 500)
	resp, err := http.NewRequest("GET", f.url+"/v1/unknown", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Header.Set("Authorization", "Bearer "+approverKey)
	r, err := http.DefaultClient.Do(resp)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var raw struct {
		Unknown []json.RawMessage `json:"unknown"`
	}
	if err := json.NewDecoder(r.Body).Decode(&raw); err != nil || r.StatusCode != 200 || len(raw.Unknown) != 1 {
		t.Fatalf("list: %d %v %d", r.StatusCode, err, len(raw.Unknown))
	}
	at := admin.ListedReceipt{}
	if err := json.Unmarshal(raw.Unknown[0], &at); err != nil {
		t.Fatal(err)
	}
	// The slot's first attempt, from which the vendor's window runs.
	if at.FirstAttemptAt.IsZero() || !at.FirstAttemptAt.Equal(at.CreatedAt) {
		t.Errorf("first_attempt_at %v, created_at %v: %s", at.FirstAttemptAt, at.CreatedAt, raw.Unknown[0])
	}
	at.SettleAfter = at.CreatedAt.Add(1500 * time.Millisecond)
	for _, l := range []admin.ListedReceipt{{Receipt: at.Receipt}, at} {
		b, _ := json.Marshal(l)
		var back admin.ListedReceipt
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if b2, _ := json.Marshal(back); string(b2) != string(b) {
			t.Errorf("round trip:\n%s\n%s", b, b2)
		}
	}
	if b, _ := json.Marshal(at); !strings.HasSuffix(string(b), `,"settle_after":"`+at.SettleAfter.UTC().Format("2006-01-02T15:04:05.000Z07:00")+`"}`) {
		t.Errorf("settle_after not last: %s", b)
	}
}

// TestImportTools: POST /v1/tools/import runs Import for an approver: 200,
// 502 vendor_unreachable when it fails (the cause in the log only), 501
// without one.
func TestImportTools(t *testing.T) {
	var fail atomic.Bool
	var imports atomic.Int32
	f := newFixture(t, func(c *admin.Config) {
		c.Import = func(context.Context) error {
			imports.Add(1)
			if fail.Load() {
				return errors.New("the upstream of pay.create: status 503 at " + approverKey)
			}
			return nil
		}
	})
	if code, m := f.send("POST", "/v1/tools/import", approverKey, ""); code != 200 || m["imported"] != true {
		t.Errorf("import: %d %v", code, m)
	}
	fail.Store(true)
	if code, m := f.send("POST", "/v1/tools/import", approverKey, ""); code != 502 || m["reason"] != "vendor_unreachable" ||
		strings.Contains(m["message"].(string), "503") {
		t.Errorf("failed import: %d %v", code, m)
	}
	if code, _ := f.send("POST", "/v1/tools/import", "", ""); code != 401 || imports.Load() != 2 {
		t.Errorf("import without a key: %d, %d imports", code, imports.Load())
	}
	g := newFixture(t, nil)
	if code, m := g.send("POST", "/v1/tools/import", approverKey, ""); code != 501 || m["reason"] != "not_implemented" {
		t.Errorf("import without Import: %d %v", code, m)
	}
}
