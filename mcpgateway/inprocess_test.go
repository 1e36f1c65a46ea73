package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// miniStore is a redisstore on a fresh miniredis.
func miniStore(t testing.TB) *redisstore.Store {
	t.Helper()
	st, closeStore, err := embedded.New(context.Background(), redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeStore)
	return st
}

// inProcessGateway serves one in-process tool "t.run" with binding on a
// gateway without authentication, in the development policy.
func inProcessGateway(t *testing.T, binding effectspec.BindingKind, timeout string, h Handler) *httptest.Server {
	t.Helper()
	spec := `{"tool": "t.run", "effect": "write", "idempotency": {"binding": "` + string(binding) + `"}`
	if timeout != "" {
		spec += `, "timeout": "` + timeout + `"`
	}
	sp, err := effectspec.Parse([]byte(spec + `}`))
	if err != nil {
		t.Fatal(err)
	}
	tool, err := InProcess(InProcessTool{Spec: sp, Handler: h})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := New(Config{
		Orchestrator: &retry.Orchestrator{Store: miniStore(t), Policy: effectspec.Policy{Environment: effectspec.Development}},
		Tools:        []Tool{tool},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv
}

// wireAnswer is a tools/call answer: a result with its receipt, or a refusal.
type wireAnswer struct {
	result *struct {
		IsError           bool              `json:"isError"`
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		Meta              struct {
			Receipt receipt.Receipt `json:"dev.obol/receipt"`
		} `json:"_meta"`
	}
	refusal *ErrorData
	status  int
}

func postCall(t *testing.T, srv *httptest.Server, key, args string) wireAnswer {
	t.Helper()
	return postCallRaw(t, srv, key, args, nil)
}

// postCallRaw is postCall that also hands a result, as sent, to raw.
func postCallRaw(t *testing.T, srv *httptest.Server, key, args string, raw func(json.RawMessage)) wireAnswer {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t.run","arguments":` + args + `}}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(HeaderKey, key)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Data ErrorData `json:"data"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get(HeaderKey) != key {
		t.Errorf("Idempotency-Key header %q, want %q", resp.Header.Get(HeaderKey), key)
	}
	a := wireAnswer{status: resp.StatusCode}
	if msg.Error != nil {
		a.refusal = &msg.Error.Data
		return a
	}
	a.result = &struct {
		IsError           bool              `json:"isError"`
		Content           []json.RawMessage `json:"content"`
		StructuredContent json.RawMessage   `json:"structuredContent"`
		Meta              struct {
			Receipt receipt.Receipt `json:"dev.obol/receipt"`
		} `json:"_meta"`
	}{}
	if err := json.Unmarshal(msg.Result, a.result); err != nil {
		t.Fatal(err)
	}
	if raw != nil {
		raw(msg.Result)
	}
	return a
}

func (a wireAnswer) outcome(t *testing.T) receipt.Receipt {
	t.Helper()
	if a.result == nil {
		t.Fatalf("refused %+v, want a result", a.refusal)
	}
	return a.result.Meta.Receipt
}

func (a wireAnswer) reason(t *testing.T) string {
	t.Helper()
	if a.refusal == nil {
		t.Fatalf("a result %+v, want a refusal", a.result.Meta.Receipt)
	}
	return a.refusal.Reason
}

// TestInProcessAcceptedReplays: a handler that returns normally is accepted;
// the same key again is the replay of its result (structured content
// included) without a second run; other arguments under the key are
// request_mismatch; another key runs again.
func TestInProcessAcceptedReplays(t *testing.T) {
	var runs atomic.Int32
	srv := inProcessGateway(t, effectspec.BindingInProcess, "", func(_ context.Context, a retry.Attempt) (*mcp.CallToolResult, error) {
		n := runs.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}},
			StructuredContent: map[string]any{"run": n}}, nil
	})
	key := idempotency.NewKey().String()
	first := postCall(t, srv, key, `{"x": 1}`)
	rc := first.outcome(t)
	if rc.Outcome != effectspec.Accepted || rc.Replayed || rc.AttemptCount != 1 || rc.Binding != "in_process" || first.result.IsError {
		t.Fatalf("first: %+v", rc)
	}
	again := postCall(t, srv, key, `{"x": 1}`)
	if rc := again.outcome(t); !rc.Replayed || rc.Outcome != effectspec.Accepted || string(again.result.StructuredContent) != `{"run":1}` {
		t.Errorf("replay: %+v %s", rc, again.result.StructuredContent)
	}
	if r := postCall(t, srv, key, `{"x": 2}`); r.reason(t) != "request_mismatch" || r.refusal.IdempotencyKey != key {
		t.Errorf("mismatch: %+v", r.refusal)
	}
	postCall(t, srv, idempotency.NewKey().String(), `{"x": 1}`).outcome(t)
	if n := runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

