package mcpdirect

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The _meta names of mcpgateway, whose results these are.
const (
	metaKey     = "dev.obol/idempotency-key"
	metaReceipt = "dev.obol/receipt"
	metaApprove = "dev.obol/approval"
)

// appendPlainResult writes what encodeResult does, for every result it
// takes; the others it leaves to encodeResult.
func TestPlainResult(t *testing.T) {
	ann := &mcp.Annotations{Priority: 1}
	for _, tc := range []struct {
		name  string
		res   *mcp.CallToolResult
		plain bool
	}{
		{"the usual", &mcp.CallToolResult{Meta: mcp.Meta{metaKey: "idt_0123", metaReceipt: "dev.obol/splice-ab-receipt"},
			Content: []mcp.Content{&mcp.TextContent{Text: "dev.obol/splice-ab-text"}}, StructuredContent: json.RawMessage(`"dev.obol/splice-ab-structured"`)}, true},
		{"error, no structured", &mcp.CallToolResult{Meta: mcp.Meta{metaReceipt: "r", metaKey: "k"},
			Content: []mcp.Content{&mcp.TextContent{Text: "outcome unknown: see the receipt"}}, IsError: true}, true},
		{"no _meta", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: ""}}}, true},
		{"escapes", &mcp.CallToolResult{Meta: mcp.Meta{"a<b": "x&y", "\u2028": "\x00\xff\"\\"},
			Content: []mcp.Content{&mcp.TextContent{Text: "<script>\u2029é\t"}}, StructuredContent: json.RawMessage(`{"a":[1,2.5e3,null]}`)}, true},
		{"structured with a space", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "t"}}, StructuredContent: json.RawMessage(`{"a": 1}`)}, false},
		{"structured with <", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "t"}}, StructuredContent: json.RawMessage(`"<"`)}, false},
		{"structured a map", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "t"}}, StructuredContent: map[string]any{"a": 1}}, false},
		{"_meta not a string", &mcp.CallToolResult{Meta: mcp.Meta{metaApprove: map[string]string{"ticket": "apt_1"}}, Content: []mcp.Content{&mcp.TextContent{Text: "t"}}}, false},
		{"two contents", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}, &mcp.TextContent{Text: "b"}}}, false},
		{"annotations", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a", Annotations: ann}}}, false},
		{"content _meta", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a", Meta: mcp.Meta{"x": "y"}}}}, false},
		{"image", &mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte{1}, MIMEType: "image/png"}}}, false},
		{"request state", &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "a"}}, RequestState: "s"}, false},
		{"no content", &mcp.CallToolResult{Content: []mcp.Content{}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			comparePlainResult(t, tc.res, tc.plain)
		})
	}
}

func comparePlainResult(t *testing.T, res *mcp.CallToolResult, wantPlain bool) {
	t.Helper()
	want, err := encodeResult(res)
	if err != nil {
		t.Fatal(err)
	}
	got, plain := appendPlainResult([]byte("prefix"), res)
	if plain != wantPlain {
		t.Fatalf("plain %v, want %v", plain, wantPlain)
	}
	if plain && string(got) != "prefix"+string(want) {
		t.Errorf("appendPlainResult\n%s\nencodeResult\n%s", got[len("prefix"):], want)
	}
}

func FuzzPlainResult(f *testing.F) {
	f.Add("idt_1", "dev.obol/splice-x-receipt", "text", []byte(`"dev.obol/splice-x-structured"`), true)
	f.Add("<&>", "\u2028", "\xff\x00", []byte(`{"a":[1,{"b":"\u00e9"}]}`), false)
	f.Fuzz(func(t *testing.T, key, rc, text string, structured []byte, isError bool) {
		res := &mcp.CallToolResult{Meta: mcp.Meta{metaKey: key, metaReceipt: rc}, Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
		if len(structured) > 0 && json.Valid(structured) {
			res.StructuredContent = json.RawMessage(structured)
		}
		want, err := encodeResult(res)
		if err != nil {
			return
		}
		if got, plain := appendPlainResult(nil, res); plain && !bytes.Equal(got, want) {
			t.Errorf("appendPlainResult\n%s\nencodeResult\n%s", got, want)
		}
	})
}
