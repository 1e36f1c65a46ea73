package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
)

// What tenants and operators must never see (docs/DESIGN.md, "refserver wire
// contract"), through the built binary: a settlement's "by" is the approver's
// configured name, resolve needs attempt_count, a note loses every configured
// key and refuses Unicode format characters, store failures read as fixed text,
// and the config loader refuses what it must.

// boundaryConfig is the e2e configuration with unsupported writes allowed,
// so that chat.post can end unknown.
func boundaryConfig(t *testing.T, vendorURL string) string {
	t.Helper()
	raw := strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendorURL)
	raw = strings.Replace(raw, `"environment": "production",`, `"environment": "production", "allow_unsupported_writes": true,`, 1)
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// postRaw sends a /v1 request and returns the status and the raw body.
func (p *proc) postRaw(t *testing.T, method, path, bearer, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, p.base+path, strings.NewReader(body))
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// TestEndToEndSettlementBoundary: through the binary, a settle without
// attempt_count is refused; a note with a bidi override, a zero-width
// character, a line or paragraph separator or a byte order mark is refused
// and nothing changes; a note quoting API keys, the approver key and the
// connection secret is stored without any of them; and "by" is the
// approver's configured name, which the workspace's replay and receipt show.
func TestEndToEndSettlementBoundary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	rs := redistest.Start(t)
	vendor := newTestVendor(t)
	p := startRefserver(t, "-config", boundaryConfig(t, vendor.URL), "-redis", "redis://"+rs.Addr())

	args := map[string]any{"text": "hello", "answer": 500}
	// unknownCall makes a call that ends unknown and returns its key and
	// its settle path.
	unknownCall := func(t *testing.T) (string, string) {
		t.Helper()
		k := idempotency.NewKey().String()
		call(t, p.session(t, e2eKeyOne, k), "chat.post", args, "").wantOutcome(t, "unknown", false)
		return k, "/v1/receipts/" + k + "/resolve?tool=chat.post&workspace=ws_one"
	}
	stillUnknown := func(t *testing.T, k string) {
		t.Helper()
		code, raw := p.postRaw(t, "GET", "/v1/unknown?workspace=ws_one", e2eKeyAdmin, "")
		if code != 200 || !bytes.Contains(raw, []byte(`"idempotency_key":"`+k+`"`)) {
			t.Errorf("listing %d %s, want %s still unknown", code, raw, k)
		}
	}

	t.Run("attempt_count required", func(t *testing.T) {
		k, resolve := unknownCall(t)
		for _, body := range []string{`{"outcome":"accepted","note":"checked"}`, `{"outcome":"accepted","attempt_count":null}`} {
			code, m := p.post(t, "POST", resolve, e2eKeyAdmin, body)
			if msg, _ := m["message"].(string); code != 400 || m["reason"] != "invalid_request" || !strings.Contains(msg, "attempt_count") {
				t.Errorf("settle %s: %d %v, want 400 invalid_request naming attempt_count", body, code, m)
			}
		}
		stillUnknown(t, k)
	})

	t.Run("format characters refused", func(t *testing.T) {
		k, resolve := unknownCall(t)
		for _, c := range []string{`\u202e`, `\u2066`, `\u200b`, `\u200f`, `\u2028`, `\u2029`, `\ufeff`, `\u00ad`} {
			body := `{"outcome":"accepted","attempt_count":1,"note":"paid in full ` + c + `4242 ok"}`
			code, m := p.post(t, "POST", resolve, e2eKeyAdmin, body)
			msg, _ := m["message"].(string)
			if code != 400 || m["reason"] != "invalid_request" || !strings.Contains(msg, "note:") || strings.Contains(msg, "4242") {
				t.Errorf("note with %s: %d %v, want 400 invalid_request about the note, quoting nothing", c, code, m)
			}
		}
		stillUnknown(t, k)
	})

	t.Run("named approver, note without keys", func(t *testing.T) {
		k, resolve := unknownCall(t)
		note := "checked by phone: " + e2eKeyOne + " / " + e2eKeyTwo + " / " + e2eKeyAdmin + " / " + e2eSecret + " -- é ok"
		body, _ := json.Marshal(map[string]any{"outcome": "accepted", "attempt_count": 1, "note": note})
		code, raw := p.postRaw(t, "POST", resolve, e2eKeyAdmin, string(body))
		if code != 200 {
			t.Fatalf("settle: %d %s", code, raw)
		}
		secrets := []string{e2eKeyOne, e2eKeyTwo, e2eKeyAdmin, e2eSecret}
		noSecret := func(where string, b []byte) {
			t.Helper()
			for _, s := range secrets {
				if bytes.Contains(b, []byte(s)) {
					t.Errorf("%s holds %q: %s", where, s, b)
				}
			}
		}
		noSecret("the settle's answer", raw)
		var rc wireReceipt
		if err := json.Unmarshal(raw, &rc); err != nil || rc.Resolution == nil {
			t.Fatalf("settle answer %s: %v", raw, err)
		}
		if r := rc.Resolution; r.By != "ops-e2e" || !strings.HasPrefix(r.Note, "checked by phone: ") || !strings.HasSuffix(r.Note, " -- é ok") ||
			strings.Count(r.Note, "[redacted]") != 4 {
			t.Errorf("resolution %+v: want by ops-e2e and the note with its four keys redacted", r)
		}
		// The workspace sees the name, never the key or a digest of it.
		again := call(t, p.session(t, e2eKeyOne, k), "chat.post", args, "")
		again.wantOutcome(t, "accepted", true)
		if r := again.rc.Resolution; r == nil || r.By != "ops-e2e" || r.Note != rc.Resolution.Note {
			t.Errorf("replayed resolution %+v", r)
		}
		code, raw = p.postRaw(t, "GET", "/v1/receipts/"+k+"?tool=chat.post", e2eKeyOne, "")
		if code != 200 || !bytes.Contains(raw, []byte(`"by":"ops-e2e"`)) {
			t.Errorf("receipt: %d %s", code, raw)
		}
		noSecret("the receipt", raw)
		// The replay's line too, written once its answer has left.
		noSecret("the gateway's log", []byte(p.WaitLog("replayed=true", 1)))
		if !strings.Contains(p.Log(), "by=ops-e2e") {
			t.Errorf("the settle's log line does not name the approver:\n%s", p.Log())
		}
	})

	t.Run("note with keys in another case", func(t *testing.T) {
		_, resolve := unknownCall(t)
		mixed := func(s string) string {
			b := []byte(strings.ToLower(s))
			for i := 0; i < len(b); i += 2 {
				b[i] = strings.ToUpper(string(b[i]))[0]
			}
			return string(b)
		}
		copies := []string{strings.ToUpper(e2eKeyAdmin), strings.ToLower(strings.ToUpper(e2eKeyOne)), mixed(e2eSecret), strings.ToUpper(e2eKeyTwo)}
		// The last copy inside a JSON document pasted as a JSON string.
		note := "checked: " + copies[0] + " / " + copies[1] + " / " + copies[2] + ` / {\"k\":\"` + copies[3] + `\"} -- ok`
		body, _ := json.Marshal(map[string]any{"outcome": "accepted", "attempt_count": 1, "note": note})
		code, raw := p.postRaw(t, "POST", resolve, e2eKeyAdmin, string(body))
		if code != 200 {
			t.Fatalf("settle: %d %s", code, raw)
		}
		var rc wireReceipt
		if err := json.Unmarshal(raw, &rc); err != nil || rc.Resolution == nil {
			t.Fatalf("settle answer %s: %v", raw, err)
		}
		got := strings.ToLower(rc.Resolution.Note)
		for _, s := range []string{e2eKeyAdmin, e2eKeyOne, e2eSecret, e2eKeyTwo} {
			if strings.Contains(got, strings.ToLower(s)) {
				t.Errorf("the note %q holds a copy of %q", rc.Resolution.Note, s)
			}
		}
		if n := strings.Count(rc.Resolution.Note, "[redacted]"); n != 4 || !strings.HasPrefix(rc.Resolution.Note, "checked: ") || !strings.HasSuffix(rc.Resolution.Note, " -- ok") {
			t.Errorf("note %q: want its four copies redacted (%d) and the rest kept", rc.Resolution.Note, n)
		}
	})
}

