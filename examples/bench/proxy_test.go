package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// The MCP limit server's POST is go-sdk's own 2026-07-28 tools/call with
// another call's arguments and vendor key: the upstream runs it once, with
// that key, and answers its result.
func TestRecordedToolsCallReachesTheUpstream(t *testing.T) {
	u, err := startUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	call, err := recordToolsCall(context.Background(), u.url, vendorSecret)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call",
		"Mcp-Name": upstreamTool, "Authorization": "Bearer " + vendorSecret} {
		if got := call.header.Get(name); got != want {
			t.Errorf("recorded %s = %q, want %q", name, got, want)
		}
	}
	if !bytes.Contains(call.result, []byte(`"tk_1"`)) {
		t.Errorf("recorded result %s", call.result)
	}
	u.forget()
	before := u.runs.Load()
	vk := idempotency.NewKey().String()
	body := call.body([]byte(`{"title":"Printer on fire","customer":"cus_7"}`), vk)
	var msg struct {
		Params struct {
			Meta      map[string]any  `json:"_meta"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		t.Fatalf("built body %s: %v", body, err)
	}
	if msg.Params.Meta[effectspec.DefaultMetaName] != vk || string(msg.Params.Arguments) != `{"title":"Printer on fire","customer":"cus_7"}` {
		t.Errorf("built body %s", body)
	}
	if _, ok := msg.Params.Meta["io.modelcontextprotocol/protocolVersion"]; !ok {
		t.Errorf("built body lacks the client's protocol members: %s", body)
	}
	req, err := http.NewRequest(http.MethodPost, u.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = call.header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var rpc struct {
		Result *mcp.CallToolResult `json:"result"`
	}
	if err := json.Unmarshal(out, &rpc); resp.StatusCode != http.StatusOK || err != nil || rpc.Result == nil || rpc.Result.IsError {
		t.Fatalf("upstream answered %d: %s (%v)", resp.StatusCode, out, err)
	}
	if n := u.runs.Load() - before; n != 1 {
		t.Errorf("the upstream ran %d times, want 1", n)
	}
	if err := u.checkKeys(); err != nil {
		t.Error(err)
	}
	// The same key again is a duplicate the check reports.
	resp, err = http.DefaultClient.Do(func() *http.Request {
		r, _ := http.NewRequest(http.MethodPost, u.url, bytes.NewReader(body))
		r.Header = call.header.Clone()
		return r
	}())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := u.checkKeys(); err == nil {
		t.Error("a key executed twice passed the check")
	}
}

// The MCP limit server runs claim, one upstream call and finalize per
// call: every call the clients make executes once upstream, with a vendor
// key of its own, and leaves one finalized record.
func TestMCPLimitServesCalls(t *testing.T) {
	needRedis(t)
	ctx := context.Background()
	rs, err := startRedis(ctx, "redis-server")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.stop()
	u, err := startUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	call, err := recordToolsCall(ctx, u.url, vendorSecret)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := newMCPLimit(ctx, "redis://"+rs.addr+"/0", u.url, call)
	if err != nil {
		t.Fatal(err)
	}
	defer lim.client.Close()
	srv := httptest.NewServer(mcpLimitHandler(u.url, call, lim))
	defer srv.Close()
	u.forget()
	r, err := loadCalls(ctx, srv.URL, upstreamLoad(u), 4, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := u.checkKeys(); err != nil {
		t.Error(err)
	}
	recs, err := lim.client.Do(ctx, lim.client.B().Keys().Pattern(idempotency.DefaultPrefix+"idem:*").Build()).AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != r.calls {
		t.Errorf("%d calls left %d records", r.calls, len(recs))
	}
}
