package composio_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/obol-gateway/obol/broker"
	"github.com/obol-gateway/obol/broker/composio"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

const apiKey = "ak_composio_7d1e-THE-SECRET"

type seen struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

// fake is a Composio that records every request before it answers.
type fake struct {
	*httptest.Server
	mu    sync.Mutex
	reqs  []seen
	reply http.HandlerFunc
}

func newFake(t *testing.T, reply http.HandlerFunc) *fake {
	t.Helper()
	f := &fake{reply: reply}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body})
		f.mu.Unlock()
		f.reply(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

const okReply = `{"data":{"id":1},"error":null,"successful":true,"log_id":"log_1"}`
const failReply = `{"data":{},"error":"Issue creation failed: 422","successful":false,"log_id":"log_2"}`

func resetAfterRead(w http.ResponseWriter, r *http.Request) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

func newBroker(t testing.TB, base string) *composio.Broker {
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
	f := newFake(t, answer(200, okReply))
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
			before := len(f.requests())
			res := broker.Target(b, "github.create_issue", tc.routing).Send(context.Background(),
				retry.Attempt{Key: key, Number: 1, Arguments: json.RawMessage(tc.args), Spec: federated()})
			if res.Phase != retry.Responded || res.Status != 200 || string(res.Body) != okReply {
				t.Fatalf("result = %+v", res)
			}
			reqs := f.requests()[before:]
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
		{"successful", answer(200, okReply), 200, effectspec.Accepted, effectspec.Accepted},
		{"failed run", answer(200, failReply), composio.StatusToolFailed, effectspec.DefinitelyRejected, effectspec.Unknown},
		{"composio refusal passes through", answer(404, `{"error":{"message":"Tool not found","status":404}}`), 404, effectspec.Unknown, effectspec.Unknown},
		{"successful=false on 201", answer(201, failReply), composio.StatusToolFailed, effectspec.DefinitelyRejected, effectspec.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, tc.reply)
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
			if n := len(f.requests()); n != 1 {
				t.Errorf("fake saw %d requests, want 1", n)
			}
		})
	}
}

func TestUndecidableReplyIsPostSend(t *testing.T) {
	for name, reply := range map[string]http.HandlerFunc{
		"not JSON":          answer(200, `<html>ok</html>`),
		"empty":             answer(200, ``),
		"array":             answer(200, `[{"successful":true}]`),
		"no successful":     answer(200, `{"data":{}}`),
		"null successful":   answer(200, `{"successful":null}`),
		"string successful": answer(200, `{"successful":"true"}`),
		"duplicate":         answer(200, `{"successful":false,"successful":true}`),
		"case variant":      answer(200, `{"successful":false,"Successful":true}`),
		"trailing data":     answer(200, `{"successful":true} {}`),
		"truncated": func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, `{"successful":true,"data":"`+strings.Repeat("x", 200)+`"}`)
		},
	} {
		t.Run(name, func(t *testing.T) {
			f := newFake(t, reply)
			b, err := composio.New(composio.Config{BaseURL: f.URL, APIKey: apiKey, Executor: &retry.Executor{MaxBodyBytes: 100}})
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
			if n := len(f.requests()); n != 1 {
				t.Errorf("fake saw %d requests, want 1", n)
			}
		})
	}
}

func TestFaultMatrix(t *testing.T) {
	t.Run("503 is responded and not retried", func(t *testing.T) {
		f := newFake(t, answer(503, `{"error":{"message":"busy","status":503}}`))
		res := newBroker(t, f.URL).Dispatch(context.Background(), broker.Call{Tool: "t", Routing: routing()})
		if res.Phase != retry.Responded || res.Status != 503 || res.Err != nil {
			t.Errorf("result = %+v", res)
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("fake saw %d requests, want 1", n)
		}
	})
	t.Run("reset after the request was read is post_send", func(t *testing.T) {
		f := newFake(t, resetAfterRead)
		res := newBroker(t, f.URL).Dispatch(context.Background(), broker.Call{Tool: "t", Routing: routing()})
		if res.Phase != retry.PostSend || res.Err == nil {
			t.Errorf("result = %+v, want post_send", res)
		}
		if n := len(f.requests()); n != 1 {
			t.Errorf("fake saw %d requests, want 1", n)
		}
	})
	t.Run("connection refused is before_send", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		res := newBroker(t, "http://"+addr).Dispatch(context.Background(), broker.Call{Tool: "t", Routing: routing()})
		if res.Phase != retry.BeforeSend || res.Err == nil {
			t.Errorf("result = %+v, want before_send", res)
		}
	})
}

func TestConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cfg   composio.Config
		field string
	}{
		{"no key", composio.Config{}, "APIKey"},
		{"key with newline", composio.Config{APIKey: apiKey + "\n"}, "APIKey"},
		{"ftp", composio.Config{BaseURL: "ftp://h", APIKey: apiKey}, "BaseURL"},
		{"no host", composio.Config{BaseURL: "https://", APIKey: apiKey}, "BaseURL"},
		{"userinfo", composio.Config{BaseURL: "https://k:" + apiKey + "@h", APIKey: apiKey}, "BaseURL"},
		{"query", composio.Config{BaseURL: "https://h?k=" + apiKey, APIKey: apiKey}, "BaseURL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := composio.New(tc.cfg)
			if b != nil || !errors.Is(err, broker.ErrInvalidConfig) {
				t.Fatalf("New = %v, %v", b, err)
			}
			var fe *broker.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || fe.Broker != "composio" {
				t.Errorf("err = %v, want a FieldError for %s", err, tc.field)
			}
		})
	}
}

