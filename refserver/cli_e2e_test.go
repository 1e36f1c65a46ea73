package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
	"github.com/obol-gateway/obol/mcpgateway/admin/operator"
)

// runCLI runs the built refserver as an operator command with the approver
// key key in OBOL_APPROVER_KEY ("" leaves it unset).
func runCLI(t *testing.T, bin, key string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	env := []string{}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, operator.EnvApproverKey+"=") {
			env = append(env, e)
		}
	}
	if key != "" {
		env = append(env, operator.EnvApproverKey+"="+key)
	}
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("%v: %v", args, err)
	}
	if strings.Contains(out.String()+errb.String(), e2eKeyAdmin) {
		t.Errorf("%v: the approver key is in the output:\n%s%s", args, out.String(), errb.String())
	}
	return code, out.String(), errb.String()
}

// TestOperatorCommands runs every operator subcommand against a built
// refserver on a real Redis: unknown list (fleet-wide and per workspace) and
// settle, approvals list (from the pending approvals index), approve and
// deny, and the two phases of scope-version advance.
func TestOperatorCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	vendor := newTestVendor(t)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	// A lease of 1s: the advance waits one lease after closing.
	cfg := strings.NewReplacer("{{VENDOR}}", vendor.URL, `"lease": "10s"`, `"lease": "1s"`).Replace(e2eConfig)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := refservertest.Build(t)
	p := startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())
	url := "-url=" + p.base

	t.Run("approver key", func(t *testing.T) {
		code, _, stderr := runCLI(t, bin, "", "unknown", "list", url)
		if code != 2 || !strings.Contains(stderr, "set OBOL_APPROVER_KEY") {
			t.Errorf("no key: exit %d, stderr %q", code, stderr)
		}
		code, _, stderr = runCLI(t, bin, "ob_not_an_approver", "unknown", "list", url)
		// The gateway's message as written: no \u003c for "<".
		if code != 1 || !strings.Contains(stderr, "unauthorized (HTTP 401): missing or unknown approver key (Authorization: Bearer <approver key>)") {
			t.Errorf("bad key: exit %d, stderr %q", code, stderr)
		}
		code, _, stderr = runCLI(t, bin, e2eKeyAdmin, "unknown", "list", "-url=http://ops:"+e2eKeyAdmin+"@"+strings.TrimPrefix(p.base, "http://"))
		if code != 2 || !strings.Contains(stderr, "must not hold a user or password") {
			t.Errorf("password in -url: exit %d, stderr %q", code, stderr)
		}
	})

	fail := map[string]any{"text": "hi", "answer": 500} // an answer no list names: unknown
	one, two := idempotency.NewKey().String(), idempotency.NewKey().String()
	call(t, p.session(t, e2eKeyOne, one), "mail.a", fail, "").wantOutcome(t, "unknown", false)
	call(t, p.session(t, e2eKeyTwo, two), "mail.a", fail, "").wantOutcome(t, "unknown", false)

	t.Run("unknown list", func(t *testing.T) {
		code, stdout, stderr := runCLI(t, bin, e2eKeyAdmin, "unknown", "list", url)
		if code != 0 || !regexp.MustCompile(`ws_one +mail\.a +`+one+` +1 `).MatchString(stdout) ||
			!regexp.MustCompile(`ws_two +mail\.a +`+two+` +1 `).MatchString(stdout) || !strings.Contains(stdout, "2 unknown call(s)") {
			t.Fatalf("fleet-wide: exit %d\n%s%s", code, stdout, stderr)
		}
		code, stdout, stderr = runCLI(t, bin, e2eKeyAdmin, "unknown", "list", "-workspace", "ws_two", "-json", url)
		var got struct {
			Unknown []struct {
				Workspace      string `json:"workspace"`
				IdempotencyKey string `json:"idempotency_key"`
				Outcome        string `json:"outcome"`
			} `json:"unknown"`
			Cursor string `json:"cursor"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || len(got.Unknown) != 1 ||
			got.Unknown[0].IdempotencyKey != two || got.Unknown[0].Outcome != "unknown" || got.Cursor != "" {
			t.Fatalf("ws_two -json: exit %d %v %+v\n%s%s", code, err, got, stdout, stderr)
		}
		code, _, stderr = runCLI(t, bin, e2eKeyAdmin, "unknown", "list", "-workspace", "ws_nobody", url)
		if code != 1 || !strings.Contains(stderr, "invalid_request (HTTP 400): query parameter workspace must name a configured workspace") {
			t.Errorf("unknown workspace: exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("unknown settle", func(t *testing.T) {
		settle := func(attempts string) (int, string, string) {
			return runCLI(t, bin, e2eKeyAdmin, "unknown", "settle", one, "-workspace", "ws_one", "-tool", "mail.a",
				"-outcome", "accepted", "-attempts", attempts, "-note", "vendor dashboard shows it", url)
		}
		// A mistyped -attempts says what was given and what the record holds.
		if code, stdout, stderr := settle("2"); code != 1 || !strings.Contains(stderr, "stale (HTTP 409)") || stdout != "" ||
			!strings.Contains(stderr, "-attempts 2 was given; the record holds 1") {
			t.Fatalf("wrong attempt count: exit %d\n%s%s", code, stdout, stderr)
		}
		code, stdout, stderr := settle("1")
		if code != 0 || !strings.Contains(stdout, "settled "+one+" (ws_one, mail.a): accepted by ops-e2e at ") {
			t.Fatalf("settle: exit %d\n%s%s", code, stdout, stderr)
		}
		call(t, p.session(t, e2eKeyOne, one), "mail.a", fail, "").wantOutcome(t, "accepted", true)
		if code, _, stderr := settle("1"); code != 1 || !strings.Contains(stderr, "not_unknown (HTTP 409)") {
			t.Errorf("settle again: exit %d, stderr %q", code, stderr)
		}
		code, stdout, _ = runCLI(t, bin, e2eKeyAdmin, "unknown", "list", url)
		if code != 0 || strings.Contains(stdout, one) || !strings.Contains(stdout, two) {
			t.Errorf("after the settle: exit %d\n%s", code, stdout)
		}
		if code, _, stderr := runCLI(t, bin, e2eKeyAdmin, "unknown", "settle", two, "-workspace", "ws_two", "-tool", "mail.a", "-outcome", "maybe", "-attempts", "1", url); code != 2 ||
			!strings.Contains(stderr, "-outcome must be accepted or definitely_rejected") {
			t.Errorf("bad outcome: exit %d, stderr %q", code, stderr)
		}
		if code, _, stderr := runCLI(t, bin, e2eKeyAdmin, "unknown", "settle", two, "-workspace", "ws_two", "-tool", "mail.a", "-outcome", "accepted", url); code != 2 ||
			!strings.Contains(stderr, "-attempts is required") {
			t.Errorf("no attempts: exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("approvals", func(t *testing.T) {
		refund := map[string]any{"amount": 300}
		tickets := map[string]string{}
		for _, k := range []string{idempotency.NewKey().String(), idempotency.NewKey().String()} {
			h := call(t, p.session(t, e2eKeyOne, k), "pay.refund", refund, "")
			if h.rc.Outcome != "held" || !idempotency.ValidTicketID(h.ticket) {
				t.Fatalf("held call: %+v ticket %q", h.rc, h.ticket)
			}
			tickets[k] = h.ticket
		}
		var approved, denied string
		for k := range tickets {
			if approved == "" {
				approved = k
			} else {
				denied = k
			}
		}
		code, stdout, stderr := runCLI(t, bin, e2eKeyAdmin, "approvals", "list", url)
		for k, tk := range tickets {
			if !regexp.MustCompile(tk + ` +ws_one +pay\.refund +` + k + ` +held +20`).MatchString(stdout) {
				t.Errorf("approvals list lacks %s", tk)
			}
		}
		if code != 0 || !strings.Contains(stdout, "2 pending approval(s)") {
			t.Fatalf("approvals list: exit %d\n%s%s", code, stdout, stderr)
		}
		if code, stdout, _ := runCLI(t, bin, e2eKeyAdmin, "approvals", "list", "-workspace", "ws_two", "-json", url); code != 0 || stdout != `{"pending":[],"cursor":""}`+"\n" {
			t.Errorf("ws_two: exit %d %q", code, stdout)
		}
		code, stdout, stderr = runCLI(t, bin, e2eKeyAdmin, "approvals", "approve", tickets[approved], url)
		if code != 0 || stdout != tickets[approved]+" approved (ws_one, pay.refund, key "+approved+")\n" {
			t.Fatalf("approve: exit %d\n%s%s", code, stdout, stderr)
		}
		call(t, p.session(t, e2eKeyOne, approved), "pay.refund", refund, tickets[approved]).wantOutcome(t, "accepted", false)
		code, stdout, stderr = runCLI(t, bin, e2eKeyAdmin, "approvals", "deny", "-json", tickets[denied], url)
		var tv ticketView
		if err := json.Unmarshal([]byte(stdout), &tv); code != 0 || err != nil || tv.Status != "denied" || tv.IdempotencyKey != denied {
			t.Fatalf("deny -json: exit %d %v\n%s%s", code, err, stdout, stderr)
		}
		if code, _, stderr := runCLI(t, bin, e2eKeyAdmin, "approvals", "approve", tickets[denied], url); code != 1 || !strings.Contains(stderr, "denied (HTTP 403): the call was denied") {
			t.Errorf("approve a denied ticket: exit %d, stderr %q", code, stderr)
		}
		if code, stdout, _ := runCLI(t, bin, e2eKeyAdmin, "approvals", "list", "-json", url); code != 0 || stdout != `{"pending":[],"cursor":""}`+"\n" {
			t.Errorf("after the decisions: exit %d %q", code, stdout)
		}
		if code, _, stderr := runCLI(t, bin, e2eKeyAdmin, "approvals", "approve", "not-a-ticket", url); code != 1 || !strings.Contains(stderr, "invalid_request (HTTP 400): not an apt_ ticket id") {
			t.Errorf("bad ticket: exit %d, stderr %q", code, stderr)
		}
	})

	t.Run("scope-version advance", func(t *testing.T) {
		advance := func(args ...string) (int, string, string) {
			return runCLI(t, bin, e2eKeyAdmin, append([]string{"scope-version", "advance", url}, args...)...)
		}
		code, stdout, stderr := advance()
		if code != 0 || !strings.HasPrefix(stdout, fmt.Sprintf("scope version %d -> %d: closing\n", idempotency.ScopeVersion, idempotency.ScopeVersion+1)) {
			t.Fatalf("first run: exit %d\n%s%s", code, stdout, stderr)
		}
		if v, err := redis.Do("GET", "e2e:meta:scope_version"); err != nil || !strings.HasPrefix(fmt.Sprint(v), fmt.Sprintf("%d closing ", idempotency.ScopeVersion)) {
			t.Fatalf("scope version key after the first run: %v %v", v, err)
		}
		// scope-status prints the closing state it reads.
		if code, stdout, stderr := runCLI(t, bin, "", "scope-status", "-redis", "redis://"+redis.Addr(), "-prefix", "e2e:"); code != 0 ||
			!strings.Contains(stdout, fmt.Sprintf("fleet scope version %d, closing since ", idempotency.ScopeVersion)) {
			t.Errorf("scope-status during the advance: exit %d\n%s%s", code, stdout, stderr)
		}
		// Within a lease the gateway stops claiming.
		deadline := time.Now().Add(5 * time.Second)
		for {
			a := call(t, p.session(t, e2eKeyOne, idempotency.NewKey().String()), "pay.charge", map[string]any{"amount": 1}, "")
			if a.err != nil && a.refusal.Reason == "scope_version_conflict" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the gateway still claims after the closing mark: %+v %v", a.rc, a.err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(1100 * time.Millisecond) // one lease since the mark
		code, stdout, stderr = advance()
		m := regexp.MustCompile(`strand them: refserver scope-version advance -strand (\d+)`).FindStringSubmatch(stderr)
		if code != 1 || m == nil || !strings.Contains(stdout, ": records_live\n") || !strings.Contains(stdout, "VERSION  STATE") {
			t.Fatalf("records live: exit %d\n%s%s", code, stdout, stderr)
		}
		if code, stdout, stderr := advance("-strand", m[1]+"0"); code != 1 || !strings.Contains(stdout, "records_live") {
			t.Fatalf("strand a count it did not see: exit %d\n%s%s", code, stdout, stderr)
		}
		if v, _ := redis.Do("GET", "e2e:meta:scope_version"); strings.Trim(fmt.Sprint(v), "0123456789") == "" {
			t.Fatalf("advanced without the count: %v", v)
		}
		code, stdout, stderr = advance("-strand", m[1])
		want := fmt.Sprintf("scope version %d -> %d: advanced\n", idempotency.ScopeVersion, idempotency.ScopeVersion+1)
		if code != 0 || !strings.HasPrefix(stdout, want) {
			t.Fatalf("strand the count seen: exit %d\n%s%s", code, stdout, stderr)
		}
		if v, err := redis.Do("GET", "e2e:meta:scope_version"); err != nil || fmt.Sprint(v) != fmt.Sprint(idempotency.ScopeVersion+1) {
			t.Fatalf("scope version key: %v %v", v, err)
		}
		if code, stdout, _ := advance("-json"); code != 0 || !strings.Contains(stdout, `"phase":"advanced"`) {
			t.Errorf("repeated: exit %d\n%s", code, stdout)
		}
	})
}

// TestStoreAcknowledgeCommand runs "refserver store acknowledge-data-loss"
// against a fake of the gateway's endpoint: the request it sends, the
// warning, and a refusal printed as the gateway wrote it. TestStoreDataLost
// runs it against a built gateway whose Redis lost its data.
func TestStoreAcknowledgeCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	var (
		mu     sync.Mutex
		got    []string
		refuse bool
	)
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		if refuse {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"reason":"not_lost","status":409,"message":"no data loss to acknowledge <none> & nothing \u001b[31mchanged"}`+"\n")
			return
		}
		fmt.Fprint(w, `{"acknowledged":true,"lost":"sentinel 0 vanished","sentinels":1,"message":"m"}`+"\n")
	}))
	defer fake.Close()
	requests := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	bin := refservertest.Build(t)
	code, stdout, stderr := runCLI(t, bin, e2eKeyAdmin, "store", "acknowledge-data-loss", "-url", fake.URL)
	if code != 0 || stdout != "store data loss acknowledged (1 sentinels placed; lost: sentinel 0 vanished): m\n" || !strings.Contains(stderr, "can be dispatched again") ||
		requests() != 1 || got[0] != "POST /v1/store/acknowledge-data-loss Bearer "+e2eKeyAdmin {
		t.Fatalf("acknowledge: exit %d %q\n%s%s", code, got, stdout, stderr)
	}
	mu.Lock()
	refuse = true
	mu.Unlock()
	code, _, stderr = runCLI(t, bin, e2eKeyAdmin, "store", "acknowledge-data-loss", "-url", fake.URL)
	if code != 1 || !strings.Contains(stderr, "not_lost (HTTP 409): no data loss to acknowledge <none> & nothing  [31mchanged") {
		t.Errorf("refused: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := runCLI(t, bin, "", "store", "acknowledge-data-loss", "-url", fake.URL); code != 2 || requests() != 2 ||
		!strings.Contains(stderr, operator.EnvApproverKey) {
		t.Errorf("no key: exit %d, %d requests, stderr %q", code, len(got), stderr)
	}
}
