package idempotency_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
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
	want := idempotency.RouteRecord{Connection: "conn_stripe", Provider: "stripe", Tool: "stripe.create_charge",
		Method: "POST", Host: "api.stripe.com", Path: "/v1/charges"}
	if got := r.Record(); got != want {
		t.Fatalf("Record() = %+v, want %+v", got, want)
	}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"connection":"conn_stripe","provider":"stripe","tool":"stripe.create_charge","method":"POST","host":"api.stripe.com","path":"/v1/charges"}` {
		t.Fatalf("route record JSON %s", b)
	}
}

// TestFingerprintCoversEveryFact: each fact of DESIGN.md section 5 moves the
// fingerprint; another vendor account (secret env name), scheme, or the
// header or pointer the key goes to is another destination.
func TestFingerprintCoversEveryFact(t *testing.T) {
	base := idempotency.Route{Connection: "c", Provider: "p", Tool: "t", Method: "POST", Host: "h", Path: "/x",
		Binding: "header", Scheme: "https", BindingName: "idempotency-key", SecretEnv: "K"}
	seen := map[string]string{base.Fingerprint(): "base"}
	for name, mut := range map[string]func(*idempotency.Route){
		"connection": func(r *idempotency.Route) { r.Connection = "c2" }, "provider": func(r *idempotency.Route) { r.Provider = "p2" },
		"tool": func(r *idempotency.Route) { r.Tool = "t2" }, "method": func(r *idempotency.Route) { r.Method = "PUT" },
		"host": func(r *idempotency.Route) { r.Host = "h2" }, "path": func(r *idempotency.Route) { r.Path = "/y" },
		"binding": func(r *idempotency.Route) { r.Binding = "body_pointer" }, "scheme": func(r *idempotency.Route) { r.Scheme = "http" },
		"binding name": func(r *idempotency.Route) { r.BindingName = "x-idem" }, "secret env": func(r *idempotency.Route) { r.SecretEnv = "K2" },
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
