package mcpdirect

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// BenchmarkResultEncoding compares the two encoders of the direct path on
// the usual result: encoding/json through the SDK's Marshalers, and
// appendPlainResult.
func BenchmarkResultEncoding(b *testing.B) {
	sp := NewSplice()
	res := &mcp.CallToolResult{Meta: mcp.Meta{metaKey: "idt_0123456789abcdef0123456789abcdef", metaReceipt: sp.phReceipt},
		Content: []mcp.Content{&mcp.TextContent{Text: sp.phText}}, StructuredContent: json.RawMessage(sp.phStructured)}
	b.Run("encodeResult", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodeResult(res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("appendPlainResult", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := appendPlainResult(make([]byte, 0, 512), res); !ok {
				b.Fatal("not plain")
			}
		}
	})
}
