package strictjson

import (
	"fmt"
	"strings"
	"testing"
)

// benchCall is a tools/call message as an MCP client sends it, whose
// arguments (an order with line items, some text with escapes) are about
// argBytes long.
func benchCall(argBytes int) []byte {
	var args strings.Builder
	args.WriteString(`{"customer":{"id":"cus_9f8e7d6c5b4a","email":"ada@example.com","name":"Ada Lovelace"},"currency":"eur","amount":12999,"note":"Leave at the door \u2014 ring twice.\nThanks!","items":[`)
	for i := 0; args.Len() < argBytes-40; i++ {
		if i > 0 {
			args.WriteByte(',')
		}
		fmt.Fprintf(&args, `{"sku":"SKU-%05d","qty":%d,"price":%d.99,"title":"Item %d \"deluxe\"","tags":["blue","size-m"],"gift":%v}`, i, i%4+1, 10+i, i, i%2 == 0)
	}
	args.WriteString(`],"metadata":{"source":"agent","attempt":1}}`)
	return []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"shop.place_order","arguments":` + args.String() +
		`,"_meta":{"progressToken":"p-42","dev.obol/idempotency-key":"idt_0123456789abcdef0123456789abcdef"}}}`)
}

var benchSizes = []struct {
	name string
	args int
}{{"300B", 300}, {"4KiB", 4096}}

func BenchmarkCheck(b *testing.B) {
	for _, sz := range benchSizes {
		body := benchCall(sz.args)
		for _, impl := range []struct {
			name  string
			check func([]byte) error
		}{{"scan", Check}, {"oracle", oracleCheck}} {
			b.Run(sz.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if err := impl.check(body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func BenchmarkObject(b *testing.B) {
	for _, sz := range benchSizes {
		body := benchCall(sz.args)
		for _, impl := range []struct {
			name string
			obj  func([]byte) (map[string][]byte, error)
		}{
			{"scan", func(d []byte) (map[string][]byte, error) { m, err := Object(d); return nil, ignore(m, err) }},
			{"oracle", func(d []byte) (map[string][]byte, error) { m, err := oracleObject(d); return nil, ignore(m, err) }},
		} {
			b.Run(sz.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				for b.Loop() {
					if _, err := impl.obj(body); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func ignore[T any](_ T, err error) error { return err }
