package mcpgateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/internal/mcpdirect"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// httpToolGateway serves t.run, a header-bound write whose vendor answers
// 200 with vendorBody, on a fresh miniredis, with cfg's other fields.
func httpToolGateway(t *testing.T, vendorBody func() []byte, cfg Config) *httptest.Server {
	t.Helper()
	return httpToolGatewayOf(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := vendorBody()
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	}), cfg)
}

// httpToolGatewayOf is httpToolGateway with the vendor's handler.
func httpToolGatewayOf(t *testing.T, vendorHandler http.Handler, cfg Config) *httptest.Server {
	t.Helper()
	vendor := httptest.NewServer(vendorHandler)
	t.Cleanup(vendor.Close)
	sp, err := effectspec.Parse([]byte(`{"tool": "t.run", "effect": "write", "idempotency": {"binding": "header", "header": "Idempotency-Key"},
		"status": {"accepted": [200], "definitely_rejected": [400], "retryable": [503]}}`))
	if err != nil {
		t.Fatal(err)
	}
	rt, err := idempotency.NewRoute(sp, idempotency.RouteTarget{Connection: "conn_t", Provider: "t", URL: vendor.URL + "/run", Credential: idempotency.NoCredential})
	if err != nil {
		t.Fatal(err)
	}
	st := miniStore(t)
	cfg.Orchestrator = &retry.Orchestrator{Store: st}
	cfg.Tools = []Tool{{Spec: sp, Connection: rt.Connection, Route: rt, Target: &retry.HTTPTarget{URL: vendor.URL + "/run"}}}
	gw, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	return srv
}

// rawCall posts a tools/call of t.run under key and returns the answer.
func rawCall(t *testing.T, srv *httptest.Server, key string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t.run","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(HeaderKey, key)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestLargeBodySpliced: a vendor body of mcpdirect.SpliceMin bytes or more, written
// by the front rather than the SDK's encoder, reads as a smaller one does:
// the text is the body made valid UTF-8 (quotes, controls, U+2028 and
// broken sequences included), structuredContent the body when it is one
// JSON object, under an exact Content-Length.
func TestLargeBodySpliced(t *testing.T) {
	odd := "\"quoted\" \\ back\nline\ttab\x01ctl \u2028sep\u2029 <&> é \xe2\x82 broken \xff\xfe "
	var objBody, textBody bytes.Buffer
	objBody.WriteString(`{"rows": [`)
	for objBody.Len() < mcpdirect.SpliceMin+1000 {
		objBody.WriteString(`{"s": "\"quoted\" \\ \n \u2028 é"}, `)
	}
	objBody.WriteString(`{}]}`)
	for textBody.Len() < mcpdirect.SpliceMin+1000 {
		textBody.WriteString(odd)
	}
	for name, body := range map[string][]byte{"object": objBody.Bytes(), "text": textBody.Bytes(), "small object": []byte(`{"a": "\"x\"\n"}`)} {
		t.Run(name, func(t *testing.T) {
			srv := httpToolGateway(t, func() []byte { return body }, Config{})
			resp, b := rawCall(t, srv, "idt_00000000000000000000000000000001")
			if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(b)) {
				t.Fatalf("Content-Length %s, body %d bytes", cl, len(b))
			}
			var msg struct {
				Result struct {
					Content []struct {
						Text string `json:"text"`
					} `json:"content"`
					StructuredContent json.RawMessage            `json:"structuredContent"`
					Meta              map[string]json.RawMessage `json:"_meta"`
				} `json:"result"`
			}
			if err := json.Unmarshal(b, &msg); err != nil || len(msg.Result.Content) != 1 || msg.Result.Meta[MetaReceipt] == nil {
				t.Fatalf("%v: %.300s", err, b)
			}
			if want := strings.ToValidUTF8(string(body), string(utf8.RuneError)); msg.Result.Content[0].Text != want {
				t.Fatalf("text differs from the body (%d vs %d bytes)", len(msg.Result.Content[0].Text), len(want))
			}
			if bytes.Contains(b, []byte("dev.obol/splice-")) {
				t.Fatal("a placeholder left in the answer")
			}
			// The spliced body is written as the vendor sent it; the SDK's
			// encoder compacts a smaller one.
			if spliced := bytes.Contains(b, []byte(`{"rows": [`)); spliced != (name == "object") {
				t.Fatalf("spliced %v: %.200s", spliced, b)
			}
			if name == "text" {
				if msg.Result.StructuredContent != nil {
					t.Fatal("structuredContent for a body that is not JSON")
				}
				return
			}
			var got, want any
			if json.Unmarshal(msg.Result.StructuredContent, &got) != nil || json.Unmarshal(body, &want) != nil {
				t.Fatalf("structuredContent %.200s", msg.Result.StructuredContent)
			}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if !bytes.Equal(gb, wb) {
				t.Fatal("structuredContent differs from the body")
			}
		})
	}
}

