package idempotency_test

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
)

func TestFingerprint(t *testing.T) {
	base := idempotency.Route{Connection: "conn_stripe", Provider: "stripe", Tool: "stripe.create_charge",
		Method: "POST", Host: "api.stripe.com", Path: "/v1/charges", Binding: effectspec.BindingHeader}
	fp := base.Fingerprint()
	if !strings.HasPrefix(fp, "sha256:") || len(fp) != 7+64 {
		t.Fatalf("fingerprint %q", fp)
	}
	if base.Fingerprint() != fp {
		t.Fatal("fingerprint not deterministic")
	}
	variants := []func(r *idempotency.Route){
		func(r *idempotency.Route) { r.Connection = "conn_other" },
		func(r *idempotency.Route) { r.Provider = "adyen" },
		func(r *idempotency.Route) { r.Tool = "stripe.refund" },
		func(r *idempotency.Route) { r.Method = "PUT" },
		func(r *idempotency.Route) { r.Host = "api.stripe.test" },
		func(r *idempotency.Route) { r.Path = "/v2/charges" },
		func(r *idempotency.Route) { r.Binding = effectspec.BindingUnsupported },
		func(r *idempotency.Route) { r.Broker = "nango" },
	}
	for i, mut := range variants {
		r := base
		mut(&r)
		if r.Fingerprint() == fp {
			t.Errorf("variant %d did not change the fingerprint", i)
		}
	}
}

