package effectspec

import (
	"net/http"
	"strings"
	"testing"
)

func BenchmarkParse(b *testing.B) {
	data := []byte(stripeSpec)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkApplyHeader(b *testing.B) {
	s, _ := Parse([]byte(stripeSpec))
	h := http.Header{}
	body := []byte(`{"amount":100}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := s.Apply(h, body, "idt_5c1f0a9e3b7d4c2a8f6e1d0b9a8c7e6f"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSetAtPointer(b *testing.B) {
	small := []byte(`{"amount":100,"currency":"eur","meta":{"order":"A-1"}}`)
	large := []byte(`{"items":[` + strings.Repeat(`{"sku":"x","qty":1},`, 999) + `{"sku":"y","qty":2}],"meta":{}}`)
	for _, bc := range []struct {
		name, pointer string
		body          []byte
	}{
		{"small/insert", "/meta/idempotency_key", small},
		{"small/replace", "/meta/order", small},
		{"20KB/insert", "/meta/idempotency_key", large},
		{"20KB/last_element", "/items/999/sku", large},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := SetAtPointer(bc.body, bc.pointer, "idt_5c1f0a9e3b7d4c2a8f6e1d0b9a8c7e6f"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkClassify(b *testing.B) {
	s, _ := Parse([]byte(stripeSpec))
	for b.Loop() {
		_ = s.Classify(422)
		_ = s.Retryable(503)
	}
}
