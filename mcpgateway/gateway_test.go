package mcpgateway

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/retry"
)

// TestNewRefuses: a Config the gateway cannot serve is an error wrapping
// ErrInvalidConfig that names the problem; nothing is served.
func TestNewRefuses(t *testing.T) {
	orch := &retry.Orchestrator{Store: &fakeStore{}}
	good := newTestGateway(t, &fakeStore{}).cfg
	weak := good.Tools[0]
	weak.Route.Credential = ""
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"no orchestrator": {Config{}, "Orchestrator"},
		"both auths": {Config{Orchestrator: orch, Authenticate: func(string) (string, bool) { return "", false },
			Verifier: func(context.Context, string, *http.Request) (*auth.TokenInfo, error) { return nil, nil }}, "not both"},
		"weak route":    {Config{Orchestrator: orch, Tools: []Tool{weak}}, "Credential"},
		"no target":     {Config{Orchestrator: orch, Tools: []Tool{{Spec: weak.Spec, Route: good.Tools[0].Route}}}, "no Target"},
		"repeated tool": {Config{Orchestrator: orch, Tools: []Tool{good.Tools[0], good.Tools[0]}}, "twice"},
		"provider not a tool": {Config{Orchestrator: orch, Tools: good.Tools[:1],
			Capabilities: []Capability{{Name: "cap.x", Providers: []string{"open.send"}, Pin: "open.send"}}}, "not a tool"},
		"pin not a provider": {Config{Orchestrator: orch, Tools: good.Tools,
			Capabilities: []Capability{{Name: "cap.x", Providers: []string{"open.send"}, Pin: "open.send2"}}}, "Pin"},
	} {
		_, err := New(tc.cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidConfig naming %q", name, err, tc.want)
		}
	}
}

// TestVerifierAndNoAuth: with a go-sdk TokenVerifier the workspace is the
// token's UserID and a refused token is 401; without authentication every
// request is in Workspace, "local" by default.
func TestVerifierAndNoAuth(t *testing.T) {
	base := newTestGateway(t, &fakeStore{}).cfg
	cfg := base
	cfg.Authenticate = nil
	cfg.Verifier = func(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		if tok != "tok_good" {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: "ws_verified"}, nil
	}
	gw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ok := callFront(t, gw, http.Header{"Authorization": {"Bearer tok_good"}}, callBody)
	if ok.info == nil || ok.info.workspace != "ws_verified" {
		t.Errorf("verified token: %d %s", ok.code, ok.body)
	}
	if bad := callFront(t, gw, http.Header{"Authorization": {"Bearer tok_bad"}}, callBody); bad.code != http.StatusUnauthorized || bad.info != nil {
		t.Errorf("refused token: %d", bad.code)
	}
	cfg = base
	cfg.Authenticate = nil
	open, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r := callFront(t, open, nil, callBody); r.info == nil || r.info.workspace != unauthenticatedWorkspace {
		t.Errorf("no auth: %d %s", r.code, r.body)
	}
}

// TestHooks: OnRefusal hears the front's refusals, and OnCall brackets a
// call with its end: here a policy refusal decided inside the claim.
func TestHooks(t *testing.T) {
	var refusals []string
	ends := make(chan CallEnd, 2)
	spec := effectspec.MustNew(effectspec.Spec{Tool: "t.run", Effect: effectspec.EffectWrite,
		Idempotency: effectspec.Binding{Kind: effectspec.BindingInProcess}})
	tool, err := InProcess(InProcessTool{Spec: spec, Handler: func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) { return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := New(Config{Orchestrator: &retry.Orchestrator{Store: miniStore(t)}, Tools: []Tool{tool},
		OnRefusal: func(r string) { refusals = append(refusals, r) },
		OnCall: func(ctx context.Context, c CallStart) (context.Context, func(CallEnd)) {
			return ctx, func(e CallEnd) { ends <- e }
		}})
	if err != nil {
		t.Fatal(err)
	}
	callFront(t, gw, http.Header{HeaderKey: {"idt_nothex"}}, callBody)
	if len(refusals) != 1 || refusals[0] != "malformed_key" {
		t.Errorf("refusals %v", refusals)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	a := postCall(t, srv, "idt_00000000000000000000000000000007", `{}`)
	if a.reason(t) != effectspec.ReasonPolicyDenied {
		t.Errorf("answer %+v", a.refusal)
	}
	// The end comes once the answer has left (the direct path).
	select {
	case e := <-ends:
		if e.Refusal != effectspec.ReasonPolicyDenied || e.Tool != "t.run" {
			t.Errorf("end %+v", e)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("OnCall's end never ran")
	}
	select {
	case e := <-ends:
		t.Errorf("a second end: %+v", e)
	default:
	}
}
