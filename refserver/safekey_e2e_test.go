package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/redistest"
	"github.com/obol-gateway/obol/internal/refservertest"
)

// rawAnswer is a POST /mcp answer as it came off the wire.
type rawAnswer struct {
	code int
	raw  string
	resp refservertest.Reply
}

// safe returns safe_new_key of the answer's error.data or receipt, as
// written on the wire ("absent" when it is not there).
func (a rawAnswer) safe(t *testing.T) string {
	t.Helper()
	raw := a.resp.Result.RawMeta[metaReceipt]
	if a.resp.Error != nil {
		raw = a.resp.Error.RawData
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("answer %d %s: %v", a.code, a.raw, err)
	}
	v, ok := m["safe_new_key"]
	if !ok {
		return "absent"
	}
	return string(v)
}

func (a rawAnswer) receipt(t *testing.T) wireReceipt {
	t.Helper()
	var rc wireReceipt
	if a.resp.Error != nil || json.Unmarshal(a.resp.Result.RawMeta[metaReceipt], &rc) != nil {
		t.Fatalf("no receipt: %d %s", a.code, a.raw)
	}
	return rc
}

func (a rawAnswer) reason() string {
	if a.resp.Error == nil {
		return ""
	}
	var d errorData
	json.Unmarshal(a.resp.Error.RawData, &d)
	return d.Reason
}

func (a rawAnswer) text() string {
	return a.resp.Text()
}

// mcpPost sends one tools/call to base's /mcp with the usual headers (edit
// changes them) and the idempotency key, if any.
func mcpPost(t *testing.T, base, apiKey, key, tool string, args any, edit func(http.Header)) rawAnswer {
	t.Helper()
	c := refservertest.Client{Base: base, APIKey: apiKey, HTTP: &http.Client{Timeout: time.Minute}}
	r := c.CallTool(context.Background(), refservertest.Request{Tool: tool, Args: args, Key: key, Header: edit})
	if r.Err != nil {
		t.Fatalf("%s: %d %v", tool, r.HTTPStatus, r.Err)
	}
	return rawAnswer{code: r.HTTPStatus, raw: string(r.Body), resp: r}
}