func TestRoutingAndArgumentsRefused(t *testing.T) {
	f := newFake(t, answer(200, okReply))
	b := newBroker(t, f.URL)
	for _, tc := range []struct {
		name    string
		routing map[string]string
		args    string
		want    error
	}{
		{"no slug", map[string]string{"user_id": "u"}, `{}`, broker.ErrInvalidRouting},
		{"slug with slash", map[string]string{"tool_slug": "A/../B", "user_id": "u"}, `{}`, broker.ErrInvalidRouting},
		{"slug with dot", map[string]string{"tool_slug": "..", "user_id": "u"}, `{}`, broker.ErrInvalidRouting},
		{"no ids", map[string]string{"tool_slug": "A"}, `{}`, broker.ErrInvalidRouting},
		{"empty id", map[string]string{"tool_slug": "A", "user_id": "u", "connected_account_id": ""}, `{}`, broker.ErrInvalidRouting},
		{"unknown field", map[string]string{"tool_slug": "A", "user_id": "u", "entity_id": "e"}, `{}`, broker.ErrInvalidRouting},
		{"array args", routing(), `[1]`, broker.ErrInvalidArguments},
		{"string args", routing(), `"null"`, broker.ErrInvalidArguments},
		{"bad JSON", routing(), `{"a":`, broker.ErrInvalidArguments},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: tc.routing, Arguments: json.RawMessage(tc.args)})
			if res.Phase != retry.BeforeSend || !errors.Is(res.Err, tc.want) || !errors.Is(res.Err, retry.ErrInvalidRequest) {
				t.Errorf("result = %+v, want before_send %v", res, tc.want)
			}
			if tc.want == broker.ErrInvalidRouting {
				if _, err := b.Route("t", tc.routing); !errors.Is(err, broker.ErrInvalidRouting) {
					t.Errorf("Route err = %v", err)
				}
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("fake saw %d requests", n)
	}
}

func TestSecretNeverInErrors(t *testing.T) {
	var errs []error
	for _, cfg := range []composio.Config{
		{BaseURL: "https://u:" + apiKey + "@h", APIKey: apiKey},
		{BaseURL: "https://h/?" + apiKey, APIKey: apiKey},
		{BaseURL: "::" + apiKey, APIKey: apiKey},
		{APIKey: apiKey + " "},
	} {
		_, err := composio.New(cfg)
		errs = append(errs, err)
	}
	refused := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return "http://" + ln.Addr().String()
	}()
	reset := newFake(t, resetAfterRead)
	garbage := newFake(t, answer(200, apiKey))
	for _, base := range []string{refused, reset.URL, garbage.URL} {
		errs = append(errs, newBroker(t, base).Dispatch(context.Background(), broker.Call{Tool: "t", Routing: routing()}).Err)
	}
	b := newBroker(t, reset.URL)
	errs = append(errs,
		b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: map[string]string{"tool_slug": "x/y"}}).Err,
		b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: routing(), Arguments: json.RawMessage(`1`)}).Err,
		broker.Target(b, "t", routing()).Send(context.Background(), retry.Attempt{Spec: effectspec.Spec{Tool: "t"}}).Err,
	)
	_, err := composio.ParseReply([]byte(apiKey))
	errs = append(errs, err)
	for _, err := range errs {
		if err == nil {
			t.Fatal("an error path returned no error")
		}
		for _, msg := range chainMessages(err) {
			if strings.Contains(msg, apiKey) {
				t.Errorf("API key in error text: %q", msg)
			}
		}
	}
	cfg := composio.Config{APIKey: apiKey}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("config", "composio", cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), logged.String()} {
		if strings.Contains(s, apiKey) || !strings.Contains(s, "[redacted]") {
			t.Errorf("config rendered as %q", s)
		}
	}
}

func chainMessages(err error) []string {
	if err == nil {
		return nil
	}
	msgs := []string{err.Error()}
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		msgs = append(msgs, chainMessages(u.Unwrap())...)
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			msgs = append(msgs, chainMessages(e)...)
		}
	}
	return msgs
}

func TestParseReply(t *testing.T) {
	rep, err := composio.ParseReply([]byte(failReply))
	if err != nil || rep.Successful || string(rep.Error) != `"Issue creation failed: 422"` || rep.LogID != "log_2" || string(rep.Data) != `{}` {
		t.Errorf("ParseReply = %+v, %v", rep, err)
	}
	rep, err = composio.ParseReply([]byte(okReply))
	if err != nil || !rep.Successful || string(rep.Data) != `{"id":1}` {
		t.Errorf("ParseReply = %+v, %v", rep, err)
	}
}

// FuzzParseReply: ParseReply never panics, and whenever it decides, its
// verdict is what encoding/json reads from a body with one "successful".
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{okReply, failReply, `{"successful":true}`, `{"successful":null}`,
		`{"successful":false,"successful":true}`, `{"successful":true,"SUCCESSFUL":false}`, `[]`, `{"a":{"successful":true}}`, ``, `{"successful":true}x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		rep, err := composio.ParseReply(body)
		if err != nil {
			if !errors.Is(err, broker.ErrUndecidableReply) {
				t.Fatalf("err %v does not wrap ErrUndecidableReply", err)
			}
			return
		}
		var v struct {
			Successful *bool `json:"successful"`
		}
		if json.Unmarshal(body, &v) != nil || v.Successful == nil || *v.Successful != rep.Successful {
			t.Fatalf("ParseReply(%q) = %v, encoding/json reads %v", body, rep.Successful, v.Successful)
		}
	})
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
