package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// FuzzFront checks the front of POST /mcp on arbitrary bodies, keys and
// credentials: it never panics, a request it passes has a valid effective
// key (set on the response when the body holds a tools/call), a request it
// refuses gets a JSON-RPC error with a reason, and it never calls the store
// except to read a ticket.
func FuzzFront(f *testing.F) {
	f.Add(callBody, goodKey, acmeAuth)
	f.Add(callBody, "", acmeAuth)
	f.Add(callBody, `"`+goodKey+`"`, acmeAuth)
	f.Add(listBody, "nope", acmeAuth)
	f.Add(resumeBody(ticketID), "", acmeAuth)
	f.Add("["+callBody+","+callBody+"]", goodKey, acmeAuth)
	f.Add(`{"method":"tools/call","params":{"_meta":{"dev.obol/approval-ticket":7}}}`, "", acmeAuth)
	f.Add(callBody, goodKey, "Bearer nobody")
	f.Add(`not json`, "", "")

	tk, _ := idempotency.ParseKey(goodKey)
	st := &fakeStore{tickets: map[string]idempotency.Ticket{
		ticketID: {ID: ticketID, Scope: idempotency.Scope{Workspace: "ws_acme", Connection: "conn_open", Tool: "open.send"}, Key: tk},
	}}
	s := newTestServer(f, st)
	f.Fuzz(func(t *testing.T, body, key, auth string) {
		h := http.Header{}
		if auth != "" {
			h.Set("Authorization", auth)
		}
		if key != "" {
			h.Set("Idempotency-Key", key)
		}
		r := callFront(t, s, h, body)
		if r.code == http.StatusOK {
			if r.info == nil {
				t.Fatal("passed without call info")
			}
			if _, err := idempotency.ParseKey(r.info.key.String()); err != nil {
				t.Fatalf("passed with key %q", r.info.key)
			}
			if hk := r.header.Get("Idempotency-Key"); hk != "" && hk != r.info.key.String() {
				t.Fatalf("header %q, effective key %q", hk, r.info.key)
			}
			if r.reached != body {
				t.Fatal("the body changed on its way to the SDK")
			}
		} else {
			var resp struct {
				Error struct {
					Data errorData `json:"data"`
				} `json:"error"`
			}
			if err := json.Unmarshal(r.body, &resp); err != nil || resp.Error.Data.Reason == "" || resp.Error.Data.Status != r.code {
				t.Fatalf("refusal %d: %s", r.code, r.body)
			}
			if strings.Contains(string(r.body), "ob_live_") {
				t.Fatalf("refusal echoes a key: %s", r.body)
			}
		}
		for _, op := range st.ops() {
			if op != "ticket" {
				t.Fatalf("the front made a %s call", op)
			}
		}
	})
}

// FuzzLoadConfig checks that loading never panics and that no error shows a
// secret value.
func FuzzLoadConfig(f *testing.F) {
	f.Add([]byte(goodConfig))
	f.Add([]byte(demoConfigJSON))
	f.Add([]byte(`{"tools": [{"broker": "nango", "spec": {"tool": "x", "route": "federated"}}]}`))
	f.Add([]byte(`{"workspaces": [{"id": "w", "api_keys": ["` + testSecret + `"]}], "tools": [1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := loadConfig(data, testEnv, &retry.Executor{})
		if err != nil {
			if c != nil {
				t.Fatal("a config and an error")
			}
			if strings.Contains(err.Error(), testSecret+"_") {
				t.Fatalf("error shows a secret: %v", err)
			}
			return
		}
		for _, name := range c.ToolOrder {
			if c.Tools[name] == nil && c.Capabilities[name] == nil {
				t.Fatalf("tool %s in the order but not configured", name)
			}
		}
	})
}
