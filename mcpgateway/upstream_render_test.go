package mcpgateway

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/obol-gateway/obol/internal/mcpdirect"
)

// renderedSpliced is the result an upstream's body renders as through the
// splice (upstreamSpliced, then the SDK's encoder and the splice's Write),
// as JSON; ok is false when the splice does not take the body.
func renderedSpliced(t testing.TB, body []byte, meta mcp.Meta, isError bool) (result []byte, ok bool) {
	sp := mcpdirect.NewSplice()
	res, ok := upstreamSpliced(sp, body, meta, isError)
	if !ok {
		return nil, false
	}
	enc, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("encoding the spliced result: %v", err)
	}
	answer := append(append([]byte(`{"jsonrpc":"2.0","id":1,"result":`), enc...), '}')
	w := httptest.NewRecorder()
	written, broken := sp.Write(w, 200, answer, true)
	switch {
	case broken:
		t.Fatalf("the splice broke on %s", answer)
	case written:
		answer = w.Body.Bytes()
	}
	if bytes.Contains(answer, []byte("dev.obol/splice")) {
		t.Fatalf("a placeholder left: %s", answer)
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(answer, &msg); err != nil {
		t.Fatalf("the spliced answer is not JSON: %v\n%s", err, answer)
	}
	return msg.Result, true
}

// renderedDecoded is the result an upstream's body renders as through the
// SDK's types (upstreamResult), as JSON.
func renderedDecoded(t testing.TB, body []byte, meta mcp.Meta, isError bool) (result []byte, ok bool) {
	res, ok := upstreamResult(body, meta, isError)
	if !ok {
		return nil, false
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("encoding the decoded result: %v", err)
	}
	return b, true
}

// sameResult reports whether two results are the same JSON, numbers as
// written and resultType aside (the SDK sets it by the client's protocol
// version, after the result is made).
func sameResult(a, b []byte) bool {
	decode := func(b []byte) (any, bool) {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v map[string]any
		if d.Decode(&v) != nil {
			return nil, false
		}
		delete(v, "resultType")
		return v, true
	}
	va, oka := decode(a)
	vb, okb := decode(b)
	return oka && okb && reflect.DeepEqual(va, vb)
}

var upstreamBodies = []struct {
	name    string
	body    string
	spliced bool // the splice takes it
}{
	{"one text", `{"content":[{"type":"text","text":"paid"}]}`, true},
	{"text and structured", `{"content":[{"text":"p_1 <&>","type":"text"}],"structuredContent":{"id":"p_1","n":[1,2.5e3]},"isError":false}`, true},
	{"large integer", `{"content":[{"type":"text","text":"{\"n\":12345678901234567890}"}],"structuredContent":{"n":12345678901234567890}}`, true},
	{"escapes", `{"content":[{"type":"text","text":"a\"b\\c\n\u2028 \u00e9 \ud83d\ude00"}]}`, true},
	// strictjson refuses a lone surrogate: the SDK's types render it.
	{"lone surrogate", `{"content":[{"type":"text","text":"a \ud800 b"}]}`, false},
	{"empty text", `{"content":[{"type":"text","text":""}]}`, true},
	{"spaces", " {\n \"content\" : [ { \"type\" : \"text\" , \"text\" : \"x\" } ] ,\n \"structuredContent\" : { \"a\" : [ 1 , 2 ] } } ", true},
	{"null structured", `{"content":[{"type":"text","text":"x"}],"structuredContent":null}`, true},
	{"forged meta", `{"content":[{"type":"text","text":"x"}],"_meta":{"dev.obol/receipt":"forged","vendor.example/trace":{"t":1},"io.modelcontextprotocol/serverInfo":{"name":"up"}}}`, true},
	{"complete", `{"content":[{"type":"text","text":"x"}],"resultType":"complete"}`, true},
	{"two items", `{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}`, false},
	{"image", `{"content":[{"type":"image","data":"aGk=","mimeType":"image/png"}]}`, false},
	{"annotated text", `{"content":[{"type":"text","text":"a","annotations":{"priority":1}}]}`, false},
	{"input required", `{"content":[{"type":"text","text":"a"}],"resultType":"input_required"}`, false},
	{"unknown member", `{"content":[{"type":"text","text":"a"}],"next":1}`, false},
	{"repeated content", `{"content":[{"type":"text","text":"a"}],"content":[{"type":"text","text":"b"}]}`, false},
	{"repeated text", `{"content":[{"type":"text","text":"a","text":"b"}]}`, false},
	{"text not a string", `{"content":[{"type":"text","text":1}]}`, false},
	{"no content", `{"structuredContent":{}}`, false},
	{"error object", `{"code":-32602,"message":"bad"}`, false},
}

// TestUpstreamSpliced: the results an upstream usually answers render
// through the splice as they render through the SDK's types, and the
// others are left to the SDK's types.
func TestUpstreamSpliced(t *testing.T) {
	meta := mcp.Meta{metaKey: key1, metaReceipt: "r"}
	for _, tc := range upstreamBodies {
		for _, isError := range []bool{false, true} {
			spliced, ok := renderedSpliced(t, []byte(tc.body), meta, isError)
			if ok != tc.spliced {
				t.Errorf("%s: spliced %v, want %v", tc.name, ok, tc.spliced)
				continue
			}
			if !ok {
				continue
			}
			decoded, ok := renderedDecoded(t, []byte(tc.body), meta, isError)
			if !ok {
				t.Errorf("%s: the SDK's types refuse what the splice takes", tc.name)
				continue
			}
			if !sameResult(spliced, decoded) {
				t.Errorf("%s:\nspliced %s\ndecoded %s", tc.name, spliced, decoded)
			}
			if !strings.Contains(string(spliced), `"dev.obol/idempotency-key":"`+key1+`"`) || strings.Contains(string(spliced), "forged") {
				t.Errorf("%s: _meta %s", tc.name, spliced)
			}
			if got := strings.Contains(string(spliced), `"isError":true`); got != isError {
				t.Errorf("%s: isError %v in %s", tc.name, got, spliced)
			}
		}
	}
	// A large integer keeps its digits both ways.
	out, _ := renderedSpliced(t, []byte(upstreamBodies[2].body), meta, false)
	if !strings.Contains(string(out), `"structuredContent":{"n":12345678901234567890}`) {
		t.Errorf("structuredContent lost digits: %s", out)
	}
}

// FuzzUpstreamSpliced: whatever an upstream answers, a body the splice
// takes renders as it does through the SDK's types, and no placeholder
// leaves.
func FuzzUpstreamSpliced(f *testing.F) {
	for _, tc := range upstreamBodies {
		f.Add(tc.body, false)
	}
	meta := mcp.Meta{metaKey: key1}
	f.Fuzz(func(t *testing.T, body string, isError bool) {
		spliced, ok := renderedSpliced(t, []byte(body), meta, isError)
		if !ok {
			return
		}
		decoded, ok := renderedDecoded(t, []byte(body), meta, isError)
		if !ok {
			t.Fatalf("the SDK's types refuse what the splice takes: %q", body)
		}
		if !sameResult(spliced, decoded) {
			t.Fatalf("%q:\nspliced %s\ndecoded %s", body, spliced, decoded)
		}
	})
}