// TestInProcessOutcomes: only Reject is definitely_rejected (safe_new_key
// true); an error, an IsError result, a panic and a handler that outlives the
// attempt's deadline are unknown, and an unkeyed handler whose call is
// unknown never runs again: the same key is outcome_unknown.
func TestInProcessOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name    string
		h       Handler
		outcome effectspec.Outcome
	}{
		{"reject", func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
			return nil, Reject(errors.New("no such list"))
		}, effectspec.DefinitelyRejected},
		{"error", func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
			return nil, errors.New("disk full")
		}, effectspec.Unknown},
		{"is error", func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "half written"}}}, nil
		}, effectspec.Unknown},
		{"panic", func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
			panic("boom")
		}, effectspec.Unknown},
		{"timeout", func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
			time.Sleep(1500 * time.Millisecond) // ignores ctx
			return &mcp.CallToolResult{}, nil
		}, effectspec.Unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runs atomic.Int32
			srv := inProcessGateway(t, effectspec.BindingInProcess, "1s", func(ctx context.Context, a retry.Attempt) (*mcp.CallToolResult, error) {
				runs.Add(1)
				return tc.h(ctx, a)
			})
			key := idempotency.NewKey().String()
			a := postCall(t, srv, key, `{}`)
			rc := a.outcome(t)
			if rc.Outcome != tc.outcome || !a.result.IsError || rc.AttemptCount != 1 {
				t.Fatalf("receipt %+v isError %v, want %s", rc, a.result.IsError, tc.outcome)
			}
			wantSafe := tc.outcome == effectspec.DefinitelyRejected
			if rc.SafeNewKey == nil || *rc.SafeNewKey != wantSafe {
				t.Errorf("safe_new_key %v, want %v", rc.SafeNewKey, wantSafe)
			}
			if tc.name == "reject" && !strings.Contains(string(a.result.Content[0]), `"no such list"`) {
				t.Errorf("rejection text %s", a.result.Content[0])
			}
			again := postCall(t, srv, key, `{}`)
			switch tc.outcome {
			case effectspec.Unknown:
				if r := again.reason(t); r != "outcome_unknown" || again.refusal.SafeNewKey == nil || *again.refusal.SafeNewKey {
					t.Errorf("same key after unknown: %+v", again.refusal)
				}
			default:
				if rc := again.outcome(t); !rc.Replayed {
					t.Errorf("same key after %s: %+v", tc.outcome, rc)
				}
			}
			if n := runs.Load(); n != 1 {
				t.Errorf("handler ran %d times, want 1", n)
			}
		})
	}
}

// TestInProcessKeyedRunsAgain: a keyed handler's unknown call runs again
// under the same key, with the same vendor key (its downstream
// deduplicates on it); receipt says attempt_count 2: two handler runs.
func TestInProcessKeyedRunsAgain(t *testing.T) {
	var mu sync.Mutex
	var keys []idempotency.Key
	srv := inProcessGateway(t, effectspec.BindingInProcessKeyed, "", func(_ context.Context, a retry.Attempt) (*mcp.CallToolResult, error) {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, a.Key)
		if len(keys) == 1 {
			return nil, errors.New("downstream timed out")
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "posted"}}}, nil
	})
	key := idempotency.NewKey().String()
	if rc := postCall(t, srv, key, `{}`).outcome(t); rc.Outcome != effectspec.Unknown {
		t.Fatalf("first %+v", rc)
	}
	rc := postCall(t, srv, key, `{}`).outcome(t)
	if rc.Outcome != effectspec.Accepted || rc.AttemptCount != 2 || rc.Propagation != "handler" || rc.Binding != "in_process_keyed" {
		t.Fatalf("second %+v", rc)
	}
	if rc.VendorKey != keys[0].String() {
		t.Errorf("receipt vendor_key %q, want the key the handler got", rc.VendorKey)
	}
	if len(keys) != 2 || keys[0] != keys[1] || keys[0].String() == key {
		t.Errorf("vendor keys %v: want one key, not the client's, on both runs", keys)
	}
}

