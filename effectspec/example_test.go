package effectspec_test

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/obol-gateway/obol/effectspec"
)

func Example() {
	specs, err := effectspec.ParseList([]byte(`[
	  {"tool": "stripe.create_charge", "effect": "write", "route": "native",
	   "idempotency": {"binding": "header", "header": "Idempotency-Key"},
	   "status": {"accepted": [200, 201], "definitely_rejected": [400, 402, 404, 422],
	              "retryable": [429, 503], "in_use": [409]},
	   "approval": "none"},
	  {"tool": "mail.send", "effect": "write",
	   "idempotency": {"binding": "body_pointer", "pointer": "/meta/idempotency.key"},
	   "status": {"accepted": [202]}, "timeout": "2m"}
	]`))
	if err != nil {
		fmt.Println(err)
		return
	}
	const key = "idt_5c1f0a9e3b7d4c2a8f6e1d0b9a8c7e6f"

	// By header: any value the client or the arguments put there is replaced.
	charge := specs[0]
	h := http.Header{"Idempotency-Key": {"from-the-client"}}
	_, prop, err := charge.Apply(h, []byte(`{"amount":100}`), key)
	fmt.Println(prop, h.Get("Idempotency-Key"), err)

	// By body pointer: the '.' is part of the member name, and nothing else
	// in the body changes.
	mail := specs[1]
	body, prop, err := mail.Apply(http.Header{}, []byte(`{"to": "a@example.com", "meta": {}}`), key)
	fmt.Println(prop, string(body), err)

	fmt.Println(charge.Classify(201), charge.Classify(402), charge.Classify(500))
	// 409: the vendor still works on a request with this key.
	fmt.Println(charge.Classify(409), charge.Retryable(409))
	fmt.Println(charge.Retryable(503), charge.Retryable(500))
	fmt.Println(charge.AttemptTimeout(), mail.AttemptTimeout())
	// Output:
	// header idt_5c1f0a9e3b7d4c2a8f6e1d0b9a8c7e6f <nil>
	// body_pointer {"to": "a@example.com", "meta": {"idempotency.key":"idt_5c1f0a9e3b7d4c2a8f6e1d0b9a8c7e6f"}} <nil>
	// accepted definitely_rejected unknown
	// unknown false
	// true false
	// 30s 2m0s
}

func ExampleParse_errors() {
	_, err := effectspec.Parse([]byte(`{
	  "tool": "stripe.create_charge",
	  "idempotency": {"binding": "body_pointer", "pointer": ""},
	  "status": {"accepted": [200], "retryable": [200], "acepted": [201]}
	}`))
	fmt.Println(err)
	fmt.Println(errors.Is(err, effectspec.ErrInvalidSpec))
	// Output:
	// effectspec: stripe.create_charge: status.acepted: unknown field
	// effectspec: stripe.create_charge: idempotency.pointer: must not be the document root
	// effectspec: stripe.create_charge: status.retryable: 200 is also accepted
	// true
}

func ExamplePolicy_Check() {
	spec, _ := effectspec.Parse([]byte(`{"tool": "legacy.send_sms", "effect": "write"}`))
	fmt.Println(effectspec.Policy{Environment: effectspec.Development}.Check(spec))
	err := effectspec.Policy{Environment: effectspec.Production}.Check(spec)
	fmt.Println(errors.Is(err, effectspec.ErrPolicyDenied), effectspec.ReasonPolicyDenied)
	// Output:
	// <nil>
	// true policy_denied
}

func ExampleSetAtPointer() {
	out, err := effectspec.SetAtPointer([]byte(`{"items": [{"id": 1}], "0": {}}`), "/0/a~1b", "idt_k")
	fmt.Println(string(out), err)
	out, err = effectspec.SetAtPointer([]byte(`{"items": [{"id": 1}]}`), "/items/-", "idt_k")
	fmt.Println(string(out), err)
	_, err = effectspec.SetAtPointer([]byte(`{"items": "flat"}`), "/items/key", "idt_k")
	fmt.Println(err)
	// Output:
	// {"items": [{"id": 1}], "0": {"a/b":"idt_k"}} <nil>
	// {"items": [{"id": 1},"idt_k"]} <nil>
	// effectspec: pointer has no target in body: /items crosses a string
}