// TestEndToEndSafeNewKey: through the built binary, every receipt and every
// refusal's error.data carry safe_new_key as docs/DESIGN.md, "refserver wire
// contract" says.
func TestEndToEndSafeNewKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts Redis")
	}
	redis := redistest.Start(t)
	vendor := newTestVendor(t)
	cfg := strings.ReplaceAll(e2eConfig, "{{VENDOR}}", vendor.URL)
	cfg = strings.Replace(cfg, `"environment": "production"`, `"environment": "development"`, 1)
	cfgPath := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startRefserver(t, "-config", cfgPath, "-redis", "redis://"+redis.Addr())
	post := func(key, tool string, args any) rawAnswer {
		t.Helper()
		return mcpPost(t, p.base, e2eKeyOne, key, tool, args, nil)
	}
	want := func(name string, a rawAnswer, reason, safe string) {
		t.Helper()
		if a.reason() != reason || a.safe(t) != safe {
			t.Errorf("%s: reason %q safe_new_key %s, want %q %s: %d %s", name, a.reason(), a.safe(t), reason, safe, a.code, a.raw)
		}
	}

	k := idempotency.NewKey().String()
	charge := map[string]any{"amount": 1200, "currency": "usd"}
	want("fresh accepted", post(k, "pay.charge", charge), "", "false")
	want("replay", post(k, "pay.charge", charge), "", "false")
	want("request_mismatch", post(k, "pay.charge", map[string]any{"amount": 1}), "request_mismatch", "false")

	k = idempotency.NewKey().String()
	declined := map[string]any{"amount": 1, "answer": 402}
	first := post(k, "pay.charge", declined)
	want("definitely_rejected", first, "", "true")
	if rc := first.receipt(t); rc.Outcome != "definitely_rejected" || rc.AttemptCount != 1 {
		t.Errorf("declined: %+v", rc)
	}
	want("definitely_rejected replay", post(k, "pay.charge", declined), "", "true")

	// An unsupported binding whose vendor answers what no list names: unknown.
	k = idempotency.NewKey().String()
	odd := map[string]any{"text": "hi", "answer": 500}
	want("unknown", post(k, "chat.post", odd), "", "false")
	want("outcome_unknown", post(k, "chat.post", odd), "outcome_unknown", "false")
	// Settled accepted without the vendor's answer: the replay says so.
	if code, m := p.post(t, "POST", "/v1/receipts/"+k+"/resolve?tool=chat.post&workspace=ws_one", e2eKeyAdmin,
		`{"outcome":"accepted","attempt_count":1,"note":"checked"}`); code != 200 {
		t.Fatalf("settle: %d %v", code, m)
	}
	settled := post(k, "chat.post", odd)
	want("settled replay", settled, "", "false")
	if !strings.Contains(settled.text(), "accepted: settled by ops-e2e") || settled.resp.Result.IsError {
		t.Errorf("settled replay: text %q isError %v, want a text that says it was settled", settled.text(), settled.resp.Result.IsError)
	}

	// Held, then denied: nothing was sent.
	k = idempotency.NewKey().String()
	held := post(k, "pay.refund", map[string]any{"charge": "ch_1"})
	want("held", held, "", "false")
	var approval struct {
		Ticket string `json:"ticket"`
	}
	json.Unmarshal(held.resp.Result.RawMeta[metaApprove], &approval)
	if code, m := p.post(t, "POST", "/v1/approvals/"+approval.Ticket+"/deny", e2eKeyAdmin, ""); code != 200 {
		t.Fatalf("deny: %d %v", code, m)
	}
	want("denied", post(k, "pay.refund", map[string]any{"charge": "ch_1"}), "denied", "true")

	want("malformed_key", post("idt_nothex", "pay.charge", charge), "malformed_key", "false")
	want("unknown_tool", post(idempotency.NewKey().String(), "no.such", charge), "unknown_tool", "absent")

	// in_progress: a second call while the first is at the vendor.
	k = idempotency.NewKey().String()
	for len(vendor.slowGot) > 0 {
		<-vendor.slowGot
	}
	done := make(chan rawAnswer, 1)
	go func() { done <- mcpPost(t, p.base, e2eKeyOne, k, "pay.slow", map[string]any{"n": 1}, nil) }()
	select {
	case <-vendor.slowGot:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow call never reached the vendor")
	}
	want("in_progress", post(k, "pay.slow", map[string]any{"n": 1}), "in_progress", "false")
	want("slow accepted", <-done, "", "false")

	// Transport refusals name the header; error text is not HTML-escaped.
	ct := mcpPost(t, p.base, e2eKeyOne, "", "pay.charge", charge, func(h http.Header) { h.Set("Content-Type", "text/plain") })
	if ct.resp.Error == nil || !strings.Contains(ct.resp.Error.Message, "Content-Type") {
		t.Errorf("wrong Content-Type: %d %s", ct.code, ct.raw)
	}
	acc := mcpPost(t, p.base, e2eKeyOne, "", "pay.charge", charge, func(h http.Header) { h.Set("Accept", "application/json") })
	if acc.resp.Error == nil || !strings.Contains(acc.resp.Error.Message, "Accept") {
		t.Errorf("wrong Accept: %d %s", acc.code, acc.raw)
	}
	anon := mcpPost(t, p.base, "", "", "pay.charge", charge, nil)
	if anon.code != 401 || !strings.Contains(anon.raw, "Bearer <key>") || strings.Contains(anon.raw, `\u003c`) {
		t.Errorf("unauthorized: %d %s; want the text with <key> as written", anon.code, anon.raw)
	}
	if code, raw := p.postRaw(t, "GET", "/v1/unknown?workspace=ws_one", "", ""); !strings.Contains(string(raw), "<approver key>") {
		t.Errorf("REST unauthorized: %d %s; want the text with <approver key> as written", code, raw)
	}
}

