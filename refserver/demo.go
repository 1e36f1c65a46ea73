package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/obol-gateway/obol/retry"
)

// Demo API keys. They are fixed so that the documented curl commands work as
// written; the demo listens on loopback by default.
const (
	demoKeyAcme   = "ob_demo_acme_key"
	demoKeyGlobex = "ob_demo_globex_key"
	demoKeyAdmin  = "ob_demo_admin_key"
)

// demoEmailSchema is the input schema of both demo email providers and of
// the capability over them.
const demoEmailSchema = `{"type": "object", "required": ["to"], "properties": {
       "to": {"type": "string", "minLength": 3}, "subject": {"type": "string"}, "body": {"type": "string"},
       "simulate": {"enum": ["hang_up"], "description": "Make the vendor read the request and hang up without answering (outcome unknown)."}}}`

// demoConfigJSON is the demo configuration, in the file format of -config.
// {{VENDOR}} is replaced by the demo vendor's base URL. The environment is
// "development" so that the policy lets chat.post_message, a write whose
// vendor cannot deduplicate, run; in production it is policy_denied.
const demoConfigJSON = `{
  "key_prefix": "obol:", "retention": "24h", "lease": "30s", "environment": "development",
  "default_quota": {"calls_per_second": 100, "burst": 200, "stored_bytes": 268435456, "in_flight": 64},
  "store_full_fraction": 0.9,
  "workspaces": [
    {"id": "ws_acme", "api_keys": ["` + demoKeyAcme + `"]},
    {"id": "ws_globex", "api_keys": ["` + demoKeyGlobex + `"]}
  ],
  "approver_keys": [{"name": "demo-approver", "key": "` + demoKeyAdmin + `"}],
  "connections": [
    {"id": "conn_pay", "provider": "demopay", "base_url": "{{VENDOR}}/pay", "secret_env": "DEMO_PAY_KEY"},
    {"id": "conn_crm", "provider": "democrm", "base_url": "{{VENDOR}}/crm", "secret_env": "DEMO_CRM_KEY"},
    {"id": "conn_chat", "provider": "demochat", "base_url": "{{VENDOR}}/chat", "secret_env": "DEMO_CHAT_KEY"},
    {"id": "conn_mail_a", "provider": "mail_a", "base_url": "{{VENDOR}}/mail-a", "secret_env": "DEMO_MAIL_A_KEY"},
    {"id": "conn_mail_b", "provider": "mail_b", "base_url": "{{VENDOR}}/mail-b", "secret_env": "DEMO_MAIL_B_KEY"},
    {"id": "conn_sms", "provider": "demosms", "base_url": "{{VENDOR}}/sms", "secret_env": "DEMO_SMS_KEY"}
  ],
  "tools": [
    {"connection": "conn_pay", "method": "POST", "path": "/v1/charges",
     "description": "Charge a card: {\"amount\": 1200, \"currency\": \"usd\"}. The key travels in the Idempotency-Key header. {\"simulate\": \"503_once\"} answers 503 to the first attempt.",
     "input_schema": {"type": "object", "required": ["amount"], "additionalProperties": false, "properties": {
       "amount": {"type": "integer", "description": "In cents. The demo vendor declines 0 or less (402: definitely_rejected)."},
       "currency": {"type": "string", "pattern": "^[a-z]{3}$", "description": "ISO 4217, lower case."},
       "simulate": {"enum": ["503_once"], "description": "Make the vendor answer 503 to the first attempt."}}},
     "spec": {"tool": "payments.create_charge", "effect": "write", "route": "native",
              "idempotency": {"binding": "header", "header": "Idempotency-Key"},
              "status": {"accepted": [200, 201], "definitely_rejected": [400, 402, 404, 422], "retryable": [429, 503], "in_use": [409]},
              "approval": "none"}},
    {"connection": "conn_crm", "method": "POST", "path": "/v1/contacts",
     "description": "Create a contact: {\"email\": \"ada@example.com\"}. The key travels in the body at /metadata/idempotency_key.",
     "input_schema": {"type": "object", "required": ["email"], "properties": {
       "email": {"type": "string", "minLength": 3}, "name": {"type": "string"}, "metadata": {"type": "object"}}},
     "spec": {"tool": "crm.create_contact", "effect": "write", "route": "native",
              "idempotency": {"binding": "body_pointer", "pointer": "/metadata/idempotency_key"},
              "status": {"accepted": [200, 201], "definitely_rejected": [400, 422], "retryable": [503], "in_use": [409]}}},
    {"connection": "conn_chat", "method": "POST", "path": "/v1/messages",
     "description": "Post a chat message: {\"text\": \"hi\"}. The vendor cannot deduplicate (binding unsupported): allowed only outside production.",
     "input_schema": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string", "minLength": 1}}},
     "spec": {"tool": "chat.post_message", "effect": "write", "route": "native",
              "idempotency": {"binding": "unsupported"},
              "status": {"accepted": [200, 201], "definitely_rejected": [400]}}},
    {"connection": "conn_pay", "method": "POST", "path": "/v1/refunds",
     "description": "Refund a charge: {\"charge\": \"ch_1\", \"amount\": 500}. Held until an approver approves it.",
     "input_schema": {"type": "object", "required": ["charge", "amount"], "additionalProperties": false, "properties": {
       "charge": {"type": "string", "pattern": "^ch_"}, "amount": {"type": "integer", "minimum": 1}}},
     "spec": {"tool": "payments.refund", "effect": "write", "route": "native",
              "idempotency": {"binding": "header", "header": "Idempotency-Key"},
              "status": {"accepted": [200, 201], "definitely_rejected": [400, 402, 404, 422], "retryable": [503]},
              "approval": "required"}},
    {"connection": "conn_sms", "method": "POST", "path": "/v1/send",
     "description": "Send a text message: {\"to\": \"+15550100\", \"text\": \"hi\"}. The demo vendor reads the request and hangs up without answering, so every call's outcome is unknown: it cannot deduplicate (binding unsupported), so a retry with the same key is outcome_unknown, never a second message, until an approver settles the call (GET /v1/unknown, POST /v1/receipts/{key}/resolve).",
     "input_schema": {"type": "object", "required": ["to", "text"], "additionalProperties": false, "properties": {
       "to": {"type": "string", "minLength": 3}, "text": {"type": "string", "minLength": 1}}},
     "spec": {"tool": "sms.send", "effect": "write", "route": "native",
              "idempotency": {"binding": "unsupported"},
              "status": {"accepted": [200, 201], "definitely_rejected": [400]}}},
    {"connection": "conn_mail_a", "method": "POST", "path": "/send",
     "description": "Send an email through provider A: {\"to\": \"ada@example.com\", \"subject\": \"hi\"}.",
     "input_schema": ` + demoEmailSchema + `,
     "spec": {"tool": "email.a", "effect": "write",
              "idempotency": {"binding": "header", "header": "Idempotency-Key"},
              "status": {"accepted": [200, 202], "definitely_rejected": [400, 422], "retryable": [503]}}},
    {"connection": "conn_mail_b", "method": "POST", "path": "/send",
     "description": "Send an email through provider B: {\"to\": \"ada@example.com\", \"subject\": \"hi\"}.",
     "input_schema": ` + demoEmailSchema + `,
     "spec": {"tool": "email.b", "effect": "write",
              "idempotency": {"binding": "header", "header": "X-Request-Key"},
              "status": {"accepted": [200, 202], "definitely_rejected": [400, 422], "retryable": [503]}}}
  ],
  "capabilities": [
    {"name": "cap.send_email", "providers": ["email.a", "email.b"], "pin": "email.a",
     "description": "Send an email through the pinned provider (email.a or email.b): {\"to\": \"ada@example.com\", \"subject\": \"hi\"}.",
     "input_schema": ` + demoEmailSchema + `}
  ]
}`

