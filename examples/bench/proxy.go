package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/refservertest"
	"github.com/obol-gateway/obol/retry"
)

// proxyConfig is refserver's configuration for row 7: one tool of an MCP
// connection (the upstream), the key in params._meta, production
// environment.
const proxyConfig = `{
  "key_prefix": "obol:", "retention": "24h", "lease": "30s", "environment": "production",
  "workspaces": [{"id": "ws_bench", "api_keys": ["` + mcpAPIKey + `"]}],
  "approver_keys": [{"name": "bench", "key": "` + mcpAdminKey + `"}],
  "connections": [{"id": "conn_desk", "provider": "benchdesk", "protocol": "mcp", "base_url": "{{UPSTREAM}}", "secret_env": "` + vendorEnv + `"}],
  "tools": [{"connection": "conn_desk", "upstream_tool": "` + upstreamTool + `",
    "spec": {"tool": "` + proxyTool + `", "effect": "write", "route": "native", "idempotency": {"binding": "meta"}}}]
}`

// proxyRows measures row 7: refserver in front of the upstream MCP server
// (claim, one tools/call POST to the upstream, finalize, receipt) against
// the MCP limit server (serveMCPLimit), each in its own process,
// alternating on the same Redis.
func proxyRows(ctx context.Context, o *options, e *env, t *table) error {
	dir, err := os.MkdirTemp(o.tmp, "proxy-")
	if err != nil {
		return err
	}
	u, err := startUpstream()
	if err != nil {
		return err
	}
	defer u.close()
	bin, err := o.refserver(ctx)
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(dir, "refserver.json")
	if err := os.WriteFile(cfgPath, []byte(strings.ReplaceAll(proxyConfig, "{{UPSTREAM}}", u.url)), 0o600); err != nil {
		return err
	}
	env := []string{vendorEnv + "=" + vendorSecret, "OBOL_DEPLOYMENT_ID=" + e.store.Deployment()}
	initCmd := exec.CommandContext(ctx, bin, "store", "init", "-config", cfgPath, "-redis", o.redisURL)
	initCmd.Env = append(os.Environ(), env...)
	if out, err := initCmd.CombinedOutput(); err != nil {
		return fmt.Errorf("refserver store init: %w: %s", err, bytes.TrimSpace(out))
	}
	// With -refserver-profile, both servers profile, as in row 4.
	profile := func(name string) []string {
		if o.serverProfile == "" {
			return nil
		}
		args := []string{"-cpuprofile", filepath.Join(o.serverProfile, name+".cpu.pprof")}
		if o.serverTrace {
			args = append(args, "-exectrace", filepath.Join(o.serverProfile, name+".trace"))
		}
		return args
	}
	if o.serverProfile != "" {
		if err := os.MkdirAll(o.serverProfile, 0o755); err != nil {
			return err
		}
	}
	ref, err := startChild(ctx, "refserver (MCP upstream)", refservertest.Options{Bin: bin,
		Args: append([]string{"-config", cfgPath, "-redis", o.redisURL}, profile("refserver-mcp")...), Env: env}, dir)
	if err != nil {
		return err
	}
	defer ref.stop()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	lim, err := startChild(ctx, "MCP limit server", refservertest.Options{Bin: self,
		Args: append([]string{"-upstream", u.url, "-redis", o.redisURL}, profile("mcplimit")...),
		Env:  []string{roleEnv + "=mcplimit", vendorEnv + "=" + vendorSecret}}, dir)
	if err != nil {
		return err
	}
	defer lim.stop()

	l := upstreamLoad(u)
	if err := awaitImport(ctx, ref.base, l); err != nil {
		return fmt.Errorf("%s: %w", ref.name, err)
	}
	warm := min(o.duration/2, time.Second)
	for _, c := range []*child{ref, lim} {
		if _, err := loadCalls(ctx, c.base, l, slices.Max(o.mcpClients), warm); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	for _, clients := range o.mcpClients {
		if err := proxyRow(ctx, o, e, t, u, ref, lim, clients); err != nil {
			return err
		}
	}
	return e.flush(ctx)
}

// awaitImport waits until refserver has read the upstream's tools: it
// imports them in the background at start and refuses their calls
// vendor_unreachable until then.
func awaitImport(ctx context.Context, base string, l load) error {
	hc := &http.Client{Timeout: time.Minute}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":%q,"arguments":`+l.args+`}}`, l.tool, 0)
	for deadline := time.Now().Add(30 * time.Second); ; {
		err := callOnce(ctx, hc, base, body)
		if err == nil || !strings.Contains(err.Error(), `"vendor_unreachable"`) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// proxyRow measures one count of clients of row 7 against both servers,
// rotating which goes first over the rounds.
func proxyRow(ctx context.Context, o *options, e *env, t *table, u *upstream, ref, lim *child, clients int) error {
	who := fmt.Sprintf("%d clients", clients)
	if clients == 1 {
		who = "1 client"
	}
	var ours, limits []callResult
	var inside []histTotals // refserver's /metrics before and after each of its rounds
	measure := func(c *child, into *[]callResult) error {
		if err := e.flush(ctx); err != nil {
			return err
		}
		u.forget()
		var before histTotals
		if c == ref {
			var err error
			if before, err = scrapeHistograms(ctx, ref.base); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if err := e.quiesce(ctx); err != nil {
				return err
			}
		}
		r, err := measureCalls(ctx, e, c, upstreamLoad(u), clients, o.duration)
		if err == nil {
			err = u.checkKeys()
		}
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		if c == ref {
			after, err := scrapeHistograms(ctx, ref.base)
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if err := e.quiesce(ctx); err != nil {
				return err
			}
			inside = append(inside, before, after)
		}
		*into = append(*into, r)
		return nil
	}
	sides := []func() error{
		func() error { return measure(ref, &ours) },
		func() error { return measure(lim, &limits) },
	}
	for round := range mcpRounds(o) {
		for j := range sides {
			if err := sides[(round+j)%len(sides)](); err != nil {
				return err
			}
		}
		lo, ll := ours[len(ours)-1], limits[len(limits)-1]
		fmt.Fprintf(o.progress, "tools/call to an MCP upstream, %s, round %d: refserver %v (CPU %s, Redis %s), limit %v (CPU %s, Redis %s)\n", who, round+1,
			lo, dur(lo.cpu), dur(lo.redis), ll, dur(ll.cpu), dur(ll.redis))
	}
	mo, ml := medianCalls(ours), medianCalls(limits)
	r := mo.perSec / ml.perSec
	t.add(row{"7", fmt.Sprintf("tools/call to an MCP upstream, %s: refserver in front of it vs the limit (an SDK server: claim, one upstream call, finalize)", who),
		mo.String() + spread(ours), ml.String() + spread(limits), fmt.Sprintf("%.2f", r), fmt.Sprintf(">= %.2f", limitTarget), verdict(r >= limitTarget)})
	cpuRatio := "-"
	if c, l := medianCPU(ours), medianCPU(limits); c > 0 && l > 0 {
		cpuRatio = fmt.Sprintf("%.2f", float64(c)/float64(l))
	}
	t.add(row{"7", fmt.Sprintf("tools/call to an MCP upstream, %s: CPU time per call, the server's process and Redis (ratio: refserver's process over the limit's)", who),
		cpuText(ours), cpuText(limits), cpuRatio, "-", info})
	t.add(row{"7", fmt.Sprintf("tools/call to an MCP upstream, %s, inside refserver per call, means (/metrics)", who),
		insideText(inside), "-", "-", "-", info})
	return nil
}

// insideText is the median over rounds of each insideSeries' mean per
// call, from pairs of scrapes (before, after); "-" for a series refserver
// did not report.
func insideText(scrapes []histTotals) string {
	parts := make([]string, 0, len(insideSeries))
	for _, s := range insideSeries {
		var ds []float64
		for i := 0; i+1 < len(scrapes); i += 2 {
			a, b := scrapes[i+1][s.series], scrapes[i][s.series]
			if n := a[1] - b[1]; n > 0 {
				ds = append(ds, (a[0]-b[0])/n*float64(time.Second))
			}
		}
		if len(ds) == 0 {
			parts = append(parts, s.label+" -")
			continue
		}
		parts = append(parts, s.label+" "+dur(time.Duration(median(ds))))
	}
	return strings.Join(parts, ", ")
}

// serveMCPLimit is the limit server of row 7 (the harness starts itself
// with OBOL_BENCH_ROLE=mcplimit): row 4's SDK server whose tool handler
// runs the claim script, then one tools/call POST to the upstream MCP
// server, then the finalize script, and answers the upstream's result. The
// POST is what go-sdk's own client sends under 2026-07-28 (its headers,
// its _meta members), recorded once at start, with the call's arguments
// and the record's vendor key at params._meta["dev.obol/idempotency-key"];
// it goes through a retry.Executor (one HTTP/1.1 keep-alive pool), as
// refserver's MCP target does. Nothing else: no discovery per call, no
// key resolution, request hash, record encoding or receipt.
func serveMCPLimit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "MCP limit server"
	fs := flag.NewFlagSet("bench ("+name+")", flag.ContinueOnError)
	fs.SetOutput(stderr)
	upstreamURL := fs.String("upstream", "", "the upstream's Streamable HTTP endpoint `URL`")
	addr := fs.String("addr", "127.0.0.1:0", "listen `address`")
	redisURL := fs.String("redis", "", "Redis `URL`, as refserver's -redis")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile to `file` until the server stops")
	execTrace := fs.String("exectrace", "", "write a runtime execution trace to `file` until the server stops")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "bench (%s): %s\n", name, fmt.Sprintf(format, a...))
		return code
	}
	secret := os.Getenv(vendorEnv)
	if *upstreamURL == "" || *redisURL == "" || secret == "" {
		return fail(2, "-upstream, -redis and $%s are required", vendorEnv)
	}
	call, err := recordToolsCall(ctx, *upstreamURL, secret)
	if err != nil {
		return fail(1, "recording go-sdk's tools/call: %v", err)
	}
	lim, err := newMCPLimit(ctx, *redisURL, *upstreamURL, call)
	if err != nil {
		return fail(1, "%v", err)
	}
	defer lim.client.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fail(1, "%v", err)
	}
	stopProfiles, err := startProfiles(*cpuProfile, *execTrace)
	if err != nil {
		return fail(1, "%v", err)
	}
	defer stopProfiles()
	hs := &http.Server{Handler: mcpLimitHandler(*upstreamURL, call, lim), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "%s listening on http://%s\n", name, ln.Addr())
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fail(1, "%v", err)
	}
	return 0
}

