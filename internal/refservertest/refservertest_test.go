package refservertest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/mcpgateway"
)

func TestMain(m *testing.M) { Main(m) }

// The _meta names the decoder reads are the gateway's.
func TestMetaNames(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"ok"}],"_meta":{"` +
		mcpgateway.MetaKey + `":"idt_k","` + mcpgateway.MetaReceipt + `":{"outcome":"accepted","attempt_count":1},"` +
		mcpgateway.MetaApprove + `":{"ticket":"apt_1","status":"pending"}}}}`
	r := Reply{HTTPStatus: 200, Body: []byte(body)}
	r.decode()
	if r.Err != nil || r.Error != nil || r.Result.Meta.Key != "idt_k" || r.Result.Meta.Receipt.Outcome != effectspec.Accepted ||
		r.Result.Meta.Receipt.AttemptCount != 1 || r.Result.Meta.Approval == nil || r.Result.Meta.Approval.Ticket != "apt_1" ||
		r.Text() != "ok" || len(r.Result.RawMeta) != 3 {
		t.Fatalf("decoded %+v from %s", r, body)
	}
}

func TestCallToolSendsAndDecodes(t *testing.T) {
	var got *http.Request
	var gotBody string
	answer := ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got, gotBody = r, string(b)
		io.WriteString(w, answer)
	}))
	defer srv.Close()
	c := Client{Base: srv.URL, APIKey: "ob_k"}

	answer = `{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no","data":{"reason":"request_mismatch","status":422,"idempotency_key":"idt_a"}}}`
	r := c.CallTool(context.Background(), Request{Tool: "pay.charge", Args: map[string]int{"amount": 1}, Key: "idt_a",
		MetaKey: "idt_m", Ticket: "apt_t", Header: func(h http.Header) { h.Set("X-Test", "1") }})
	if got.URL.Path != "/mcp" || got.Method != http.MethodPost || got.Header.Get("Authorization") != "Bearer ob_k" ||
		got.Header.Get("Idempotency-Key") != "idt_a" || got.Header.Get("X-Test") != "1" ||
		got.Header.Get("Accept") != "application/json, text/event-stream" {
		t.Errorf("request %s %s headers %v", got.Method, got.URL.Path, got.Header)
	}
	for _, want := range []string{`"method":"tools/call"`, `"name":"pay.charge"`, `"arguments":{"amount":1}`,
		`"dev.obol/idempotency-key":"idt_m"`, `"dev.obol/approval-ticket":"apt_t"`} {
		if !strings.Contains(gotBody, want) {
			t.Errorf("body %s lacks %s", gotBody, want)
		}
	}
	if r.Err != nil || r.Error == nil || r.Reason() != "request_mismatch" || r.Error.Data.Status != 422 ||
		r.Error.Data.Key != "idt_a" || r.Error.Message != "no" || !strings.Contains(string(r.Error.RawData), "idempotency_key") {
		t.Errorf("refusal decoded as %+v %v", r.Error, r.Err)
	}

	for _, bad := range []string{`not json`, `{"jsonrpc":"2.0","id":1}`, `{"jsonrpc":"2.0","id":1,"error":{"code":1,"data":"text"}}`} {
		answer = bad
		if r := c.CallTool(context.Background(), Request{Tool: "t"}); r.Err == nil {
			t.Errorf("answer %s: no error, decoded %+v", bad, r)
		}
	}
	answer = `{"jsonrpc":"2.0","id":1,"result":{}}`
	if r := c.CallTool(context.Background(), Request{Tool: "t"}); r.Err != nil || got.Header.Get("Idempotency-Key") != "" || strings.Contains(gotBody, "_meta") {
		t.Errorf("a call with no key: %v, header %q, body %s", r.Err, got.Header.Get("Idempotency-Key"), gotBody)
	}
}

// TestStartCallStop runs the built reference server in its demo mode, calls
// a tool, and stops it.
func TestStartCallStop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the reference server")
	}
	s := Start(t, Options{})
	if Build(t) != s.Cmd.Path {
		t.Errorf("ran %s, built %s", s.Cmd.Path, Build(t))
	}
	c := Client{Base: s.Base, APIKey: "ob_demo_acme_key"}
	key := "idt_0000111122223333444455556666cccc"
	r := c.CallTool(context.Background(), Request{Tool: "cap.send_email", Key: key, Args: map[string]any{"to": "ada@example.com", "subject": "hi"}})
	if r.Err != nil || r.Error != nil || r.HTTPStatus != 200 || r.Result.Meta.Receipt.Outcome != effectspec.Accepted ||
		r.Result.Meta.Receipt.IdempotencyKey != key || r.Result.Meta.Key != key {
		t.Fatalf("call: %s", r)
	}
	if again := c.CallTool(context.Background(), Request{Tool: "cap.send_email", Key: key, Args: map[string]any{"to": "ada@example.com", "subject": "hi"}}); !again.Result.Meta.Receipt.Replayed {
		t.Errorf("the same call again: %s, want a replay", again)
	}
	if !strings.Contains(s.WaitLog("msg=tools/call", 2), "tools/call") {
		t.Errorf("the log lacks the call:\n%s", s.Log())
	}
	if err := s.Stop(20 * time.Second); err != nil {
		t.Errorf("stop: %v", err)
	}
	if r := c.CallTool(context.Background(), Request{Tool: "cap.send_email", Key: key}); r.Err == nil {
		t.Errorf("a call after Stop: %s, want a transport error", r)
	}
}