// demoVendor is an in-process vendor on a loopback port that stands in for
// every demo connection (no -config). It serves seven tools:
// payments.create_charge (header binding; {"simulate": "503_once"} shows
// the one immediate second attempt), crm.create_contact (body_pointer
// /metadata/idempotency_key), chat.post_message (binding unsupported),
// payments.refund (approval required), sms.send (binding unsupported; its
// vendor reads each request and hangs up without answering, so the call is
// unknown: listed, settled and replayed), email.a and email.b ({"simulate":
// "hang_up"} makes their vendor hang up the same way), and the capability
// cap.send_email over the last two. The demo environment is
// "development" so that the policy lets chat.post_message run; in
// production it is policy_denied. The API keys are fixed (printed on
// start) so that the documented curl commands work. Vendors with a binding deduplicate on the key as
// real ones do; GET /stats shows how many requests each endpoint saw.
type demoVendor struct {
	URL     string
	secrets map[string]string // env name -> secret
	srv     *http.Server

	mu     sync.Mutex
	counts map[string]int
	seen   map[string][]byte // endpoint + key -> first answer
	failed map[string]bool   // endpoint + key -> 503 sent once
	seq    int
}

// demoEndpoints maps a path to the secret it expects and where its key is.
var demoEndpoints = map[string]struct {
	env, keyHeader, keyPointer string
}{
	"/pay/v1/charges":   {env: "DEMO_PAY_KEY", keyHeader: "Idempotency-Key"},
	"/pay/v1/refunds":   {env: "DEMO_PAY_KEY", keyHeader: "Idempotency-Key"},
	"/crm/v1/contacts":  {env: "DEMO_CRM_KEY", keyPointer: "idempotency_key"},
	"/chat/v1/messages": {env: "DEMO_CHAT_KEY"},
	"/mail-a/send":      {env: "DEMO_MAIL_A_KEY", keyHeader: "Idempotency-Key"},
	"/mail-b/send":      {env: "DEMO_MAIL_B_KEY", keyHeader: "X-Request-Key"},
	"/sms/v1/send":      {env: "DEMO_SMS_KEY"},
}