// newMCPLimit is row 7's limit: the claim and finalize templates of
// refserver's call to the upstream's tool (proxyConfig), whose record
// stores the recorded call's result.
func newMCPLimit(ctx context.Context, redisURL, upstreamURL string, call *toolsCall) (*limit, error) {
	return newLimitOf(ctx, redisURL, limitCall{
		spec: effectspec.Spec{Tool: proxyTool, Effect: effectspec.EffectWrite, Route: effectspec.RouteNative,
			Idempotency: effectspec.Binding{Kind: effectspec.BindingMeta, Meta: effectspec.DefaultMetaName}},
		target: idempotency.RouteTarget{Connection: "conn_desk", Provider: "benchdesk", URL: upstreamURL,
			Credential: vendorEnv, UpstreamTool: upstreamTool},
		args:   `{"title":"Printer on fire","customer":"cus_0"}`,
		result: &idempotency.StoredResult{Status: http.StatusOK, Header: call.resultHeader, Body: call.result},
	})
}

// The placeholders of the recorded tools/call: its arguments and its
// vendor key, replaced in every call.
const (
	argsMark = `{"obol_bench_arguments":0}`
	keyMark  = "idt_0be0c0be0c0be0c0be0c0be0c0be0c0"
)

// toolsCall is a recorded tools/call POST: its header, and its body cut
// around the arguments and the vendor key.
type toolsCall struct {
	header    http.Header
	parts     [3][]byte // the body before, between and after the two marks
	argsFirst bool      // the arguments come before the key
	result    []byte    // the JSON-RPC result of the recorded call
	// resultHeader is the answer's header that a record keeps
	// (idempotency.SafeHeader), as refserver stores it.
	resultHeader http.Header
}