// sdkAnswer serves res, the result of t.run, through the SDK's stateless
// JSON handler behind a sanitizer holding ci, as the gateway does, and
// returns what a client reads.
func sdkAnswer(t *testing.T, res *mcp.CallToolResult, ci *callInfo) []byte {
	t.Helper()
	m := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	m.AddTool(&mcp.Tool{Name: "t.run", InputSchema: objectSchemaRaw()}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return res, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	req := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t.run","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	w := httptest.NewRecorder()
	sw := &sanitizer{ResponseWriter: w, id: json.RawMessage("7"), ci: ci}
	sdk.ServeHTTP(sw, req)
	sw.finish("idt_00000000000000000000000000000007")
	// A result has a Content-Length; an error may go chunked.
	if cl := w.Header().Get("Content-Length"); (cl != "" || w.Code == http.StatusOK) && cl != strconv.Itoa(w.Body.Len()) {
		t.Fatalf("Content-Length %s, body %d bytes", cl, w.Body.Len())
	}
	return w.Body.Bytes()
}

// spliceAnswers are answers of every kind, whose receipts and bodies hold
// what an encoder escapes.
func spliceAnswers(t *testing.T) map[string]retry.Answer {
	key, _ := idempotency.ParseKey("idt_00000000000000000000000000000007")
	at := time.Date(2026, 12, 1, 18, 0, 0, 123e6, time.UTC)
	rc := func(outcome effectspec.Outcome, status int, binding string) receipt.Receipt {
		return receipt.Receipt{IdempotencyKey: key.String(), KeySource: "supplied", RequestHash: "sha256:ab", Tool: "t.run", Workspace: "ws_<&>",
			Route:   receipt.RouteRecord{Connection: "conn_t", Provider: "t", Host: "t.example", Path: "/run?a=1&b=<2>", Fingerprint: "sha256:cd"},
			Binding: binding, Propagation: "header", VendorKey: "idt_00000000000000000000000000000008", AttemptCount: 1, Outcome: outcome,
			Status: status, SafeNewKey: receipt.Safe(false), CreatedAt: at, FinalizedAt: at.Add(time.Second)}
	}
	answer := func(outcome effectspec.Outcome, status int, body string) retry.Answer {
		a := retry.Answer{Key: key, Receipt: rc(outcome, status, "header")}
		if status != 0 {
			a.Result = &idempotency.StoredResult{Status: status, Body: []byte(body)}
		}
		return a
	}
	as := map[string]retry.Answer{
		"accepted":          answer(effectspec.Accepted, 201, `{"id":"ch_1","object":"charge","amount":1200}`),
		"accepted spaced":   answer(effectspec.Accepted, 200, " {\"a\" : [1, 2.50, true, null], \"html\": \"<b>&amp;</b>\", \"sep\": \"\u2028\u2029\", \"esc\": \"\\u003c\\n\\\"\" }\n"),
		"accepted empty":    answer(effectspec.Accepted, 204, ``),
		"accepted space":    answer(effectspec.Accepted, 200, " \n"),
		"accepted array":    answer(effectspec.Accepted, 200, `[{"a":1}]`),
		"accepted number":   answer(effectspec.Accepted, 200, `12`),
		"accepted bad json": answer(effectspec.Accepted, 200, `{"a": 1,}`),
		"accepted text":     answer(effectspec.Accepted, 200, "\"quoted\" \\ back\nline\ttab\x01\x08\x0c\x1f\x7f ctl \u2028sep\u2029 <&> é \xe2\x82 broken \xff\xfe \xef\xbf\xbd end"),
		"rejected":          answer(effectspec.DefinitelyRejected, 402, `{"error":{"message":"card <declined> & \"done\""}}`),
		"rejected empty":    answer(effectspec.DefinitelyRejected, 400, ``),
		"unknown":           answer(effectspec.Unknown, 0, ``),
		"unknown body":      answer(effectspec.Unknown, 500, "upstream <error>\n"),
		"settled":           answer(effectspec.Accepted, 0, ``),
	}
	a := answer(effectspec.Accepted, 201, `{"id":"ch_2"}`)
	a.Receipt.Replayed = true
	a.Receipt.Resolution = &receipt.Resolution{Outcome: effectspec.Accepted, By: "ops <a&b>", At: at, Note: "checked \u2028 with \"vendor\" <x>"}
	as["replayed settled"] = a
	a = answer(effectspec.Held, 0, ``)
	a.Ticket = "apt_00000000000000000000000000000001"
	as["held"] = a
	a = answer(effectspec.Accepted, 200, ``)
	a.Result.BodyDropped = true
	as["dropped"] = a
	ipr, err := json.Marshal(&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done <&> \u2028"}}, StructuredContent: map[string]any{"n": 1, "s": "<x>"}})
	if err != nil {
		t.Fatal(err)
	}
	a = answer(effectspec.Accepted, 200, string(ipr))
	a.Receipt.Binding = "in_process_keyed"
	as["in-process"] = a
	return as
}

// TestSpliceWire: an answer whose receipt and body the front splices in is,
// byte for byte, the answer the SDK writes when it encodes them itself.
func TestSpliceWire(t *testing.T) {
	for name, a := range spliceAnswers(t) {
		t.Run(name, func(t *testing.T) {
			want := sdkAnswer(t, result(a, nil, false), nil)
			ci := &callInfo{}
			res := result(a, ci, false)
			if _, spliced := res.Meta[metaReceipt].(string); ci.splice == nil || !spliced {
				t.Fatal("receipt not spliced")
			}
			got := sdkAnswer(t, res, ci)
			if !bytes.Equal(got, want) {
				t.Fatalf("spliced answer differs:\n got %s\nwant %s", got, want)
			}
			if !bytes.Contains(want, []byte(`"result":`)) || bytes.Contains(got, []byte("dev.obol/splice-")) {
				t.Fatalf("not a result, or a placeholder left: %s", got)
			}
		})
	}
}

// TestSpliceLarge: a large body's answer reads as the SDK's encoding of it
// does, with the body as the vendor sent it as structuredContent.
func TestSpliceLarge(t *testing.T) {
	var obj, text bytes.Buffer
	obj.WriteString(`{"rows": [`)
	for obj.Len() < mcpdirect.SpliceMin {
		obj.WriteString(`{"s": "\"q\" <&> \u2028 é"}, `)
	}
	obj.WriteString(`{}]}`)
	for text.Len() < mcpdirect.SpliceMin {
		text.WriteString("x <&> \"q\" \b\f\n\xff\xfe é \u2028 ")
	}
	key, _ := idempotency.ParseKey("idt_00000000000000000000000000000007")
	for name, body := range map[string][]byte{"object": obj.Bytes(), "text": text.Bytes()} {
		t.Run(name, func(t *testing.T) {
			a := retry.Answer{Key: key, Receipt: receipt.Receipt{IdempotencyKey: key.String(), Outcome: effectspec.Accepted, Status: 200},
				Result: &idempotency.StoredResult{Status: 200, Body: body}}
			want := sdkAnswer(t, result(a, nil, false), nil)
			ci := &callInfo{}
			got := sdkAnswer(t, result(a, ci, false), ci)
			var g, w any
			if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil {
				t.Fatalf("not JSON: %.300s", got)
			}
			gb, _ := json.Marshal(g)
			wb, _ := json.Marshal(w)
			if !bytes.Equal(gb, wb) {
				t.Fatal("the spliced answer reads differently")
			}
			if spliced := bytes.Contains(got, []byte(`"structuredContent":{"rows": [`)); spliced != (name == "object") {
				t.Fatalf("structuredContent as sent: %v", spliced)
			}
		})
	}
}

// TestSpliceBroken: an answer in which a placeholder is missing, doubled
// or foreign is never sent with it: it becomes an internal error.
func TestSpliceBroken(t *testing.T) {
	a := spliceAnswers(t)["accepted"]
	// phText is the text's placeholder, "<tok>-text".
	for name, edit := range map[string]func(res *mcp.CallToolResult, phText string){
		"receipt missing": func(res *mcp.CallToolResult, phText string) { res.Meta[metaReceipt] = "x" },
		"text doubled": func(res *mcp.CallToolResult, phText string) {
			res.Content = append(res.Content, &mcp.TextContent{Text: phText})
		},
		"unknown part": func(res *mcp.CallToolResult, phText string) {
			res.Content = append(res.Content, &mcp.TextContent{Text: strings.TrimSuffix(phText, "-text") + "-other"})
		},
		"inside a string": func(res *mcp.CallToolResult, phText string) {
			res.Content = append(res.Content, &mcp.TextContent{Text: "see " + phText})
		},
	} {
		t.Run(name, func(t *testing.T) {
			ci := &callInfo{}
			res := result(a, ci, false)
			edit(res, res.Content[0].(*mcp.TextContent).Text)
			got := sdkAnswer(t, res, ci)
			if bytes.Contains(got, []byte("dev.obol/splice-")) || !bytes.Contains(got, []byte(`"reason":"internal"`)) {
				t.Fatalf("%s", got)
			}
		})
	}
}
