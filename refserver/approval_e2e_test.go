package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
)

// approvalEditConfig serves one tool with a vendor binding, pay.transfer;
// {{APPROVAL}} is its approval.
const approvalEditConfig = `{
  "key_prefix": "e2e:", "lease": "10s", "environment": "production",
  "workspaces": [{"id": "ws_one", "api_keys": ["` + e2eKeyOne + `"]}],
  "approver_keys": [{"name": "ops-e2e", "key": "` + e2eKeyAdmin + `"}],
  "connections": [{"id": "conn_v", "provider": "testvendor", "base_url": "{{VENDOR}}", "secret_env": "E2E_VENDOR_SECRET"}],
  "tools": [
    {"connection": "conn_v", "path": "/transfer", "spec": {"tool": "pay.transfer", "approval": "{{APPROVAL}}",
      "idempotency": {"binding": "header", "header": "Idempotency-Key"}, "status": {"accepted": [201]}}}
  ]
}`

// sentTo is how many requests to v carried the vendor key of ws_one's
// pay.transfer call with clientKey (its receipt names it).
func sentTo(t *testing.T, v *refservertest.HangUpVendor, p *proc, clientKey string) int {
	t.Helper()
	code, m := p.post(t, "GET", "/v1/receipts/"+clientKey+"?tool=pay.transfer", e2eKeyOne, "")
	vk, _ := m["vendor_key"].(string)
	if code != 200 || vk == "" {
		t.Fatalf("receipt of %s: %d %v", clientKey, code, m)
	}
	if v.Requests(clientKey) != 0 {
		t.Errorf("the vendor received the client's key")
	}
	return v.Requests(vk)
}

// stop ends a refserver started by startRefserver and waits for it.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(15 * time.Second):
		t.Fatal("refserver did not exit after SIGTERM")
	}
}

// TestEndToEndApprovalAfterConfigEdit: a call whose vendor hangs up after
// reading it is unknown; its tool has a vendor binding, so a retry would
// send it again with the same vendor key. The operator then makes the tool
// approval: required and restarts the gateway: the retry is held and sends
// nothing. Approved, the retry follows the dispatch rows (sent again,
// accepted); denied, the call stays unknown and every retry is denied.
func TestEndToEndApprovalAfterConfigEdit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	vendor := refservertest.StartHangUpVendor(t, "", nil)
	dir := t.TempDir()
	config := func(approval string) string {
		path := filepath.Join(dir, approval+".json")
		raw := strings.NewReplacer("{{VENDOR}}", vendor.URL, "{{APPROVAL}}", approval).Replace(approvalEditConfig)
		if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	p := startRefserver(t, "-config", config("none"), "-redis", "redis://"+redis.Addr())

	args := map[string]any{"amount": 500, "to": "acct_1"}
	approved, denied := idempotency.NewKey().String(), idempotency.NewKey().String()
	for _, k := range []string{approved, denied} {
		u := call(t, p.session(t, e2eKeyOne, k), "pay.transfer", args, "")
		u.wantOutcome(t, "unknown", false)
		if u.rc.AttemptCount != 1 {
			t.Fatalf("unknown call: %d attempts, want 1", u.rc.AttemptCount)
		}
		if n := sentTo(t, vendor, p, k); n != 1 {
			t.Fatalf("vendor saw %d requests, want 1", n)
		}
	}
	p.stop(t)
	p = startRefserver(t, "-config", config("required"), "-redis", "redis://"+redis.Addr())
	vendor.HangUp.Store(false)

	tickets := map[string]string{}
	for _, k := range []string{approved, denied} {
		s := p.session(t, e2eKeyOne, k)
		h := call(t, s, "pay.transfer", args, "")
		if h.err != nil || h.rc.Outcome != "held" || !idempotency.ValidTicketID(h.ticket) {
			t.Fatalf("retry after the tool requires approval: outcome %q ticket %q err %v; want held", h.rc.Outcome, h.ticket, h.err)
		}
		if again := call(t, s, "pay.transfer", args, ""); again.ticket != h.ticket || again.rc.Outcome != "held" {
			t.Fatalf("second retry: outcome %q ticket %q, want held with %q", again.rc.Outcome, again.ticket, h.ticket)
		}
		if n := sentTo(t, vendor, p, k); n != 1 {
			t.Fatalf("held retries: vendor saw %d requests, want 1", n)
		}
		// The record stays unknown while it waits.
		if code, m := p.post(t, "GET", "/v1/receipts/"+k+"?tool=pay.transfer", e2eKeyOne, ""); code != 200 || m["outcome"] != "unknown" {
			t.Fatalf("receipt of a held retry: %d %v, want outcome unknown", code, m)
		}
		tickets[k] = h.ticket
	}

	// Approved: the retry follows the dispatch rows. The vendor binding
	// sends it again with the same vendor key (the vendor deduplicates).
	if code, m := p.post(t, "POST", "/v1/approvals/"+tickets[approved]+"/approve", e2eKeyAdmin, ""); code != 200 || m["status"] != "approved" {
		t.Fatalf("approve: %d %v", code, m)
	}
	s := p.session(t, e2eKeyOne, approved)
	call(t, s, "pay.transfer", args, tickets[approved]).wantOutcome(t, "accepted", false)
	call(t, s, "pay.transfer", args, "").wantOutcome(t, "accepted", true)
	if n := sentTo(t, vendor, p, approved); n != 2 {
		t.Errorf("approved: vendor saw %d requests with the vendor key, want 2 (the unknown one and the retry)", n)
	}

	// Denied: the call's effect may have happened, so it stays unknown, but
	// it is never sent again.
	if code, m := p.post(t, "POST", "/v1/approvals/"+tickets[denied]+"/deny", e2eKeyAdmin, ""); code != 200 || m["status"] != "denied" {
		t.Fatalf("deny: %d %v", code, m)
	}
	s = p.session(t, e2eKeyOne, denied)
	call(t, s, "pay.transfer", args, "").wantRefusal(t, "denied", 403)
	call(t, s, "pay.transfer", args, tickets[denied]).wantRefusal(t, "denied", 403)
	if n := sentTo(t, vendor, p, denied); n != 1 {
		t.Errorf("denied: vendor saw %d requests, want 1", n)
	}
	if code, m := p.post(t, "GET", "/v1/receipts/"+denied+"?tool=pay.transfer", e2eKeyOne, ""); code != 200 || m["outcome"] != "unknown" {
		t.Errorf("receipt of a denied unknown call: %d %v, want outcome unknown", code, m)
	}
}

