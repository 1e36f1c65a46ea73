package mcpgateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// httpToolGateway serves t.run, a header-bound write whose vendor answers
// 200 with vendorBody, on a fresh miniredis, with cfg's other fields.
func httpToolGateway(t *testing.T, vendorBody func() []byte, cfg Config) *httptest.Server {
	t.Helper()
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := vendorBody()
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	}))
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

// TestLargeBodySpliced: a vendor body of spliceMin bytes or more, written
// by the front rather than the SDK's encoder, reads as a smaller one does:
// the text is the body made valid UTF-8 (quotes, controls, U+2028 and
// broken sequences included), structuredContent the body when it is one
// JSON object, under an exact Content-Length.
func TestLargeBodySpliced(t *testing.T) {
	odd := "\"quoted\" \\ back\nline\ttab\x01ctl \u2028sep\u2029 <&> é \xe2\x82 broken \xff\xfe "
	var objBody, textBody bytes.Buffer
	objBody.WriteString(`{"rows": [`)
	for objBody.Len() < spliceMin+1000 {
		objBody.WriteString(`{"s": "\"quoted\" \\ \n \u2028 é"}, `)
	}
	objBody.WriteString(`{}]}`)
	for textBody.Len() < spliceMin+1000 {
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