// storeLeaks matches what a store failure must never show a caller: the
// Redis address, the dialer's text, Redis's OOM reply and the script it
// names (sha and line).
func storeLeaks(addr string) []*regexp.Regexp {
	_, port, _ := strings.Cut(addr, ":")
	return []*regexp.Regexp{
		regexp.MustCompile(regexp.QuoteMeta(addr)), regexp.MustCompile(`:` + port + `\b`), regexp.MustCompile(`dial tcp`),
		regexp.MustCompile(`connection refused`), regexp.MustCompile(`OOM command`), regexp.MustCompile(`maxmemory`),
		regexp.MustCompile(`script:`), regexp.MustCompile(`@user_script`), regexp.MustCompile(`\b[0-9a-f]{40}\b`),
		regexp.MustCompile(`redisstore`),
	}
}

// TestEndToEndStoreErrorsAreFixedText: through the binary, on a Redis that
// refuses writes for lack of memory and then on one that is gone, every
// answer a tenant or an operator gets (tools/call, the receipt, the
// approval, pin, listing and settle endpoints) reads store_unavailable
// with fixed text: out_of_memory for the first, never the Redis address,
// "dial tcp", the OOM reply, the script's sha or line.
func TestEndToEndStoreErrorsAreFixedText(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	rs := redistest.Start(t)
	vendor := newTestVendor(t)
	p := startRefserver(t, "-config", boundaryConfig(t, vendor.URL), "-redis", "redis://"+rs.Addr())
	leaks := storeLeaks(rs.Addr())
	held := call(t, p.session(t, e2eKeyOne, ""), "pay.refund", map[string]any{"amount": 1}, "")
	if held.ticket == "" {
		t.Fatalf("no ticket: %+v", held)
	}
	done := idempotency.NewKey().String()
	call(t, p.session(t, e2eKeyOne, done), "pay.charge", map[string]any{"amount": 1}, "").wantOutcome(t, "accepted", false)
	unk := idempotency.NewKey().String()
	call(t, p.session(t, e2eKeyOne, unk), "chat.post", map[string]any{"text": "hi", "answer": 500}, "").wantOutcome(t, "unknown", false)

	check := func(t *testing.T, what string, raw []byte, wantText string) {
		t.Helper()
		for _, re := range leaks {
			if re.Match(raw) {
				t.Errorf("%s shows %s: %s", what, re, raw)
			}
		}
		if !bytes.Contains(raw, []byte(wantText)) {
			t.Errorf("%s lacks %q: %s", what, wantText, raw)
		}
	}
	callRaw := func(t *testing.T, tool string) []byte {
		t.Helper()
		c := refservertest.Client{Base: p.base, APIKey: e2eKeyOne, HTTP: &http.Client{Timeout: time.Minute}}
		r := c.CallTool(context.Background(), refservertest.Request{Tool: tool, Key: idempotency.NewKey().String(), Args: map[string]int{"amount": 7}})
		if r.HTTPStatus == 0 {
			t.Fatal(r.Err)
		}
		return r.Body
	}
	// oom: Redis refuses the endpoint's step for lack of memory. (Redis let
	// the settle script through over maxmemory in this setup; it is checked
	// with Redis gone.)
	admin := func(t *testing.T, wantText string, oomOnly bool) {
		for _, ep := range []struct {
			method, path, bearer, body string
			oom                        bool
		}{
			{"POST", "/v1/approvals/" + held.ticket + "/approve", e2eKeyAdmin, "", true},
			{"POST", "/v1/capabilities/cap.mail/pin", e2eKeyAdmin, `{"provider": "mail.b"}`, true},
			{"POST", "/v1/receipts/" + unk + "/resolve?tool=chat.post&workspace=ws_one", e2eKeyAdmin, `{"outcome": "accepted", "attempt_count": 1}`, false},
			{"GET", "/v1/receipts/" + done + "?tool=pay.charge", e2eKeyOne, "", false},
			{"GET", "/v1/unknown?workspace=ws_one", e2eKeyAdmin, "", false},
		} {
			if oomOnly && !ep.oom {
				continue
			}
			code, raw := p.postRaw(t, ep.method, ep.path, ep.bearer, ep.body)
			if code != http.StatusServiceUnavailable || !bytes.Contains(raw, []byte(`"reason":"store_unavailable"`)) {
				t.Errorf("%s %s: %d %s, want 503 store_unavailable", ep.method, ep.path, code, raw)
			}
			check(t, ep.method+" "+ep.path, raw, wantText)
		}
	}

	t.Run("out of memory", func(t *testing.T) {
		if _, err := rs.Do("CONFIG", "SET", "maxmemory", "1"); err != nil {
			t.Fatal(err)
		}
		defer rs.Do("CONFIG", "SET", "maxmemory", "0")
		for _, tool := range []string{"pay.charge", "cap.mail"} {
			raw := callRaw(t, tool)
			if !bytes.Contains(raw, []byte(`"reason":"store_unavailable"`)) {
				t.Errorf("%s: %s, want store_unavailable", tool, raw)
			}
			check(t, tool, raw, outOfMemoryText)
		}
		admin(t, outOfMemoryText, true)
	})
	t.Run("stopped", func(t *testing.T) {
		rs.Kill()
		for _, tool := range []string{"pay.charge", "cap.mail"} {
			raw := callRaw(t, tool)
			if !bytes.Contains(raw, []byte(`"reason":"store_unavailable"`)) {
				t.Errorf("%s: %s, want store_unavailable", tool, raw)
			}
			check(t, tool, raw, storeUnavailableText)
		}
		admin(t, storeUnavailableText, false)
	})
	// The operator's log has the cause, redacted of every secret.
	if !strings.Contains(p.Log(), "OOM") {
		t.Errorf("the gateway's log does not say why the store failed:\n%s", p.Log())
	}
	for _, s := range []string{e2eSecret, e2eKeyOne, e2eKeyAdmin} {
		if strings.Contains(p.Log(), s) {
			t.Errorf("the gateway's log holds %q", s)
		}
	}
}

