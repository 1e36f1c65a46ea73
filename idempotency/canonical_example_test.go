package idempotency_test

import (
	"fmt"

	"github.com/obol-gateway/obol/idempotency"
)

func ExampleCanonicalize() {
	out, err := idempotency.Canonicalize([]byte(`{ "to": "ada@example.com", "amount": 12.50, "cc": [], "\u00e9t\u00e9": 1e2 }`))
	fmt.Println(string(out), err)
	// Output: {"amount":12.5,"cc":[],"to":"ada@example.com","été":100} <nil>
}

func ExampleRequestHash() {
	a, _ := idempotency.RequestHash([]byte(`{"amount": 1250, "currency": "EUR"}`))
	b, _ := idempotency.RequestHash([]byte(`{"currency":"EUR","amount":1.25e3}`))
	fmt.Println(a == b)
	fmt.Println(a)

	absent, _ := idempotency.RequestHash(nil)
	fmt.Println(absent)

	_, err := idempotency.RequestHash([]byte(`{"amount": 1, "amount": 2}`))
	fmt.Println(err)
	// Output:
	// true
	// sha256:eeee78fb20f8fbb03fb016f376c0389d6be5286bbce3a472be2a2b376b3953d4
	// sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a
	// idempotency: invalid JSON: at offset 14: duplicate member name
}

// Numbers keep their exact value when their nearest double would lose
// digits, so these are three different requests.
func ExampleCanonicalize_exactNumbers() {
	for _, args := range []string{`{"amount":9007199254740992}`, `{"amount":9007199254740993}`, `{"amount":1e-400}`} {
		canon, _ := idempotency.Canonicalize([]byte(args))
		fmt.Printf("%s\n", canon)
	}
	_, err := idempotency.Canonicalize([]byte(`{"amount":1e400}`))
	fmt.Println(err)
	// Output:
	// {"amount":9007199254740992}
	// {"amount":9.007199254740993e+15}
	// {"amount":1e-400}
	// idempotency: invalid JSON: at offset 10: number out of the double range
}