// TestInProcessNothingDone: a handler that reports it did nothing yet licenses
// one more run at once; the receipt counts both runs.
func TestInProcessNothingDone(t *testing.T) {
	var runs atomic.Int32
	srv := inProcessGateway(t, effectspec.BindingInProcess, "", func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
		if runs.Add(1) == 1 {
			return nil, NothingDone(errors.New("list locked"))
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	rc := postCall(t, srv, idempotency.NewKey().String(), `{}`).outcome(t)
	if rc.Outcome != effectspec.Accepted || rc.AttemptCount != 2 || runs.Load() != 2 {
		t.Fatalf("receipt %+v after %d runs", rc, runs.Load())
	}
}

// TestInProcessInProgress: a second call under the key of a running one is
// in_progress, and the handler runs once.
func TestInProcessInProgress(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	var runs atomic.Int32
	srv := inProcessGateway(t, effectspec.BindingInProcess, "", func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
		runs.Add(1)
		close(started)
		<-release
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	key := idempotency.NewKey().String()
	done := make(chan wireAnswer, 1)
	go func() { done <- postCall(t, srv, key, `{}`) }()
	<-started
	if a := postCall(t, srv, key, `{}`); a.reason(t) != "in_progress" || a.refusal.RetryAfterMS == nil {
		t.Errorf("concurrent call: %+v", a.refusal)
	}
	close(release)
	if rc := (<-done).outcome(t); rc.Outcome != effectspec.Accepted || runs.Load() != 1 {
		t.Errorf("first %+v, %d runs", rc, runs.Load())
	}
}

// TestInProcessNeverAfterSendDeadline: the target does not run the handler
// once the attempt's send deadline has passed; the attempt never ran.
func TestInProcessNeverAfterSendDeadline(t *testing.T) {
	ran := false
	target := inProcessTarget{func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
		ran = true
		return &mcp.CallToolResult{}, nil
	}}
	ctx := retry.WithSendDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	res := target.Send(ctx, retry.Attempt{})
	if ran || res.Phase != retry.BeforeSend || !errors.Is(res.Err, retry.ErrSendDeadline) {
		t.Errorf("ran %v, result %+v", ran, res)
	}
	res = target.Send(retry.WithSendDeadline(context.Background(), time.Now().Add(time.Minute)), retry.Attempt{})
	if !ran || res.Phase != retry.Responded || res.Status != effectspec.InProcessAccepted {
		t.Errorf("in time: ran %v, result %+v", ran, res)
	}
}

// TestInProcessPolicyWarnsAndNamesBinding: under the zero Policy
// (production) New warns of an in_process tool, whose every new call is
// then denied with a text naming the binding, not a vendor; an
// in_process_keyed tool is neither warned of nor denied.
func TestInProcessPolicyWarnsAndNamesBinding(t *testing.T) {
	var logs bytes.Buffer
	var tools []Tool
	for _, b := range []string{"in_process", "in_process_keyed"} {
		sp, err := effectspec.Parse([]byte(`{"tool": "t.` + b + `", "effect": "write", "idempotency": {"binding": "` + b + `"}}`))
		if err != nil {
			t.Fatal(err)
		}
		tool, err := InProcess(InProcessTool{Spec: sp, Handler: func(context.Context, retry.Attempt) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		}})
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tool)
	}
	gw, err := New(Config{Orchestrator: &retry.Orchestrator{Store: miniStore(t)}, Tools: tools,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "tool=t.in_process binding=in_process environment=production") ||
		!strings.Contains(out, "set Orchestrator.Policy to allow it") || strings.Contains(out, "tool=t.in_process_keyed") {
		t.Errorf("New's log:\n%s", out)
	}
	srv := httptest.NewServer(gw)
	defer srv.Close()
	for _, tc := range []struct{ tool, want string }{
		{"t.in_process", `"message":"the policy denies this call: binding in_process cannot be redispatched`},
		{"t.in_process_keyed", `"result":`},
	} {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tc.tool + `","arguments":{}}}`
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(HeaderKey, idempotency.NewKey().String())
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		answer, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(answer), tc.want) || tc.tool == "t.in_process" && strings.Contains(string(answer), "vendor") {
			t.Errorf("%s: %s", tc.tool, answer)
		}
	}
}