// TestEndToEndDemoUnknown walks README-demo.txt steps 7 and 13 through the
// built binary in demo mode (no -config): after the pin moves, a completed
// call replays and only an unknown one is a destination_conflict; sms.send
// is unknown, its retry outcome_unknown, and it is listed, settled and
// replayed with a text that says how it was settled.
func TestEndToEndDemoUnknown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	p := startRefserver(t)
	post := func(key, tool string, args any) rawAnswer {
		t.Helper()
		return mcpPost(t, p.base, demoKeyAcme, key, tool, args, nil)
	}

	// tools/list: every description says how to retry.
	s := p.session(t, demoKeyAcme, "")
	tools, err := s.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tl := range tools.Tools {
		names[tl.Name] = true
		if !strings.Contains(tl.Description, "same Idempotency-Key") || !strings.Contains(tl.Description, "never after outcome_unknown") {
			t.Errorf("%s: description %q says nothing of how to retry", tl.Name, tl.Description)
		}
	}
	if !names["sms.send"] {
		t.Fatalf("demo tools %v lack sms.send", names)
	}

	// Step 7.
	ckey, uckey := "idt_0000111122223333444455556666aaaa", "idt_0000111122223333444455556666bbbb"
	mail := map[string]any{"to": "ada@example.com", "subject": "hi"}
	hang := map[string]any{"to": "bob@example.com", "subject": "hi", "simulate": "hang_up"}
	if rc := post(ckey, "cap.send_email", mail).receipt(t); rc.Outcome != "accepted" || rc.Route.Tool != "email.a" {
		t.Fatalf("step 7 first call: %+v", rc)
	}
	u := post(uckey, "cap.send_email", hang)
	if rc := u.receipt(t); rc.Outcome != "unknown" || !u.resp.Result.IsError || u.safe(t) != "false" {
		t.Fatalf("step 7 hang-up call: %+v, safe_new_key %s", rc, u.safe(t))
	}
	if code, m := p.post(t, "POST", "/v1/capabilities/cap.send_email/pin", demoKeyAdmin, `{"provider":"email.b"}`); code != 200 {
		t.Fatalf("pin: %d %v", code, m)
	}
	again := post(ckey, "cap.send_email", mail)
	if rc := again.receipt(t); again.code != 200 || !rc.Replayed || rc.Outcome != "accepted" || rc.Route.Tool != "email.a" {
		t.Errorf("step 7: the completed call after the pin move: %d %s; want an HTTP 200 replay of email.a", again.code, again.raw)
	}
	if a := post(uckey, "cap.send_email", hang); a.reason() != "destination_conflict" || a.safe(t) != "false" {
		t.Errorf("step 7: the unknown call after the pin move: %d %s; want destination_conflict", a.code, a.raw)
	}

	// Step 13.
	ukey := "idt_5eed5eed5eed5eed5eed5eed5eed5eed"
	sms := map[string]any{"to": "+15550100", "text": "hi"}
	first := post(ukey, "sms.send", sms)
	if rc := first.receipt(t); rc.Outcome != "unknown" || rc.AttemptCount != 1 || first.safe(t) != "false" {
		t.Fatalf("step 13 first call: %s", first.raw)
	}
	if a := post(ukey, "sms.send", sms); a.reason() != "outcome_unknown" || a.safe(t) != "false" {
		t.Fatalf("step 13 retry: %d %s; want outcome_unknown", a.code, a.raw)
	}
	code, raw := p.postRaw(t, "GET", "/v1/unknown?workspace=ws_acme", demoKeyAdmin, "")
	var list struct {
		Unknown []wireReceipt `json:"unknown"`
	}
	json.Unmarshal(raw, &list)
	var listed *wireReceipt
	for i := range list.Unknown {
		if list.Unknown[i].IdempotencyKey == ukey {
			listed = &list.Unknown[i]
		}
	}
	if code != 200 || listed == nil || listed.Tool != "sms.send" {
		t.Fatalf("list: %d %s", code, raw)
	}
	body, _ := json.Marshal(map[string]any{"outcome": "accepted", "attempt_count": listed.AttemptCount, "note": "the vendor shows the message as sent"})
	if code, m := p.post(t, "POST", "/v1/receipts/"+ukey+"/resolve?tool=sms.send&workspace=ws_acme", demoKeyAdmin, string(body)); code != 200 {
		t.Fatalf("settle: %d %v", code, m)
	}
	r := post(ukey, "sms.send", sms)
	rc := r.receipt(t)
	if rc.Outcome != "accepted" || !rc.Replayed || rc.Resolution == nil || rc.Resolution.By != "demo-approver" || r.resp.Result.IsError {
		t.Fatalf("step 13 replay: %s", r.raw)
	}
	if !strings.Contains(r.text(), "settled by demo-approver") || !strings.Contains(r.text(), "not recorded") {
		t.Errorf("step 13 replay text %q, want it to say the call was settled without the vendor's answer", r.text())
	}
	if r.safe(t) != "false" {
		t.Errorf("step 13 replay safe_new_key %s", r.safe(t))
	}
}