// body is the POST's body for args and vendor key vk.
func (c *toolsCall) body(args []byte, vk string) []byte {
	a, b := args, []byte(vk)
	if !c.argsFirst {
		a, b = b, a
	}
	out := make([]byte, 0, len(c.parts[0])+len(a)+len(c.parts[1])+len(b)+len(c.parts[2]))
	out = append(append(append(append(append(out, c.parts[0]...), a...), c.parts[1]...), b...), c.parts[2]...)
	return out
}

// capture is an http.RoundTripper that adds the connection's secret, as
// refserver's MCP target does, and keeps the last tools/call POST and its
// answer.
type capture struct {
	auth    string
	mu      sync.Mutex
	req     *http.Request
	body    []byte
	resp    []byte
	respHdr http.Header
}

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", c.auth)
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || r.Method != http.MethodPost || !bytes.Contains(body, []byte(`"tools/call"`)) {
		return resp, err
	}
	out, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(out))
	c.mu.Lock()
	c.req, c.body, c.resp, c.respHdr = r, body, out, resp.Header.Clone()
	c.mu.Unlock()
	return resp, nil
}

// recordToolsCall calls the upstream's tool once with go-sdk's client
// (2026-07-28, its default) and returns that POST as a template.
func recordToolsCall(ctx context.Context, url, secret string) (*toolsCall, error) {
	cp := &capture{auth: "Bearer " + secret}
	client := mcp.NewClient(&mcp.Implementation{Name: "obol-bench-limit", Version: "0.1.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: cp},
		DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: upstreamTool, Arguments: json.RawMessage(argsMark),
		Meta: mcp.Meta{effectspec.DefaultMetaName: keyMark}})
	if err != nil {
		return nil, err
	}
	if res.IsError {
		return nil, errors.New("the recorded call answered isError")
	}
	cp.mu.Lock()
	defer cp.mu.Unlock()
	if cp.req == nil {
		return nil, errors.New("no tools/call POST went out")
	}
	if v := cp.req.Header.Get("Mcp-Protocol-Version"); v != "2026-07-28" {
		return nil, fmt.Errorf("the client spoke protocol version %q, want 2026-07-28", v)
	}
	c := &toolsCall{header: cp.req.Header.Clone()}
	ai, ki := bytes.Index(cp.body, []byte(argsMark)), bytes.Index(cp.body, []byte(keyMark))
	if ai < 0 || ki < 0 || bytes.Count(cp.body, []byte(argsMark)) != 1 || bytes.Count(cp.body, []byte(keyMark)) != 1 {
		return nil, fmt.Errorf("the recorded body does not hold each mark once: %s", cp.body)
	}
	first, firstLen, second, secondLen := ai, len(argsMark), ki, len(keyMark)
	if c.argsFirst = ai < ki; !c.argsFirst {
		first, firstLen, second, secondLen = ki, len(keyMark), ai, len(argsMark)
	}
	c.parts = [3][]byte{cp.body[:first], cp.body[first+firstLen : second], cp.body[second+secondLen:]}
	var rpc struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(cp.resp, &rpc); err != nil || len(rpc.Result) == 0 {
		return nil, fmt.Errorf("the recorded answer is not a JSON-RPC result (%v): %.300s", err, cp.resp)
	}
	c.result = rpc.Result
	for k, v := range cp.respHdr {
		if idempotency.SafeHeader(k) {
			if c.resultHeader == nil {
				c.resultHeader = http.Header{}
			}
			c.resultHeader[k] = v
		}
	}
	return c, nil
}