// TestEndToEndConfigRefusals: the binary refuses to start on a bare
// approver key and on an unknown_retention that a tool's timeout plus the
// lease reaches, naming the entry or the tool and never a key.
func TestEndToEndConfigRefusals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := refservertest.Build(t)
	base := strings.ReplaceAll(e2eConfig, "{{VENDOR}}", "http://127.0.0.1:9")
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"bare approver key", `"approver_keys": [{"name": "ops-e2e", "key": "` + e2eKeyAdmin + `"}]`, `"approver_keys": ["` + e2eKeyAdmin + `"]`,
			`approver_keys[0]: must be an object {"name": "ops-alice", "key": "..."}`},
		{"unknown_retention", `"lease": "10s",`, `"lease": "10s", "retention": "1m", "unknown_retention": "2m",`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := strings.Replace(base, tc.old, tc.new, 1)
			want := tc.want
			if tc.name == "unknown_retention" {
				raw = strings.Replace(raw, `"spec": {"tool": "pay.slow",`, `"spec": {"tool": "pay.slow", "timeout": "110s",`, 1)
				want = "tools[1] (pay.slow).spec.timeout: the timeout 1m50s plus the lease 10s must be less than unknown_retention (2m0s)"
			}
			if raw == base {
				t.Fatal("edit did not apply")
			}
			path := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-config", path, "-redis", "redis://127.0.0.1:9")
			cmd.Env = append(os.Environ(), "E2E_VENDOR_SECRET="+e2eSecret)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("started:\n%s", out)
			}
			if !bytes.Contains(out, []byte(want)) || bytes.Contains(out, []byte(e2eKeyAdmin)) {
				t.Errorf("output lacks %q or holds a key:\n%s", want, out)
			}
		})
	}
}

