package composio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/broker/brokertest"
	"github.com/obol-gateway/obol/broker/composio"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

const apiKey = "ak_composio_7d1e-THE-SECRET"

const okReply = `{"data":{"id":1},"error":null,"successful":true,"log_id":"log_1"}`
const failReply = `{"data":{},"error":"Issue creation failed: 422","successful":false,"log_id":"log_2"}`

func newBroker(t testing.TB, base string) broker.Broker {
	t.Helper()
	b, err := composio.New(composio.Config{BaseURL: base, APIKey: apiKey})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func routing() map[string]string {
	return map[string]string{"tool_slug": "GITHUB_CREATE_AN_ISSUE", "connected_account_id": "ca_123", "user_id": "user-42"}
}

func federated(rejected ...int) effectspec.Spec {
	return effectspec.Spec{
		Tool:        "github.create_issue",
		Route:       effectspec.RouteFederated,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingUnsupported},
		Status:      effectspec.Statuses{Accepted: []int{200}, DefinitelyRejected: rejected},
	}
}

func TestRequestShape(t *testing.T) {
	f := brokertest.NewFake(t, brokertest.Answer(200, okReply))
	b := newBroker(t, f.URL+"/")
	key := idempotency.NewKey()
	for _, tc := range []struct {
		name     string
		routing  map[string]string
		args     string
		wantBody string
	}{
		{"both ids", routing(), `{"owner": "o", "repo":"r", "n": 1.0, "html": "<a&b>"}`,
			`{"connected_account_id":"ca_123","user_id":"user-42","arguments":{"owner": "o", "repo":"r", "n": 1.0, "html": "<a&b>"}}`},
		{"account only", map[string]string{"tool_slug": "GITHUB_CREATE_AN_ISSUE", "connected_account_id": "ca_123"}, ``,
			`{"connected_account_id":"ca_123","arguments":{}}`},
		{"user only", map[string]string{"tool_slug": "GITHUB_CREATE_AN_ISSUE", "user_id": "user-42"}, `{}`,
			`{"user_id":"user-42","arguments":{}}`},
		// null hashes as {} (idempotency.RequestHash), so it is sent as {}.
		{"null args are {}", routing(), " null\n",
			`{"connected_account_id":"ca_123","user_id":"user-42","arguments":{}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.Requests())
			res := broker.Target(b, "github.create_issue", tc.routing).Send(context.Background(),
				retry.Attempt{Key: key, Number: 1, Arguments: json.RawMessage(tc.args), Spec: federated()})
			if res.Phase != retry.Responded || res.Status != 200 || string(res.Body) != okReply {
				t.Fatalf("result = %+v", res)
			}
			reqs := f.Requests()[before:]
			if len(reqs) != 1 {
				t.Fatalf("fake saw %d requests, want 1", len(reqs))
			}
			s := reqs[0]
			if s.Method != "POST" || s.Path != "/api/v3/tools/execute/GITHUB_CREATE_AN_ISSUE" || s.RawQuery != "" {
				t.Errorf("request = %s %s?%s", s.Method, s.Path, s.RawQuery)
			}
			if got := s.Header.Values("X-Api-Key"); len(got) != 1 || got[0] != apiKey {
				t.Errorf("x-api-key = %q", got)
			}
			if s.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type = %q", s.Header.Get("Content-Type"))
			}
			if s.Header.Get("Authorization") != "" || s.Header.Get("Idempotency-Key") != "" {
				t.Errorf("unexpected headers %v", s.Header)
			}
			if string(s.Body) != tc.wantBody {
				t.Errorf("body = %s\nwant   %s", s.Body, tc.wantBody)
			}
			if bytes.Contains(s.Body, []byte(key.String())) || strings.Contains(fmt.Sprint(s.Header), key.String()) {
				t.Errorf("the idempotency key reached the broker")
			}
		})
	}
}

func TestDefaultBaseURL(t *testing.T) {
	b, err := composio.New(composio.Config{APIKey: apiKey})
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.Route("github.create_issue", routing())
	if err != nil {
		t.Fatal(err)
	}
	want := idempotency.Route{Connection: "ca_123", Tool: "github.create_issue", Method: "POST", Host: "backend.composio.dev",
		Path: "/api/v3/tools/execute/GITHUB_CREATE_AN_ISSUE", Binding: effectspec.BindingUnsupported, Broker: "composio"}
	if r != want {
		t.Errorf("Route = %+v\nwant    %+v", r, want)
	}
	u, _ := b.Route("t", map[string]string{"tool_slug": "X", "user_id": "u1"})
	if u.Connection != "user:u1" {
		t.Errorf("user-only Connection = %q", u.Connection)
	}
}

// TestSuccessfulFalse: a 200 whose body says successful=false is reported as
// StatusToolFailed and classified by the spec like any status.
func TestSuccessfulFalse(t *testing.T) {
	for _, tc := range []struct {
		name       string
		reply      http.HandlerFunc
		wantStatus int
		lenient    effectspec.Outcome // spec that lists 424 as definitely_rejected
		cautious   effectspec.Outcome // spec that does not list 424
	}{
		{"successful", brokertest.Answer(200, okReply), 200, effectspec.Accepted, effectspec.Accepted},
		{"failed run", brokertest.Answer(200, failReply), composio.StatusToolFailed, effectspec.DefinitelyRejected, effectspec.Unknown},
		{"composio refusal passes through", brokertest.Answer(404, `{"error":{"message":"Tool not found","status":404}}`), 404, effectspec.Unknown, effectspec.Unknown},
		{"successful=false on 201", brokertest.Answer(201, failReply), composio.StatusToolFailed, effectspec.DefinitelyRejected, effectspec.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := brokertest.NewFake(t, tc.reply)
			res := newBroker(t, f.URL).Dispatch(context.Background(), broker.Call{Tool: "t", Routing: routing()})
			if res.Phase != retry.Responded || res.Status != tc.wantStatus || res.Err != nil {
				t.Fatalf("result = %+v, want responded %d", res, tc.wantStatus)
			}
			if res.Header.Get("Content-Type") != "application/json" || len(res.Body) == 0 {
				t.Errorf("headers or body not kept: %+v", res)
			}
			if got := federated(424).Classify(res.Status); got != tc.lenient {
				t.Errorf("spec listing 424: %s, want %s", got, tc.lenient)
			}
			if got := federated().Classify(res.Status); got != tc.cautious {
				t.Errorf("spec not listing 424: %s, want %s", got, tc.cautious)
			}
			if n := len(f.Requests()); n != 1 {
				t.Errorf("fake saw %d requests, want 1", n)
			}
		})
	}
}

func TestUndecidableReplyIsPostSend(t *testing.T) {
	for name, reply := range map[string]http.HandlerFunc{
		"not JSON":          brokertest.Answer(200, `<html>ok</html>`),
		"empty":             brokertest.Answer(200, ``),
		"array":             brokertest.Answer(200, `[{"successful":true}]`),
		"no successful":     brokertest.Answer(200, `{"data":{}}`),
		"null successful":   brokertest.Answer(200, `{"successful":null}`),
		"string successful": brokertest.Answer(200, `{"successful":"true"}`),
		"duplicate":         brokertest.Answer(200, `{"successful":false,"successful":true}`),
		"case variant":      brokertest.Answer(200, `{"successful":false,"Successful":true}`),
		"trailing data":     brokertest.Answer(200, `{"successful":true} {}`),
		"truncated": func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"successful":true,"data":"`+strings.Repeat("x", 200)+`"}`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := brokertest.NewFake(t, reply)
			b, err := composio.New(composio.Config{BaseURL: f.URL, APIKey: apiKey, Executor: &retry.Executor{MaxResponseBytes: 100}})
			if err != nil {
				t.Fatal(err)
			}
			res := b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: routing()})
			if res.Phase != retry.PostSend || !errors.Is(res.Err, broker.ErrUndecidableReply) || res.Status != 200 {
				t.Fatalf("result = %+v, want post_send ErrUndecidableReply", res)
			}
			var re *retry.Error
			if !errors.As(res.Err, &re) || re.Phase != retry.PostSend {
				t.Errorf("err %v is not a post_send retry.Error", res.Err)
			}
			if n := len(f.Requests()); n != 1 {
				t.Errorf("fake saw %d requests, want 1", n)
			}
		})
	}
}

func BenchmarkDispatch(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, okReply)
	}))
	defer srv.Close()
	cb := newBroker(b, srv.URL)
	call := broker.Call{Tool: "t", Routing: routing(), Arguments: json.RawMessage(`{"owner":"o","repo":"r","title":"t"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if res := cb.Dispatch(context.Background(), call); res.Phase != retry.Responded || res.Status != 200 {
			b.Fatal(res.Err)
		}
	}
}
