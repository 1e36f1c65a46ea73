package operator_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/obol-gateway/obol/mcpgateway/admin/operator"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func run(t *testing.T, getenv func(string) string, args ...string) (code int, ok bool, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code, ok = operator.Run(context.Background(), "gw", args, &o, &e, getenv)
	return code, ok, o.String(), e.String()
}

func TestRunLeavesOtherArgumentsAlone(t *testing.T) {
	for _, args := range [][]string{nil, {"-config", "x.json"}, {"unknowns", "list"}, {"serve"}} {
		if code, ok, out, errs := run(t, env(nil), args...); ok || code != 0 || out != "" || errs != "" {
			t.Errorf("Run(%q) = %d, %v, %q, %q; want it to leave them to the server", args, code, ok, out, errs)
		}
	}
}

func TestRunUsageErrors(t *testing.T) {
	key := env(map[string]string{operator.EnvApproverKey: "ob_admin_key"})
	for _, tc := range []struct {
		getenv func(string) string
		args   []string
		want   string
	}{
		{env(nil), []string{"unknown", "list"}, "gw unknown list: set " + operator.EnvApproverKey},
		{key, []string{"unknown"}, "gw unknown: name a subcommand"},
		{key, []string{"approvals", "lst"}, `gw approvals: unknown subcommand "lst"`},
		{key, []string{"unknown", "list", "-url", "http://op:secret@127.0.0.1:1"}, "the approver key comes from " + operator.EnvApproverKey},
		{key, []string{"unknown", "settle", "idt_0123456789abcdef0123456789abcdef", "-workspace", "w", "-tool", "t", "-outcome", "maybe", "-attempts", "1", "-note", "n"}, "-outcome must be accepted or definitely_rejected"},
		{key, []string{"scope-version", "advance", "-to", "0"}, "-to must be at least 1"},
	} {
		code, ok, _, errs := run(t, tc.getenv, tc.args...)
		if !ok || code != 2 || !strings.Contains(errs, tc.want) {
			t.Errorf("Run(%q) = %d, %v, stderr %q; want exit 2 with %q", tc.args, code, ok, errs, tc.want)
		}
		if strings.Contains(errs, "secret") {
			t.Errorf("Run(%q) quoted the URL's password: %q", tc.args, errs)
		}
	}
}

// A refusal of the gateway is exit code 1 with its reason, status and
// message; the key goes in the Authorization header, never the URL.
func TestRunPrintsRefusal(t *testing.T) {
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"reason":"unauthorized","status":401,"message":"not an approver key <x>"}`)
	}))
	defer srv.Close()
	code, ok, _, errs := run(t, env(map[string]string{operator.EnvApproverKey: "ob_admin_key"}), "approvals", "list", "-url", srv.URL)
	if !ok || code != 1 || !strings.Contains(errs, "unauthorized") || !strings.Contains(errs, "401") || !strings.Contains(errs, "not an approver key <x>") {
		t.Fatalf("Run = %d, %v, stderr %q; want exit 1 naming the refusal as written", code, ok, errs)
	}
	if auth != "Bearer ob_admin_key" {
		t.Errorf("Authorization = %q", auth)
	}
}

func ExampleRun() {
	// Without the approver key in the environment, nothing is sent.
	code, ok := operator.Run(context.Background(), "mygateway", []string{"unknown", "list"}, os.Stdout, os.Stdout,
		func(string) string { return "" })
	fmt.Println(code, ok)
	// Output:
	// mygateway unknown list: set OBOL_APPROVER_KEY to an approver key (approver_keys in the gateway's configuration); it is never taken as a flag
	// 2 true
}

// tools import posts /v1/tools/import; the gateway's refusal is exit 1.
func TestRunToolsImport(t *testing.T) {
	var posts int
	fail := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/tools/import" || r.Header.Get("Authorization") != "Bearer ob_admin_key" {
			http.Error(w, "unexpected request", http.StatusTeapot)
			return
		}
		posts++
		w.Header().Set("Content-Type", "application/json")
		if fail {
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprint(w, `{"reason":"vendor_unreachable","status":502,"message":"an upstream MCP server's tools could not be read"}`)
			return
		}
		fmt.Fprint(w, `{"imported":true}`)
	}))
	defer srv.Close()
	key := env(map[string]string{operator.EnvApproverKey: "ob_admin_key"})
	if code, ok, out, errs := run(t, key, "tools", "import", "-url", srv.URL); !ok || code != 0 || !strings.Contains(out, "imported") {
		t.Fatalf("tools import = %d, %v, %q, %q", code, ok, out, errs)
	}
	fail = true
	if code, _, _, errs := run(t, key, "tools", "import", "-url", srv.URL); code != 1 || !strings.Contains(errs, "vendor_unreachable") {
		t.Fatalf("failed import = %d, stderr %q", code, errs)
	}
	if posts != 2 {
		t.Errorf("%d posts, want 2", posts)
	}
}