func startDemoVendor() (*demoVendor, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("refserver: demo vendor: %w", err)
	}
	v := &demoVendor{
		URL:     "http://" + ln.Addr().String(),
		secrets: map[string]string{},
		counts:  map[string]int{},
		seen:    map[string][]byte{},
		failed:  map[string]bool{},
	}
	for _, e := range demoEndpoints {
		if v.secrets[e.env] == "" {
			var b [16]byte
			rand.Read(b[:])
			v.secrets[e.env] = "demo_sk_" + hex.EncodeToString(b[:])
		}
	}
	v.srv = &http.Server{Handler: v, ReadHeaderTimeout: 5 * time.Second}
	go v.srv.Serve(ln)
	return v, nil
}

func (v *demoVendor) getenv(name string) (string, bool) {
	s, ok := v.secrets[name]
	return s, ok
}

func (v *demoVendor) close(ctx context.Context) { v.srv.Shutdown(ctx) }

// config loads the demo configuration against this vendor.
func (v *demoVendor) config(exec *retry.Executor) (*config, error) {
	return loadConfig([]byte(strings.ReplaceAll(demoConfigJSON, "{{VENDOR}}", v.URL)), v.getenv, exec)
}

func (v *demoVendor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/stats" {
		v.mu.Lock()
		b, _ := json.Marshal(v.counts)
		v.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
		return
	}
	ep, ok := demoEndpoints[r.URL.Path]
	if !ok || r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.counts[r.URL.Path]++
	reply := func(status int, obj any) {
		b, _ := json.Marshal(obj)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write(b)
	}
	if r.Header.Get("Authorization") != "Bearer "+v.secrets[ep.env] {
		reply(http.StatusUnauthorized, map[string]string{"error": "bad vendor credentials"})
		return
	}
	var args map[string]any
	if err := json.Unmarshal(body, &args); err != nil {
		reply(http.StatusBadRequest, map[string]string{"error": "body must be a JSON object"})
		return
	}
	if r.URL.Path == "/sms/v1/send" || args["simulate"] == "hang_up" {
		// Read, then gone without a word: the gateway cannot know whether
		// the message went out.
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			conn.Close()
		}
		return
	}
	key := ""
	switch {
	case ep.keyHeader != "":
		key = r.Header.Get(ep.keyHeader)
	case ep.keyPointer != "":
		if md, ok := args["metadata"].(map[string]any); ok {
			key, _ = md[ep.keyPointer].(string)
		}
	}
	dedup := r.URL.Path + " " + key
	if key != "" {
		if prev, ok := v.seen[dedup]; ok {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Idempotent-Replayed", "true")
			w.WriteHeader(http.StatusOK)
			w.Write(prev)
			return
		}
		if args["simulate"] == "503_once" && !v.failed[dedup] {
			v.failed[dedup] = true
			reply(http.StatusServiceUnavailable, map[string]string{"error": "temporarily unavailable (simulated)"})
			return
		}
	}
	v.seq++
	var (
		status = http.StatusCreated
		out    map[string]any
	)
	switch r.URL.Path {
	case "/pay/v1/charges":
		amount, _ := args["amount"].(float64)
		if amount <= 0 {
			reply(http.StatusPaymentRequired, map[string]string{"error": "card_declined", "detail": "amount must be positive"})
			return
		}
		out = map[string]any{"id": fmt.Sprintf("ch_%d", v.seq), "amount": amount, "currency": args["currency"], "status": "succeeded"}
	case "/pay/v1/refunds":
		out = map[string]any{"id": fmt.Sprintf("re_%d", v.seq), "charge": args["charge"], "amount": args["amount"], "status": "refunded"}
	case "/crm/v1/contacts":
		out = map[string]any{"id": fmt.Sprintf("ct_%d", v.seq), "email": args["email"]}
	case "/chat/v1/messages":
		status = http.StatusOK
		out = map[string]any{"id": fmt.Sprintf("msg_%d", v.seq), "text": args["text"]}
	default: // mail
		status = http.StatusAccepted
		out = map[string]any{"id": fmt.Sprintf("em_%d", v.seq), "provider": strings.Split(r.URL.Path, "/")[1], "to": args["to"]}
	}
	b, _ := json.Marshal(out)
	if key != "" {
		v.seen[dedup] = b
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