// mcpLimitHandler is the MCP limit server's handler: row 4's SDK server
// (stateless, JSON answers, the same body limit and Bearer check) with the
// one tool.
func mcpLimitHandler(url string, call *toolsCall, lim *limit) http.Handler {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	exec := &retry.Executor{}
	s := mcp.NewServer(&mcp.Implementation{Name: "obol-bench-mcp-limit", Version: "0.1.0"}, &mcp.ServerOptions{Logger: quiet})
	s.AddTool(&mcp.Tool{Name: proxyTool, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			args := bytes.TrimSpace(req.Params.Arguments)
			if len(args) == 0 {
				args = []byte("{}")
			}
			var out *mcp.CallToolResult
			err := lim.aroundKeyed(ctx, func(vk string) error {
				hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(call.body(args, vk)))
				if err != nil {
					return err
				}
				hr.Header = call.header.Clone()
				res := exec.Do(ctx, hr)
				if res.Phase != retry.Responded || res.Status != http.StatusOK {
					return fmt.Errorf("upstream: phase %v, status %d: %v", res.Phase, res.Status, res.Err)
				}
				var rpc struct {
					Result *mcp.CallToolResult `json:"result"`
				}
				if err := json.Unmarshal(res.Body, &rpc); err != nil || rpc.Result == nil || rpc.Result.IsError {
					return fmt.Errorf("upstream: not a successful result (%v): %.300s", err, res.Body)
				}
				out = rpc.Result
				return nil
			})
			return out, err
		})
	return sdkHandler(s, quiet)
}
