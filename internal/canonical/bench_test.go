package canonical

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// benchDocument returns tool-call arguments of about size bytes: an object
// whose members are out of order, holding an array of order-like records with
// strings (some escaped, some non-ASCII), integers, decimals and nested objects.
func benchDocument(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"to": "billing@example.com", "idempotent": true, "currency": "EUR", "items": [`)
	for i := 0; b.Len() < size-120; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"sku": "SKU-%05d", "quantity": %d, "price": %d.%02d, "name": "Widget \u00e9 n\u00b0%d \"deluxe\"", `+
			`"tags": ["red", "large", "%d"], "dims": {"w": 1.5e1, "h": 0.25, "d": %d}, "note": "Größe 😀 line\nbreak"}`,
			i, i%7+1, 10+i%90, i%100, i, i*31, i%13)
	}
	b.WriteString(`], "amount": 1234.50, "customer": {"name": "Ada Lovelace", "id": 1e3, "address": {"city": "London", "zip": "NW1"}}}`)
	return []byte(b.String())
}

func BenchmarkRequestHash(b *testing.B) {
	for _, size := range []struct {
		name string
		n    int
	}{{"1KiB", 1 << 10}, {"64KiB", 64 << 10}, {"1MiB", 1 << 20}} {
		doc := benchDocument(size.n)
		if _, err := Hash(doc); err != nil {
			b.Fatal(err)
		}
		b.Run(size.name+"/obol", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if _, err := Hash(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(size.name+"/jcs+sha256", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				canon, err := jcs.Transform(doc)
				if err != nil {
					b.Fatal(err)
				}
				sum := sha256.Sum256(canon)
				_ = "sha256:" + hex.EncodeToString(sum[:])
			}
		})
	}
}

func BenchmarkCanonicalize(b *testing.B) {
	for _, sorted := range []bool{false, true} {
		doc := benchDocument(1 << 10)
		name := "1KiB/unsorted"
		if sorted {
			var err error
			if doc, err = JSON(doc); err != nil {
				b.Fatal(err)
			}
			name = "1KiB/canonical"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			var dst []byte
			for b.Loop() {
				var err error
				if dst, err = appendJSON(dst[:0], doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRequestHashNumbers hashes arguments made of numbers only: doubles
// as encoding/json writes them (mostly 16 and 17 digits, so every one takes
// the conversion to binary), the same doubles as %.17g prints them (each
// one also printed back at its digits, the printed-double rule), and
// integers beyond 2^53 kept exactly.
func BenchmarkRequestHashNumbers(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	doubles := make([]float64, 1000)
	for i := range doubles {
		doubles[i] = r.Float64() * math.Pow(10, float64(r.IntN(40)-20))
	}
	printed := make([]string, len(doubles))
	for i, f := range doubles {
		printed[i] = strconv.FormatFloat(f, 'g', 17, 64)
	}
	ids := make([]string, 1000)
	for i := range ids {
		ids[i] = fmt.Sprintf("%d%09d", uint64(1)<<62+r.Uint64N(1<<60), r.IntN(1e9))
	}
	for _, doc := range []struct {
		name string
		text []byte
	}{
		{"doubles", must(json.Marshal(map[string]any{"values": doubles}))},
		{"printed", []byte(`{"values":[` + strings.Join(printed, ",") + `]}`)},
		{"ids", []byte(`{"ids":[` + strings.Join(ids, ",") + `]}`)},
	} {
		b.Run(doc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc.text)))
			for b.Loop() {
				if _, err := Hash(doc.text); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
