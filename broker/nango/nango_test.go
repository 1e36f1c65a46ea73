package nango_test

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
	"github.com/obol-gateway/obol/broker/nango"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

const secret = "nango-sk-3f9a-THE-SECRET"

// seen is one request as the fake Nango read it.
type seen struct {
	Method, Path, RawQuery string
	Header                 http.Header
	Body                   []byte
}

// fake is a Nango that records every request before it answers.
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
		if f.reply != nil {
			f.reply(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":7}`)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fake) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.reqs...)
}

// resetAfterRead reads the whole request, then resets the connection.
func resetAfterRead(w http.ResponseWriter, r *http.Request) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

func newBroker(t testing.TB, base string) *nango.Broker {
	t.Helper()
	b, err := nango.New(nango.Config{BaseURL: base, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func proxyRouting(method, path string) map[string]string {
	r := map[string]string{
		"connection_id":       "user-42",
		"provider_config_key": "hubspot",
		"path":                path,
	}
	if method != "" {
		r["method"] = method
	}
	return r
}

func actionRouting(action string) map[string]string {
	return map[string]string{"connection_id": "user-42", "provider_config_key": "github", "action": action}
}

func federated() effectspec.Spec {
	return effectspec.Spec{
		Tool:        "crm.create_contact",
		Route:       effectspec.RouteFederated,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingUnsupported},
		Status:      effectspec.Statuses{Accepted: []int{200, 201}, DefinitelyRejected: []int{400}},
	}
}

// checkCommon asserts what every Nango request carries, and what none does.
func checkCommon(t *testing.T, s seen, conn, provider string) {
	t.Helper()
	want := map[string]string{
		"Authorization":       "Bearer " + secret,
		"Connection-Id":       conn,
		"Provider-Config-Key": provider,
		"Retries":             "0",
	}
	for k, v := range want {
		if got := s.Header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("header %s = %q, want exactly [%q]", k, got, v)
		}
	}
	for k := range s.Header {
		switch {
		case strings.EqualFold(k, "Retry-On"), strings.EqualFold(k, "X-Max-Retries"):
			t.Errorf("header %s sent: broker retries must stay off", k)
		case strings.HasPrefix(strings.ToLower(k), "nango-proxy-"):
			t.Errorf("header %s sent: nothing of ours may reach the vendor", k)
		case strings.EqualFold(k, "Idempotency-Key"):
			t.Errorf("header %s sent: a broker never propagates the key", k)
		}
	}
}

func TestProxyRequestShape(t *testing.T) {
	f := newFake(t, nil)
	b := newBroker(t, f.URL+"/base/")
	key := idempotency.NewKey()
	tests := []struct {
		name       string
		routing    map[string]string
		args       string
		wantMethod string
		wantPath   string
		wantQuery  string
		wantBody   string
	}{
		{"default POST", proxyRouting("", "/crm/v3/objects/contacts"), `{"email": "a@b.c",  "n": 1.50}`,
			"POST", "/base/proxy/crm/v3/objects/contacts", "", `{"email": "a@b.c",  "n": 1.50}`},
		{"PATCH no leading slash", proxyRouting("patch", "crm/v3/objects/contacts/9"), `{"x":[1,2]}`,
			"PATCH", "/base/proxy/crm/v3/objects/contacts/9", "", `{"x":[1,2]}`},
		{"PUT", proxyRouting("PUT", "/a"), `[1]`, "PUT", "/base/proxy/a", "", `[1]`},
		{"DELETE with query", proxyRouting("DELETE", "/a/b?hard=true"), `{}`, "DELETE", "/base/proxy/a/b", "hard=true", `{}`},
		{"GET sends no body", proxyRouting("GET", "/me?limit=5"), ``, "GET", "/base/proxy/me", "limit=5", ``},
		{"GET with null args", proxyRouting("GET", "/me"), `null`, "GET", "/base/proxy/me", "", ``},
		{"absent args are {}", proxyRouting("POST", "/x"), ``, "POST", "/base/proxy/x", "", `{}`},
		{"null args are {}", proxyRouting("POST", "/x"), "\tnull ", "POST", "/base/proxy/x", "", `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(f.requests())
			target := broker.Target(b, "crm.create_contact", tc.routing)
			res := target.Send(context.Background(), retry.Attempt{Key: key, Number: 1, Arguments: json.RawMessage(tc.args), Spec: federated()})
			if res.Phase != retry.Responded || res.Status != 200 || string(res.Body) != `{"id":7}` {
				t.Fatalf("result = %+v", res)
			}
			reqs := f.requests()[before:]
			if len(reqs) != 1 {
				t.Fatalf("fake saw %d requests, want 1", len(reqs))
			}
			s := reqs[0]
			if s.Method != tc.wantMethod || s.Path != tc.wantPath || s.RawQuery != tc.wantQuery {
				t.Errorf("request = %s %s?%s, want %s %s?%s", s.Method, s.Path, s.RawQuery, tc.wantMethod, tc.wantPath, tc.wantQuery)
			}
			if string(s.Body) != tc.wantBody {
				t.Errorf("body = %q, want %q (byte for byte)", s.Body, tc.wantBody)
			}
			if tc.wantBody != "" && s.Header.Get("Content-Type") != "application/json" {
				t.Errorf("Content-Type = %q", s.Header.Get("Content-Type"))
			}
			if s.Header.Get("X-Async") != "" {
				t.Errorf("X-Async sent on a proxy call")
			}
			checkCommon(t, s, "user-42", "hubspot")
			if bytes.Contains(s.Body, []byte(key.String())) || strings.Contains(fmt.Sprint(s.Header), key.String()) {
				t.Errorf("the idempotency key reached the broker")
			}
		})
	}
}

func TestActionRequestShape(t *testing.T) {
	f := newFake(t, nil)
	b := newBroker(t, f.URL)
	res := b.Dispatch(context.Background(), broker.Call{
		Tool:      "github.create_issue",
		Arguments: json.RawMessage(`{"repo":"o/r", "title":"t\u00e9 <b>"}`),
		Routing:   actionRouting("create <issue>"),
		Attempt:   1,
	})
	if res.Phase != retry.Responded || res.Status != 200 {
		t.Fatalf("result = %+v", res)
	}
	reqs := f.requests()
	if len(reqs) != 1 {
		t.Fatalf("fake saw %d requests, want 1", len(reqs))
	}
	s := reqs[0]
	if s.Method != "POST" || s.Path != "/action/trigger" || s.RawQuery != "" {
		t.Errorf("request = %s %s?%s", s.Method, s.Path, s.RawQuery)
	}
	checkCommon(t, s, "user-42", "github")
	if got := s.Header.Values("X-Async"); len(got) != 1 || got[0] != "false" {
		t.Errorf("X-Async = %q, want [false]", got)
	}
	if s.Header.Get("Content-Type") != "application/json" {
		t.Errorf("Content-Type = %q", s.Header.Get("Content-Type"))
	}
	want := `{"action_name":"create \u003cissue\u003e","input":{"repo":"o/r", "title":"t\u00e9 <b>"}}`
	if string(s.Body) != want {
		t.Errorf("body = %s\nwant   %s", s.Body, want)
	}
}

func TestRetriesZeroOnEveryCall(t *testing.T) {
	f := newFake(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	b := newBroker(t, f.URL)
	routings := []map[string]string{
		proxyRouting("GET", "/a"), proxyRouting("POST", "/a"), proxyRouting("PUT", "/a"),
		proxyRouting("PATCH", "/a"), proxyRouting("DELETE", "/a"), actionRouting("x"),
	}
	for _, r := range routings {
		b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: r})
	}
	reqs := f.requests()
	if len(reqs) != len(routings) {
		t.Fatalf("fake saw %d requests, want %d", len(reqs), len(routings))
	}
	for _, s := range reqs {
		if got := s.Header.Values("Retries"); len(got) != 1 || got[0] != "0" {
			t.Errorf("%s %s: Retries = %q, want [0]", s.Method, s.Path, got)
		}
		if s.Header.Values("Retry-On") != nil || s.Header.Values("X-Max-Retries") != nil {
			t.Errorf("%s %s: a retry header was sent", s.Method, s.Path)
		}
	}
}

// TestFaultMatrix: the retry package's phases hold through the broker, and
// the adapter never sends a second request of its own.
func TestFaultMatrix(t *testing.T) {
	t.Run("503 is responded and not retried", func(t *testing.T) {
		for _, routing := range []map[string]string{proxyRouting("POST", "/a"), actionRouting("x")} {
			f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, "busy")
			})
			res := newBroker(t, f.URL).Dispatch(context.Background(), broker.Call{Tool: "t", Routing: routing})
			if res.Phase != retry.Responded || res.Status != 503 || string(res.Body) != "busy" || res.Err != nil {
				t.Errorf("result = %+v", res)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("fake saw %d requests, want 1", n)
			}
		}
	})
	t.Run("reset after the request was read is post_send", func(t *testing.T) {
		for _, routing := range []map[string]string{proxyRouting("POST", "/a"), actionRouting("x")} {
			f := newFake(t, resetAfterRead)
			res := newBroker(t, f.URL).Dispatch(context.Background(), broker.Call{Tool: "t", Routing: routing, Arguments: json.RawMessage(`{"a":1}`)})
			if res.Phase != retry.PostSend || res.Err == nil {
				t.Errorf("result = %+v, want post_send", res)
			}
			if n := len(f.requests()); n != 1 {
				t.Errorf("fake saw %d requests, want 1", n)
			}
		}
	})
	t.Run("connection refused is before_send", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		res := newBroker(t, "http://"+addr).Dispatch(context.Background(), broker.Call{Tool: "t", Routing: actionRouting("x")})
		if res.Phase != retry.BeforeSend || res.Err == nil {
			t.Errorf("result = %+v, want before_send", res)
		}
		var re *retry.Error
		if !errors.As(res.Err, &re) || re.Reason != "connection refused" {
			t.Errorf("err = %v, want a retry.Error for connection refused", res.Err)
		}
	})
	t.Run("dead keep-alive connection is not re-sent", func(t *testing.T) {
		// The first call leaves a keep-alive connection; the fake then
		// resets the second call's connection after reading it. Go's
		// transport would silently re-send such a request on a new
		// connection; the Executor must not.
		var calls int
		var mu sync.Mutex
		f := newFake(t, func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if n == 1 {
				w.WriteHeader(200)
				return
			}
			resetAfterRead(w, r)
		})
		b := newBroker(t, f.URL)
		for i, want := range []retry.Phase{retry.Responded, retry.PostSend} {
			res := b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: proxyRouting("POST", "/a"), Arguments: json.RawMessage(`{}`)})
			if res.Phase != want {
				t.Fatalf("call %d: phase %s, want %s (%v)", i+1, res.Phase, want, res.Err)
			}
		}
		if n := len(f.requests()); n != 2 {
			t.Errorf("fake saw %d requests, want 2 (one per Dispatch)", n)
		}
	})
}

func TestConfigRefused(t *testing.T) {
	ok := nango.Config{BaseURL: "https://api.nango.dev", Secret: secret}
	tests := []struct {
		name   string
		mutate func(*nango.Config)
		want   error
		field  string
	}{
		{"retries", func(c *nango.Config) { c.Retries = 3 }, broker.ErrRetriesEnabled, "Retries"},
		{"negative retries", func(c *nango.Config) { c.Retries = -1 }, broker.ErrRetriesEnabled, "Retries"},
		{"retry on", func(c *nango.Config) { c.RetryOn = []int{429} }, broker.ErrRetriesEnabled, "RetryOn"},
		{"async", func(c *nango.Config) { c.Async = true }, broker.ErrAsync, "Async"},
		{"max retries", func(c *nango.Config) { c.MaxRetries = 2 }, broker.ErrRetriesEnabled, "MaxRetries"},
		{"no secret", func(c *nango.Config) { c.Secret = "" }, broker.ErrInvalidConfig, "Secret"},
		{"secret with newline", func(c *nango.Config) { c.Secret = secret + "\r\nX-Evil: 1" }, broker.ErrInvalidConfig, "Secret"},
		{"no base", func(c *nango.Config) { c.BaseURL = "" }, broker.ErrInvalidConfig, "BaseURL"},
		{"ftp base", func(c *nango.Config) { c.BaseURL = "ftp://h" }, broker.ErrInvalidConfig, "BaseURL"},
		{"relative base", func(c *nango.Config) { c.BaseURL = "/nango" }, broker.ErrInvalidConfig, "BaseURL"},
		{"userinfo", func(c *nango.Config) { c.BaseURL = "https://u:" + secret + "@h" }, broker.ErrInvalidConfig, "BaseURL"},
		{"query", func(c *nango.Config) { c.BaseURL = "https://h/?k=" + secret }, broker.ErrInvalidConfig, "BaseURL"},
		{"bad url", func(c *nango.Config) { c.BaseURL = "https://h/%zz" + secret }, broker.ErrInvalidConfig, "BaseURL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok
			tc.mutate(&cfg)
			b, err := nango.New(cfg)
			if b != nil || err == nil {
				t.Fatalf("New accepted %v", cfg)
			}
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
			var fe *broker.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || fe.Broker != "nango" {
				t.Errorf("err = %#v, want a FieldError for %s", err, tc.field)
			}
			if !strings.HasPrefix(err.Error(), "broker: nango: "+tc.field+": ") {
				t.Errorf("message %q does not name the field", err)
			}
		})
	}
	t.Run("async with retries names both", func(t *testing.T) {
		_, err := nango.New(nango.Config{BaseURL: "https://h", Secret: secret, Async: true, MaxRetries: 3})
		if !errors.Is(err, broker.ErrAsync) || !errors.Is(err, broker.ErrRetriesEnabled) {
			t.Fatalf("err = %v", err)
		}
		if !strings.Contains(err.Error(), "Nango would retry it") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("all problems at once", func(t *testing.T) {
		_, err := nango.New(nango.Config{Retries: 1, RetryOn: []int{503}})
		for _, f := range []string{"BaseURL", "Secret", "Retries", "RetryOn"} {
			if !strings.Contains(err.Error(), "nango: "+f+": ") {
				t.Errorf("%q misses %s", err, f)
			}
		}
	})
}

func TestRoutingRefused(t *testing.T) {
	f := newFake(t, nil)
	b := newBroker(t, f.URL)
	tests := []struct {
		name    string
		routing map[string]string
		field   string
	}{
		{"nil", nil, "routing.connection_id"},
		{"no connection", map[string]string{"provider_config_key": "p", "path": "/a"}, "routing.connection_id"},
		{"no provider", map[string]string{"connection_id": "c", "path": "/a"}, "routing.provider_config_key"},
		{"header injection", map[string]string{"connection_id": "c\r\nX: y", "provider_config_key": "p", "path": "/a"}, "routing.connection_id"},
		{"neither path nor action", map[string]string{"connection_id": "c", "provider_config_key": "p"}, "routing.path"},
		{"both", map[string]string{"connection_id": "c", "provider_config_key": "p", "path": "/a", "action": "x"}, "routing.action"},
		{"method with action", map[string]string{"connection_id": "c", "provider_config_key": "p", "method": "GET", "action": "x"}, "routing.method"},
		{"empty action", actionRouting(""), "routing.action"},
		{"control char action", actionRouting("a\x00b"), "routing.action"},
		{"unknown field", map[string]string{"connection_id": "c", "provider_config_key": "p", "path": "/a", "retries": "3"}, `routing."retries"`},
		{"bad method", proxyRouting("TRACE", "/a"), "routing.method"},
		{"empty path", proxyRouting("POST", "/"), "routing.path"},
		{"query only", proxyRouting("POST", "/?a=1"), "routing.path"},
		{"dot dot", proxyRouting("POST", "/../connection/c"), "routing.path"},
		{"dot", proxyRouting("POST", "a/./b"), "routing.path"},
		{"encoded dot dot", proxyRouting("POST", "a/%2e%2E/b"), "routing.path"},
		{"encoded dot", proxyRouting("POST", "%2E/b"), "routing.path"},
		{"bad escape", proxyRouting("POST", "a/%zz"), "routing.path"},
		{"fragment", proxyRouting("POST", "a#b"), "routing.path"},
		{"space", proxyRouting("POST", "a b"), "routing.path"},
		{"backslash", proxyRouting("POST", `a\..\b`), "routing.path"},
		{"encoded slash climbs", proxyRouting("POST", "..%2f..%2fconnection"), "routing.path"},
		{"encoded backslash", proxyRouting("POST", "a%5c..%5cb"), "routing.path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Route("t", tc.routing); !isField(err, tc.field, broker.ErrInvalidRouting) {
				t.Errorf("Route err = %v, want %s", err, tc.field)
			}
			res := b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: tc.routing})
			if res.Phase != retry.BeforeSend || !isField(res.Err, tc.field, broker.ErrInvalidRouting) {
				t.Errorf("Dispatch = %+v, want before_send for %s", res, tc.field)
			}
			if !errors.Is(res.Err, retry.ErrInvalidRequest) {
				t.Errorf("Dispatch err %v does not say a repeat cannot help", res.Err)
			}
		})
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("fake saw %d requests for refused routings", n)
	}
}

func isField(err error, field string, sentinel error) bool {
	var fe *broker.FieldError
	return errors.Is(err, sentinel) && errors.As(err, &fe) && fe.Field == field
}

func TestArgumentsRefused(t *testing.T) {
	f := newFake(t, nil)
	b := newBroker(t, f.URL)
	for _, tc := range []struct {
		routing map[string]string
		args    string
	}{
		{proxyRouting("POST", "/a"), `{"a":`},
		{actionRouting("x"), `{"a":1} {}`},
		{proxyRouting("GET", "/a"), `{"q":1}`},
		{proxyRouting("GET", "/a"), `[]`},
	} {
		res := b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: tc.routing, Arguments: json.RawMessage(tc.args)})
		if res.Phase != retry.BeforeSend || !errors.Is(res.Err, broker.ErrInvalidArguments) {
			t.Errorf("%s: result %+v, want before_send ErrInvalidArguments", tc.args, res)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("fake saw %d requests", n)
	}
}

func TestRoute(t *testing.T) {
	b := newBroker(t, "https://nango.example:8443/v1/")
	got, err := b.Route("crm.create_contact", proxyRouting("patch", "/crm/v3/objects/contacts"))
	if err != nil {
		t.Fatal(err)
	}
	want := idempotency.Route{Connection: "user-42", Provider: "hubspot", Tool: "crm.create_contact", Method: "PATCH",
		Host: "nango.example:8443", Path: "/v1/proxy/crm/v3/objects/contacts", Binding: effectspec.BindingUnsupported, Broker: "nango"}
	if got != want {
		t.Errorf("Route = %+v\nwant    %+v", got, want)
	}
	a1, _ := b.Route("t", actionRouting("create issue"))
	a2, _ := b.Route("t", actionRouting("close-issue"))
	if a1.Path != "/v1/action/trigger/create%20issue" || a1.Method != "POST" {
		t.Errorf("action Route = %+v", a1)
	}
	if a1.Fingerprint() == a2.Fingerprint() {
		t.Errorf("two actions share a fingerprint")
	}
	c1, _ := b.Route("t", proxyRouting("POST", "/a"))
	r2 := proxyRouting("POST", "/a")
	r2["connection_id"] = "user-43"
	c2, _ := b.Route("t", r2)
	if c1.Fingerprint() == c2.Fingerprint() {
		t.Errorf("two connections share a fingerprint")
	}
}

// TestSecretNeverInErrors forces every error path with the secret in the
// configuration and checks every message of every error chain.
func TestSecretNeverInErrors(t *testing.T) {
	var errs []error
	collect := func(err error) {
		if err == nil {
			t.Helper()
			t.Fatal("expected an error")
		}
		errs = append(errs, err)
	}
	for _, cfg := range []nango.Config{
		{BaseURL: "https://u:" + secret + "@h", Secret: secret},
		{BaseURL: "https://h/?" + secret, Secret: secret},
		{BaseURL: "https://h#" + secret, Secret: secret},
		{BaseURL: "::" + secret, Secret: secret},
		{BaseURL: "https://h", Secret: secret + "\n"},
		{BaseURL: "https://h", Secret: secret, Retries: 1, RetryOn: []int{1}, Async: true, MaxRetries: 1},
	} {
		_, err := nango.New(cfg)
		collect(err)
	}
	refused := func() string {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		defer ln.Close()
		return "http://" + ln.Addr().String()
	}()
	reset := newFake(t, resetAfterRead)
	truncated := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		io.WriteString(w, "short")
	})
	for _, base := range []string{refused, reset.URL, truncated.URL} {
		b := newBroker(t, base)
		for _, r := range []map[string]string{proxyRouting("POST", "/a"), actionRouting("x")} {
			collect(b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: r}).Err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	collect(newBroker(t, reset.URL).Dispatch(ctx, broker.Call{Tool: "t", Routing: actionRouting("x")}).Err)
	b := newBroker(t, reset.URL)
	collect(b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: proxyRouting("POST", "../a")}).Err)
	collect(b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: proxyRouting("GET", "a"), Arguments: json.RawMessage(`{"a":1}`)}).Err)
	collect(b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: actionRouting("x"), Arguments: json.RawMessage(`{`)}).Err)
	_, err := b.Route("t", map[string]string{"x": "y"})
	collect(err)
	collect(broker.Target(b, "t", actionRouting("x")).Send(context.Background(), retry.Attempt{Spec: effectspec.Spec{Tool: "t"}}).Err)

	for _, err := range errs {
		for _, msg := range chainMessages(err) {
			if strings.Contains(msg, secret) {
				t.Errorf("secret in error text: %q", msg)
			}
		}
	}
	cfg := nango.Config{BaseURL: "https://h", Secret: secret}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "nango", cfg)
	for _, s := range []string{fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), fmt.Sprintf("%v", &cfg), logged.String()} {
		if strings.Contains(s, secret) || !strings.Contains(s, "[redacted]") {
			t.Errorf("config rendered as %q", s)
		}
	}
}

// chainMessages returns the message of err and of everything it wraps.
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

func BenchmarkDispatchProxy(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"id":7}`)
	}))
	defer srv.Close()
	nb, err := nango.New(nango.Config{BaseURL: srv.URL, Secret: secret})
	if err != nil {
		b.Fatal(err)
	}
	call := broker.Call{Tool: "t", Routing: proxyRouting("POST", "/crm/v3/objects/contacts"), Arguments: json.RawMessage(`{"email":"a@b.c"}`)}
	b.ReportAllocs()
	for b.Loop() {
		if res := nb.Dispatch(context.Background(), call); res.Phase != retry.Responded {
			b.Fatal(res.Err)
		}
	}
}
