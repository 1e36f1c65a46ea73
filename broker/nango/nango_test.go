package nango_test

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
	"github.com/obol-gateway/obol/broker/nango"
	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

const secret = "nango-sk-3f9a-THE-SECRET"

// okFake is a Nango that answers every request 200 {"id":7}.
func okFake(t *testing.T) *brokertest.Fake {
	return brokertest.NewFake(t, brokertest.Answer(200, `{"id":7}`))
}

func newBroker(t testing.TB, base string) broker.Broker {
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
func checkCommon(t *testing.T, s brokertest.Request, conn, provider string) {
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
	f := okFake(t)
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
			before := len(f.Requests())
			target := broker.Target(b, "crm.create_contact", tc.routing)
			res := target.Send(context.Background(), retry.Attempt{Key: key, Number: 1, Arguments: json.RawMessage(tc.args), Spec: federated()})
			if res.Phase != retry.Responded || res.Status != 200 || string(res.Body) != `{"id":7}` {
				t.Fatalf("result = %+v", res)
			}
			reqs := f.Requests()[before:]
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
	f := okFake(t)
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
	reqs := f.Requests()
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
	f := brokertest.NewFake(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) })
	b := newBroker(t, f.URL)
	routings := []map[string]string{
		proxyRouting("GET", "/a"), proxyRouting("POST", "/a"), proxyRouting("PUT", "/a"),
		proxyRouting("PATCH", "/a"), proxyRouting("DELETE", "/a"), actionRouting("x"),
	}
	for _, r := range routings {
		b.Dispatch(context.Background(), broker.Call{Tool: "t", Routing: r})
	}
	reqs := f.Requests()
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
		{"no base", func(c *nango.Config) { c.BaseURL = "" }, broker.ErrInvalidConfig, "BaseURL"},
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
			var fe *effectspec.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || fe.Subject != "nango" {
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

func TestArgumentsRefused(t *testing.T) {
	f := okFake(t)
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
	if n := len(f.Requests()); n != 0 {
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