// TestEndToEndResumeKeySource: a resume that sends only its ticket runs
// under the ticket's key; its receipt keeps the source the key had when
// the call was held, and its log line says the same, also when the resume
// is refused (a denied ticket: no receipt).
func TestEndToEndResumeKeySource(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	vendor := refservertest.StartHangUpVendor(t, "", nil)
	vendor.HangUp.Store(false)
	path := filepath.Join(t.TempDir(), "required.json")
	raw := strings.NewReplacer("{{VENDOR}}", vendor.URL, "{{APPROVAL}}", "required").Replace(approvalEditConfig)
	if err := os.WriteFile(path, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRefserver(t, "-config", path, "-redis", "redis://"+redis.Addr())

	args := map[string]any{"amount": 500, "to": "acct_1"}
	for _, c := range []struct {
		name, key, want string
		deny            bool
	}{
		{"supplied", idempotency.NewKey().String(), "supplied", false},
		{"minted", "", "minted", false},
		{"supplied, denied", idempotency.NewKey().String(), "supplied", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := call(t, p.session(t, e2eKeyOne, c.key), "pay.transfer", args, "")
			if h.err != nil || h.rc.Outcome != "held" || h.rc.KeySource != c.want {
				t.Fatalf("first call: outcome %q key_source %q err %v; want held, %s", h.rc.Outcome, h.rc.KeySource, h.err, c.want)
			}
			key := h.rc.IdempotencyKey
			decision, status := "approve", "approved"
			if c.deny {
				decision, status = "deny", "denied"
			}
			if code, m := p.post(t, "POST", "/v1/approvals/"+h.ticket+"/"+decision, e2eKeyAdmin, ""); code != 200 || m["status"] != status {
				t.Fatalf("%s: %d %v", decision, code, m)
			}
			// The resume carries the ticket and no key.
			r := call(t, p.session(t, e2eKeyOne, ""), "pay.transfer", args, h.ticket)
			if c.deny {
				r.wantRefusal(t, "denied", 403)
			} else {
				r.wantOutcome(t, "accepted", false)
				if r.rc.IdempotencyKey != key || r.rc.KeySource != c.want {
					t.Fatalf("resume receipt: key %s key_source %q, want %s and %s", r.rc.IdempotencyKey, r.rc.KeySource, key, c.want)
				}
			}
			line := "key=" + key + " key_source="
			log := p.WaitLog(line+c.want+" elapsed=", 2)
			var sources []string
			for _, l := range strings.Split(log, "\n") {
				if strings.Contains(l, "msg=tools/call ") || strings.Contains(l, `msg="tools/call refused"`) {
					if i := strings.Index(l, line); i >= 0 {
						src, _, _ := strings.Cut(l[i+len(line):], " ")
						sources = append(sources, src)
					}
				}
			}
			if len(sources) != 2 || sources[0] != c.want || sources[1] != c.want {
				t.Errorf("the log lines of the held call and its resume say key_source %v; the held call's receipt says %s", sources, c.want)
			}
		})
	}
}