func TestRouteRecord(t *testing.T) {
	r := idempotency.Route{Connection: "conn_stripe", Provider: "stripe", Tool: "stripe.create_charge",
		Method: "POST", Host: "api.stripe.com", Path: "/v1/charges", Binding: effectspec.BindingHeader, Broker: "nango"}
	want := receipt.RouteRecord{Connection: "conn_stripe", Provider: "stripe", Tool: "stripe.create_charge",
		Method: "POST", Host: "api.stripe.com", Path: "/v1/charges", Fingerprint: r.Fingerprint()}
	if got := r.Record(); got != want {
		t.Fatalf("Record() = %+v, want %+v", got, want)
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"connection":"conn_stripe","provider":"stripe","tool":"stripe.create_charge","method":"POST","host":"api.stripe.com","path":"/v1/charges","fingerprint":"`+r.Fingerprint()+`"}` {
		t.Fatalf("route record JSON %s", b)
	}
}

// TestFingerprintCoversEveryFact: each fact of docs/DESIGN.md, "Request hash
// and dispatch fingerprint" moves the fingerprint; another vendor account
// (secret env name), scheme, or the header or pointer the key goes to is
// another destination.
func TestFingerprintCoversEveryFact(t *testing.T) {
	base := idempotency.Route{Connection: "c", Provider: "p", Tool: "t", Method: "POST", Host: "h", Path: "/x",
		Binding: "header", Scheme: "https", BindingName: "idempotency-key", Credential: "K"}
	seen := map[string]string{base.Fingerprint(): "base"}
	for name, mut := range map[string]func(*idempotency.Route){
		"connection": func(r *idempotency.Route) { r.Connection = "c2" }, "provider": func(r *idempotency.Route) { r.Provider = "p2" },
		"tool": func(r *idempotency.Route) { r.Tool = "t2" }, "method": func(r *idempotency.Route) { r.Method = "PUT" },
		"host": func(r *idempotency.Route) { r.Host = "h2" }, "path": func(r *idempotency.Route) { r.Path = "/y" },
		"binding": func(r *idempotency.Route) { r.Binding = "body_pointer" }, "scheme": func(r *idempotency.Route) { r.Scheme = "http" },
		"binding name": func(r *idempotency.Route) { r.BindingName = "x-idem" }, "secret env": func(r *idempotency.Route) { r.Credential = "K2" },
	} {
		r := base
		mut(&r)
		fp := r.Fingerprint()
		if prev, dup := seen[fp]; dup {
			t.Errorf("changing the %s leaves the fingerprint of %s", name, prev)
		}
		seen[fp] = name
	}
}

func mustSpec(t *testing.T, s effectspec.Spec) effectspec.Spec {
	t.Helper()
	sp, err := effectspec.New(s)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// TestNewRouteFacts: the constructor derives every fact of each route kind
// from the spec and the target.
func TestNewRouteFacts(t *testing.T) {
	st := effectspec.Statuses{Accepted: []int{200}}
	header := mustSpec(t, effectspec.Spec{Tool: "stripe.create_charge", Effect: effectspec.EffectWrite,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingHeader, Header: "Idempotency-Key"}, Status: st})
	pointer := mustSpec(t, effectspec.Spec{Tool: "crm.create", Effect: effectspec.EffectWrite, Route: effectspec.RouteNative,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingBodyPointer, Pointer: "/meta/key"}, Status: st})
	unsupported := mustSpec(t, effectspec.Spec{Tool: "chat.post", Effect: effectspec.EffectWrite, Status: st})
	federated := mustSpec(t, effectspec.Spec{Tool: "crm.create_contact", Effect: effectspec.EffectWrite,
		Route: effectspec.RouteFederated, Status: st})
	keyed := mustSpec(t, effectspec.Spec{Tool: "ledger.post", Effect: effectspec.EffectWrite,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingInProcessKeyed}})
	inproc := mustSpec(t, effectspec.Spec{Tool: "notes.create", Effect: effectspec.EffectWrite,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingInProcess}})
	meta := mustSpec(t, effectspec.Spec{Tool: "pay.create", Effect: effectspec.EffectWrite,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingMeta}})
	metaNamed := mustSpec(t, effectspec.Spec{Tool: "pay.create", Effect: effectspec.EffectWrite,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingMeta, Meta: "com.example/Key"}})
	argPointer := mustSpec(t, effectspec.Spec{Tool: "tracker.create", Effect: effectspec.EffectWrite,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingBodyPointer, Pointer: "/idempotency_key"}})
	mcpUnsupported := mustSpec(t, effectspec.Spec{Tool: "mail.send", Effect: effectspec.EffectWrite})
	for _, tc := range []struct {
		name string
		spec effectspec.Spec
		t    idempotency.RouteTarget
		want idempotency.Route
		kind effectspec.RouteKind
	}{
		{"native header", header, idempotency.RouteTarget{Connection: "conn_stripe", Provider: "stripe",
			URL: "HTTPS://api.stripe.com/v1/charges/{id}/capture", Credential: "STRIPE_KEY"},
			idempotency.Route{Connection: "conn_stripe", Provider: "stripe", Tool: "stripe.create_charge", Method: "POST",
				Host: "api.stripe.com", Path: "/v1/charges/{id}/capture", Binding: "header", Scheme: "https",
				BindingName: "idempotency-key", Credential: "STRIPE_KEY"}, effectspec.RouteNative},
		{"native body pointer", pointer, idempotency.RouteTarget{Connection: "conn_crm", Provider: "crm", Method: "PUT",
			URL: "http://127.0.0.1:9000/api/a%2Fb", Credential: "CRM_KEY"},
			idempotency.Route{Connection: "conn_crm", Provider: "crm", Tool: "crm.create", Method: "PUT",
				Host: "127.0.0.1:9000", Path: "/api/a%2Fb", Binding: "body_pointer", Scheme: "http",
				BindingName: "/meta/key", Credential: "CRM_KEY"}, effectspec.RouteNative},
		{"native unsupported, no credential", unsupported, idempotency.RouteTarget{Connection: "conn_chat", Provider: "chat",
			URL: "https://chat.example", Credential: idempotency.NoCredential},
			idempotency.Route{Connection: "conn_chat", Provider: "chat", Tool: "chat.post", Method: "POST",
				Host: "chat.example", Path: "/", Binding: "unsupported", Scheme: "https", Credential: "none"}, effectspec.RouteNative},
		{"federated", federated, idempotency.RouteTarget{Broker: "nango", Connection: "user-42", Provider: "hubspot",
			Method: "PATCH", URL: "https://api.nango.dev/proxy/crm/v3/objects?limit=1"},
			idempotency.Route{Connection: "user-42", Provider: "hubspot", Tool: "crm.create_contact", Method: "PATCH",
				Host: "api.nango.dev", Path: "/proxy/crm/v3/objects?limit=1", Binding: "unsupported", Broker: "nango"},
			effectspec.RouteFederated},
		{"in-process", inproc, idempotency.RouteTarget{Connection: "inproc", Provider: "notes", Server: "gw-eu-1"},
			idempotency.Route{Connection: "inproc", Provider: "notes", Tool: "notes.create", Host: "gw-eu-1",
				Path: "notes.create", Binding: "in_process", Scheme: "inproc", Credential: "none"}, effectspec.RouteInProcess},
		{"in-process keyed, account", keyed, idempotency.RouteTarget{Connection: "inproc", Provider: "ledger",
			Server: "gw-eu-1", Credential: "LEDGER_ACCOUNT"},
			idempotency.Route{Connection: "inproc", Provider: "ledger", Tool: "ledger.post", Host: "gw-eu-1",
				Path: "ledger.post", Binding: "in_process_keyed", Scheme: "inproc", Credential: "LEDGER_ACCOUNT"},
			effectspec.RouteInProcess},
		{"MCP meta, default name", meta, idempotency.RouteTarget{Connection: "conn_pay", Provider: "pay",
			URL: "HTTPS://mcp.pay.example/mcp", Credential: "PAY_TOKEN", UpstreamTool: "create_payment"},
			idempotency.Route{Connection: "conn_pay", Provider: "pay", Tool: "pay.create", Host: "mcp.pay.example",
				Path: "/mcp", Binding: "meta", Scheme: "https", BindingName: effectspec.DefaultMetaName,
				Credential: "PAY_TOKEN", UpstreamTool: "create_payment"}, effectspec.RouteMCP},
		{"MCP meta, named", metaNamed, idempotency.RouteTarget{Connection: "conn_pay", Provider: "pay",
			URL: "http://127.0.0.1:8080/", Credential: idempotency.NoCredential, UpstreamTool: "pay.create"},
			idempotency.Route{Connection: "conn_pay", Provider: "pay", Tool: "pay.create", Host: "127.0.0.1:8080",
				Path: "/", Binding: "meta", Scheme: "http", BindingName: "com.example/Key",
				Credential: "none", UpstreamTool: "pay.create"}, effectspec.RouteMCP},
		{"MCP body pointer", argPointer, idempotency.RouteTarget{Connection: "conn_tr", Provider: "tracker",
			URL: "https://tracker.example/mcp", Credential: "TR_TOKEN", UpstreamTool: "create_issue"},
			idempotency.Route{Connection: "conn_tr", Provider: "tracker", Tool: "tracker.create", Host: "tracker.example",
				Path: "/mcp", Binding: "body_pointer", Scheme: "https", BindingName: "/idempotency_key",
				Credential: "TR_TOKEN", UpstreamTool: "create_issue"}, effectspec.RouteMCP},
		{"MCP unsupported", mcpUnsupported, idempotency.RouteTarget{Connection: "conn_mail", Provider: "mail",
			URL: "https://mail.example/mcp", Credential: "MAIL_TOKEN", UpstreamTool: "send"},
			idempotency.Route{Connection: "conn_mail", Provider: "mail", Tool: "mail.send", Host: "mail.example",
				Path: "/mcp", Binding: "unsupported", Scheme: "https", Credential: "MAIL_TOKEN", UpstreamTool: "send"},
			effectspec.RouteMCP},
	} {
		got, err := idempotency.NewRoute(tc.spec, tc.t)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
		if got.Kind() != tc.kind || got.Check() != nil {
			t.Errorf("%s: kind %s, check %v", tc.name, got.Kind(), got.Check())
		}
	}
}

// TestNewRouteRefuses: a target that lacks a fact, or gives one its kind
// does not have, is ErrWeakRoute, and the error quotes none of its values.
func TestNewRouteRefuses(t *testing.T) {
	st := effectspec.Statuses{Accepted: []int{200}}
	native := mustSpec(t, effectspec.Spec{Tool: "pay.charge", Effect: effectspec.EffectWrite,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingHeader, Header: "Idempotency-Key"}, Status: st})
	federated := mustSpec(t, effectspec.Spec{Tool: "crm.create", Effect: effectspec.EffectWrite,
		Route: effectspec.RouteFederated, Status: st})
	inprocSpec := mustSpec(t, effectspec.Spec{Tool: "notes.create", Effect: effectspec.EffectWrite,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingInProcess}})
	metaSpec := mustSpec(t, effectspec.Spec{Tool: "pay.create", Effect: effectspec.EffectWrite,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingMeta}})
	mcp := idempotency.RouteTarget{Connection: "c", Provider: "p", URL: "https://pay.example/mcp", Credential: "K",
		UpstreamTool: "create"}
	withMCP := func(mut func(*idempotency.RouteTarget)) idempotency.RouteTarget {
		t := mcp
		mut(&t)
		return t
	}
	ok := idempotency.RouteTarget{Connection: "conn_pay", Provider: "pay", URL: "https://pay.example/charge", Credential: "PAY_KEY"}
	with := func(mut func(*idempotency.RouteTarget)) idempotency.RouteTarget {
		t := ok
		mut(&t)
		return t
	}
	for name, tc := range map[string]struct {
		spec effectspec.Spec
		t    idempotency.RouteTarget
	}{
		"no credential":        {native, with(func(t *idempotency.RouteTarget) { t.Credential = "" })},
		"no connection":        {native, with(func(t *idempotency.RouteTarget) { t.Connection = "" })},
		"no provider":          {native, with(func(t *idempotency.RouteTarget) { t.Provider = "" })},
		"no URL":               {native, with(func(t *idempotency.RouteTarget) { t.URL = "" })},
		"relative URL":         {native, with(func(t *idempotency.RouteTarget) { t.URL = "/charge" })},
		"no host":              {native, with(func(t *idempotency.RouteTarget) { t.URL = "https:///charge" })},
		"userinfo":             {native, with(func(t *idempotency.RouteTarget) { t.URL = "https://sk_live_secret@pay.example/charge" })},
		"query":                {native, with(func(t *idempotency.RouteTarget) { t.URL = "https://pay.example/charge?api_key=sk_live_secret" })},
		"fragment":             {native, with(func(t *idempotency.RouteTarget) { t.URL = "https://pay.example/charge#sk_live_secret" })},
		"broker on native":     {native, with(func(t *idempotency.RouteTarget) { t.Broker = "nango" })},
		"inproc URL":           {native, with(func(t *idempotency.RouteTarget) { t.URL = "inproc://gw/pay.charge" })},
		"federated, no broker": {federated, idempotency.RouteTarget{Connection: "c", URL: "https://broker.example/x"}},
		"federated credential": {federated, idempotency.RouteTarget{Broker: "nango", Connection: "c",
			URL: "https://broker.example/x", Credential: "K"}},
		"federated server": {federated, idempotency.RouteTarget{Broker: "nango", Connection: "c",
			URL: "https://broker.example/x", Server: "gw"}},
		"in-process URL": {inprocSpec, idempotency.RouteTarget{Connection: "c", Provider: "p", Server: "gw",
			URL: "https://pay.example/charge"}},
		"in-process, no provider":    {inprocSpec, idempotency.RouteTarget{Connection: "c", Server: "gw"}},
		"in-process, header binding": {native, idempotency.RouteTarget{Connection: "c", Provider: "p", Server: "gw"}},
		"native, in-process binding": {inprocSpec, idempotency.RouteTarget{Connection: "c", Provider: "p",
			URL: "https://pay.example/charge", Credential: "K"}},
		"no tool":                {effectspec.Spec{}, ok},
		"native, meta binding":   {metaSpec, ok},
		"in-process, meta":       {metaSpec, idempotency.RouteTarget{Connection: "c", Provider: "p", Server: "gw"}},
		"MCP, header binding":    {native, mcp},
		"MCP, in-process":        {inprocSpec, mcp},
		"MCP and server":         {metaSpec, withMCP(func(t *idempotency.RouteTarget) { t.Server = "gw" })},
		"MCP, federated":         {federated, idempotency.RouteTarget{Broker: "nango", Connection: "c", URL: "https://broker.example/x", UpstreamTool: "x"}},
		"MCP method":             {metaSpec, withMCP(func(t *idempotency.RouteTarget) { t.Method = "POST" })},
		"MCP, no credential":     {metaSpec, withMCP(func(t *idempotency.RouteTarget) { t.Credential = "" })},
		"MCP, no provider":       {metaSpec, withMCP(func(t *idempotency.RouteTarget) { t.Provider = "" })},
		"MCP, no URL":            {metaSpec, withMCP(func(t *idempotency.RouteTarget) { t.URL = "" })},
		"MCP, query":             {metaSpec, withMCP(func(t *idempotency.RouteTarget) { t.URL = "https://pay.example/mcp?token=sk_live_secret" })},
		"MCP, userinfo":          {metaSpec, withMCP(func(t *idempotency.RouteTarget) { t.URL = "https://sk_live_secret@pay.example/mcp" })},
		"MCP, tool with a space": {metaSpec, withMCP(func(t *idempotency.RouteTarget) { t.UpstreamTool = "sk_live_secret x" })},
		"MCP, tool too long":     {metaSpec, withMCP(func(t *idempotency.RouteTarget) { t.UpstreamTool = strings.Repeat("t", 129) })},
		"MCP, inproc URL":        {metaSpec, withMCP(func(t *idempotency.RouteTarget) { t.URL = "inproc://gw/x" })},
	} {
		_, err := idempotency.NewRoute(tc.spec, tc.t)
		if !errors.Is(err, idempotency.ErrWeakRoute) {
			t.Errorf("%s: %v, want ErrWeakRoute", name, err)
			continue
		}
		if strings.Contains(err.Error(), "sk_live_secret") {
			t.Errorf("%s: the error quotes the URL: %v", name, err)
		}
	}
}

// TestFingerprintStable: the fingerprint is of the canonical JSON whose names
// docs/DESIGN.md, "Request hash and dispatch fingerprint" fixes; the credential
// id is still "secret_env", and NoCredential is left out, so routes pinned
// before NewRoute (refserver's with and without secret_env) keep their
// fingerprints.
func TestFingerprintStable(t *testing.T) {
	r := idempotency.Route{Connection: "conn_stripe", Provider: "stripe", Tool: "stripe.create_charge", Method: "POST",
		Host: "api.stripe.com", Path: "/v1/charges/{id}/capture", Binding: "header", Scheme: "https",
		BindingName: "idempotency-key", Credential: "STRIPE_KEY"}
	// sha256 of {"binding":"header","binding_name":"idempotency-key","connection":"conn_stripe",
	// "host":"api.stripe.com","method":"POST","path":"/v1/charges/{id}/capture","provider":"stripe",
	// "scheme":"https","secret_env":"STRIPE_KEY","tool":"stripe.create_charge"}
	if got, want := r.Fingerprint(), "sha256:25653d4e87dae897e4c4e8a8b68f59a83b47116bd789e862edd0580d7d8ca1db"; got != want {
		t.Errorf("fingerprint %s, want %s", got, want)
	}
	// An MCP route: its upstream tool is a fact, named "upstream_tool"; no
	// method. sha256 of {"binding":"meta","binding_name":"dev.obol/idempotency-key",
	// "connection":"conn_pay","host":"mcp.pay.example","path":"/mcp","provider":"pay",
	// "scheme":"https","secret_env":"PAY_TOKEN","tool":"pay.create","upstream_tool":"create_payment"}
	m := idempotency.Route{Connection: "conn_pay", Provider: "pay", Tool: "pay.create", Host: "mcp.pay.example", Path: "/mcp",
		Binding: "meta", Scheme: "https", BindingName: effectspec.DefaultMetaName, Credential: "PAY_TOKEN", UpstreamTool: "create_payment"}
	mcpJSON := `{"binding":"meta","binding_name":"dev.obol/idempotency-key","connection":"conn_pay","host":"mcp.pay.example",` +
		`"path":"/mcp","provider":"pay","scheme":"https","secret_env":"PAY_TOKEN","tool":"pay.create","upstream_tool":"create_payment"}`
	if got, want := m.Fingerprint(), fmt.Sprintf("sha256:%x", sha256.Sum256([]byte(mcpJSON))); got != want {
		t.Errorf("MCP fingerprint %s, want %s", got, want)
	}
	if err := m.Check(); err != nil {
		t.Errorf("MCP route: %v", err)
	}
	native := m
	native.UpstreamTool, native.Method = "", "POST"
	if err := native.Check(); !errors.Is(err, idempotency.ErrWeakRoute) {
		t.Errorf("a meta binding on a native route: %v", err)
	}
	other := m
	other.UpstreamTool = "create_refund"
	if other.Fingerprint() == m.Fingerprint() {
		t.Error("another upstream tool, the same fingerprint")
	}
	// The same without "secret_env".
	const none = "sha256:7c6c889716d7facaf77b10b302b9c580908b428dfc0d53f9b5e41286bf9e3f76"
	for _, c := range []string{"", idempotency.NoCredential} {
		r.Credential = c
		if got := r.Fingerprint(); got != none {
			t.Errorf("credential %q: fingerprint %s, want %s", c, got, none)
		}
	}
}