// TestEndToEndTraceBoundary: through the binary, a client's traceparent
// that says "not sampled" and carries a tracestate neither hides the call
// (its spans are exported, the vendor gets a sampled traceparent) nor
// parents it (the call's span is a root of another trace, linked to the
// client's), and the vendor gets no tracestate.
func TestEndToEndTraceBoundary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	rs := redistest.Start(t)
	col := newCollector(t)
	vendor := newTraceVendor(t)
	t.Setenv(envOTLPEndpoint, col.URL)
	cfg := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfg, []byte(strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendor.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRefserver(t, "-config", cfg, "-redis", "redis://"+rs.Addr())
	const clientTrace, clientSpan = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
	h := http.Header{"Authorization": {"Bearer " + e2eKeyOne}, "Idempotency-Key": {idempotency.NewKey().String()},
		"Traceparent": {"00-" + clientTrace + "-" + clientSpan + "-00"}, "Tracestate": {"clientvendor=ct-state-9914"}}
	call(t, sessionWith(t, p.base, h), "pay.charge", map[string]any{"amount": 1}, "").wantOutcome(t, "accepted", false)

	p.Signal(syscall.SIGTERM) // flushes the spans
	select {
	case <-p.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("refserver did not stop")
	}
	spans, raw := col.spans(t)
	var root *tracepb.Span
	for _, sp := range spans {
		if sp.Name == "tools/call" {
			root = sp
		}
		if hex.EncodeToString(sp.TraceId) == clientTrace {
			t.Errorf("%s in the client's trace", sp.Name)
		}
	}
	if root == nil || len(spans) != 4 {
		t.Fatalf("exported %d spans, want the call's, claim, attempt and finalize", len(spans))
	}
	if len(root.ParentSpanId) != 0 || len(root.Links) != 1 || hex.EncodeToString(root.Links[0].TraceId) != clientTrace ||
		hex.EncodeToString(root.Links[0].SpanId) != clientSpan {
		t.Errorf("tools/call span: parent %x links %v, want a root linked to the client's span", root.ParentSpanId, root.Links)
	}
	if bytes.Contains(raw, []byte("ct-state-9914")) {
		t.Error("the client's tracestate in the exported spans")
	}
	vendor.mu.Lock()
	defer vendor.mu.Unlock()
	if len(vendor.parents) != 1 || !strings.HasPrefix(vendor.parents[0], "00-"+hex.EncodeToString(root.TraceId)+"-") ||
		!strings.HasSuffix(vendor.parents[0], "-01") {
		t.Errorf("vendor got traceparent %q, want a sampled one of trace %x", vendor.parents, root.TraceId)
	}
	if len(vendor.states) != 1 || vendor.states[0] != "" {
		t.Errorf("vendor got tracestate %q", vendor.states)
	}
}
