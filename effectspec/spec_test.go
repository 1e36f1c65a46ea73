package effectspec

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const stripeSpec = `{
  "tool": "stripe.create_charge",
  "effect": "write",
  "route": "native",
  "idempotency": {"binding": "header", "header": "Idempotency-Key"},
  "status": {"accepted": [200, 201], "definitely_rejected": [400, 402, 404, 422],
             "retryable": [429, 503], "in_use": [409]},
  "approval": "none"
}`

func TestParseDesignExample(t *testing.T) {
	s, err := Parse([]byte(stripeSpec))
	if err != nil {
		t.Fatal(err)
	}
	want := Spec{
		Tool:        "stripe.create_charge",
		Effect:      EffectWrite,
		Route:       RouteNative,
		Idempotency: Binding{Kind: BindingHeader, Header: "Idempotency-Key"},
		Status: Statuses{
			Accepted:           []int{200, 201},
			DefinitelyRejected: []int{400, 402, 404, 422},
			Retryable:          []int{429, 503},
			InUse:              []int{409},
		},
		Approval: ApprovalNone,
	}
	if !reflect.DeepEqual(s, MustNew(want)) {
		t.Fatalf("got %+v\nwant %+v", s, want)
	}
}

func TestParseDefaults(t *testing.T) {
	s, err := Parse([]byte(`{"tool":"mail.send"}`))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(s, MustNew(Spec{Tool: "mail.send"})) {
		t.Fatalf("got %+v", s)
	}
	if s.vendorDedup() || s.Propagation() != PropagationNone || s.Classify(200) != Unknown ||
		s.Timeout != 0 || s.AttemptTimeout() != DefaultAttemptTimeout {
		t.Fatalf("zero spec is not the cautious reading: %+v", s)
	}
	if err := (Policy{Environment: ""}).Check(s); !errors.Is(err, ErrPolicyDenied) {
		t.Fatalf("zero spec in zero environment: got %v, want policy denied", err)
	}
}

// problemsOf returns "field: msg" of each problem, or fails.
func problemsOf(t *testing.T, err error) []*FieldError {
	t.Helper()
	if err == nil {
		t.Fatal("want an error, got nil")
	}
	if !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("error %v does not wrap ErrInvalidSpec", err)
	}
	probs := fieldErrors(err)
	if probs == nil {
		t.Fatalf("error %T does not join *FieldErrors", err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe != probs[0] {
		t.Fatalf("errors.As does not find the first *FieldError")
	}
	return probs
}

// fieldErrors returns the problems err joins, or nil if it joins anything
// but *FieldErrors.
func fieldErrors(err error) []*FieldError {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil
	}
	var probs []*FieldError
	for _, e := range j.Unwrap() {
		fe, ok := e.(*FieldError)
		if !ok {
			return nil
		}
		probs = append(probs, fe)
	}
	return probs
}

func TestParseRules(t *testing.T) {
	// Each case replaces or adds members of a valid base spec; want lists the
	// exact messages, one per problem.
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"missing tool", `{"effect":"read"}`,
			[]string{"effectspec: tool: must not be empty"}},
		{"empty tool", `{"tool":""}`,
			[]string{"effectspec: tool: must not be empty"}},
		{"tool with colon", `{"tool":"a:b"}`,
			[]string{`effectspec: "a:b": tool: must be 1 to 128 of A-Z a-z 0-9 _ . -`}},
		{"tool with space", `{"tool":"a b"}`,
			[]string{`effectspec: "a b": tool: must be 1 to 128 of A-Z a-z 0-9 _ . -`}},
		{"tool too long", `{"tool":"` + strings.Repeat("a", 129) + `"}`,
			[]string{`effectspec: "` + strings.Repeat("a", 64) + `"...: tool: must be 1 to 128 of A-Z a-z 0-9 _ . -`}},
		{"tool not a string", `{"tool":5}`,
			[]string{"effectspec: tool: must be a string", "effectspec: tool: must not be empty"}},
		{"effect invalid", `{"tool":"t","effect":"wrte"}`,
			[]string{`effectspec: t: effect: "wrte" is not "read" or "write"`}},
		{"effect empty", `{"tool":"t","effect":""}`,
			[]string{`effectspec: t: effect: must not be empty (omit the field for its default)`}},
		{"effect null", `{"tool":"t","effect":null}`,
			[]string{`effectspec: t: effect: must be a string, not null`}},
		{"effect number", `{"tool":"t","effect":1}`,
			[]string{`effectspec: t: effect: must be a string`}},
		{"effect wrong case", `{"tool":"t","effect":"Write"}`,
			[]string{`effectspec: t: effect: "Write" is not "read" or "write"`}},
		{"route invalid", `{"tool":"t","route":"proxy"}`,
			[]string{`effectspec: t: route: "proxy" is not "native" or "federated"`}},
		{"route empty", `{"tool":"t","route":""}`,
			[]string{`effectspec: t: route: must not be empty (omit the field for its default)`}},
		{"approval invalid", `{"tool":"t","approval":"yes"}`,
			[]string{`effectspec: t: approval: "yes" is not "none" or "required"`}},
		{"approval empty", `{"tool":"t","approval":""}`,
			[]string{`effectspec: t: approval: must not be empty (omit the field for its default)`}},
		{"binding invalid", `{"tool":"t","idempotency":{"binding":"query"}}`,
			[]string{`effectspec: t: idempotency.binding: "query" is not "header", "body_pointer", "unsupported", "in_process", "in_process_keyed" or "meta"`}},
		{"binding empty", `{"tool":"t","idempotency":{"binding":""}}`,
			[]string{`effectspec: t: idempotency.binding: must not be empty (omit the field for its default)`}},
		{"idempotency not object", `{"tool":"t","idempotency":"header"}`,
			[]string{`effectspec: t: idempotency: must be a JSON object`}},
		{"header missing", `{"tool":"t","idempotency":{"binding":"header"}}`,
			[]string{`effectspec: t: idempotency.header: required with binding header`}},
		{"header not token", `{"tool":"t","idempotency":{"binding":"header","header":"Idem Key"}}`,
			[]string{`effectspec: t: idempotency.header: "Idem Key" is not a valid header name (RFC 9110 token)`}},
		{"header colon", `{"tool":"t","idempotency":{"binding":"header","header":"X-Key:"}}`,
			[]string{`effectspec: t: idempotency.header: "X-Key:" is not a valid header name (RFC 9110 token)`}},
		{"header pseudo", `{"tool":"t","idempotency":{"binding":"header","header":":authority"}}`,
			[]string{`effectspec: t: idempotency.header: ":authority" is not a valid header name (RFC 9110 token)`}},
		{"header host", `{"tool":"t","idempotency":{"binding":"header","header":"host"}}`,
			[]string{`effectspec: t: idempotency.header: host may not carry the key: it names the target host`}},
		{"header with pointer", `{"tool":"t","idempotency":{"binding":"header","header":"Idempotency-Key","pointer":"/k"}}`,
			[]string{`effectspec: t: idempotency.pointer: not allowed with binding header`}},
		{"pointer root", `{"tool":"stripe.create_charge","idempotency":{"binding":"body_pointer","pointer":""}}`,
			[]string{`effectspec: stripe.create_charge: idempotency.pointer: must not be the document root`}},
		{"pointer missing", `{"tool":"t","idempotency":{"binding":"body_pointer"}}`,
			[]string{`effectspec: t: idempotency.pointer: must not be the document root`}},
		{"pointer no slash", `{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"meta.key"}}`,
			[]string{`effectspec: t: idempotency.pointer: "meta.key" must start with '/'`}},
		{"pointer bad escape", `{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/a~2"}}`,
			[]string{`effectspec: t: idempotency.pointer: "/a~2": '~' must be followed by '0' or '1'`}},
		{"pointer trailing tilde", `{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/a~"}}`,
			[]string{`effectspec: t: idempotency.pointer: "/a~": '~' must be followed by '0' or '1'`}},
		{"pointer with header", `{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/k","header":"X-Key"}}`,
			[]string{`effectspec: t: idempotency.header: not allowed with binding body_pointer`}},
		{"unsupported with header", `{"tool":"t","idempotency":{"binding":"unsupported","header":"X-Key"}}`,
			[]string{`effectspec: t: idempotency.header: not allowed with binding unsupported`}},
		{"absent binding with pointer", `{"tool":"t","idempotency":{"pointer":"/k"}}`,
			[]string{`effectspec: t: idempotency.pointer: not allowed with binding unsupported`}},
		{"federated header", `{"tool":"t","route":"federated","idempotency":{"binding":"header","header":"X-Key"}}`,
			[]string{`effectspec: t: idempotency.binding: a federated route propagates no key; binding must be unsupported`}},
		{"federated pointer", `{"tool":"t","route":"federated","idempotency":{"binding":"body_pointer","pointer":"/k"}}`,
			[]string{`effectspec: t: idempotency.binding: a federated route propagates no key; binding must be unsupported`}},
		{"status low", `{"tool":"t","status":{"accepted":[99]}}`,
			[]string{`effectspec: t: status.accepted[0]: 99 is not a status code (100-599)`}},
		{"status high", `{"tool":"t","status":{"retryable":[429,600]}}`,
			[]string{`effectspec: t: status.retryable[1]: 600 is not a status code (100-599)`}},
		{"status negative", `{"tool":"t","status":{"definitely_rejected":[-400]}}`,
			[]string{`effectspec: t: status.definitely_rejected[0]: -400 is not a status code (100-599)`}},
		{"status fraction", `{"tool":"t","status":{"accepted":[200,200.5,201]}}`,
			[]string{`effectspec: t: status.accepted[1]: "200.5" is not a status code (100-599)`}},
		{"status exponent", `{"tool":"t","status":{"accepted":[2e2]}}`,
			[]string{`effectspec: t: status.accepted[0]: "2e2" is not a status code (100-599)`}},
		{"status string", `{"tool":"t","status":{"accepted":["200"]}}`,
			[]string{`effectspec: t: status.accepted[0]: "\"200\"" is not a status code (100-599)`}},
		{"status huge", `{"tool":"t","status":{"accepted":[99999999999999999999]}}`,
			[]string{`effectspec: t: status.accepted[0]: "99999999999999999999" is not a status code (100-599)`}},
		{"status not list", `{"tool":"t","status":{"accepted":200}}`,
			[]string{`effectspec: t: status.accepted: must be an array of status codes`}},
		{"status duplicate", `{"tool":"t","status":{"accepted":[200,201,200]}}`,
			[]string{`effectspec: t: status.accepted[2]: 200 duplicates status.accepted[0]`}},
		{"accepted and rejected", `{"tool":"t","status":{"accepted":[200,409],"definitely_rejected":[409]}}`,
			[]string{`effectspec: t: status.definitely_rejected: 409 is also accepted`}},
		{"accepted and retryable", `{"tool":"t","status":{"accepted":[200,503],"retryable":[503]}}`,
			[]string{`effectspec: t: status.retryable: 503 is also accepted`}},
		{"in use and rejected", `{"tool":"t","status":{"definitely_rejected":[400,409],"in_use":[409]}}`,
			[]string{`effectspec: t: status.in_use: 409 is also definitely_rejected`}},
		{"in use and accepted", `{"tool":"t","status":{"accepted":[200],"in_use":[409,200]}}`,
			[]string{`effectspec: t: status.in_use: 200 is also accepted`}},
		{"in use and retryable", `{"tool":"t","status":{"retryable":[409,503],"in_use":[409]}}`,
			[]string{`effectspec: t: status.in_use: 409 is also retryable`}},
		{"in use in every list", `{"tool":"t","status":{"accepted":[409],"definitely_rejected":[409],"retryable":[409],"in_use":[409]}}`,
			[]string{
				`effectspec: t: status.definitely_rejected: 409 is also accepted`,
				`effectspec: t: status.retryable: 409 is also accepted`,
				`effectspec: t: status.in_use: 409 is also accepted`,
				`effectspec: t: status.in_use: 409 is also definitely_rejected`,
				`effectspec: t: status.in_use: 409 is also retryable`,
			}},
		{"in use out of range", `{"tool":"t","status":{"in_use":[409,42]}}`,
			[]string{`effectspec: t: status.in_use[1]: 42 is not a status code (100-599)`}},
		{"in use duplicate", `{"tool":"t","status":{"in_use":[409,409]}}`,
			[]string{`effectspec: t: status.in_use[1]: 409 duplicates status.in_use[0]`}},
		{"in use not integer", `{"tool":"t","status":{"in_use":["409"]}}`,
			[]string{`effectspec: t: status.in_use[0]: "\"409\"" is not a status code (100-599)`}},
		{"in use not list", `{"tool":"t","status":{"in_use":409}}`,
			[]string{`effectspec: t: status.in_use: must be an array of status codes`}},
		{"max_attempts zero", `{"tool":"t","max_attempts":0}`,
			[]string{`effectspec: t: max_attempts: must be at least 1 (omit the field for the gateway's default)`}},
		{"max_attempts negative", `{"tool":"t","max_attempts":-1}`,
			[]string{`effectspec: t: max_attempts: -1 is not from 1 to 1000 (zero means the gateway's default)`}},
		{"max_attempts too many", `{"tool":"t","max_attempts":1001}`,
			[]string{`effectspec: t: max_attempts: 1001 is not from 1 to 1000 (zero means the gateway's default)`}},
		{"max_attempts a string", `{"tool":"t","max_attempts":"3"}`,
			[]string{`effectspec: t: max_attempts: "\"3\"" is not an integer from 1 to 1000`}},
		{"timeout zero", `{"tool":"t","timeout":"0s"}`,
			[]string{`effectspec: t: timeout: must be positive (omit the field for the default 30s)`}},
		{"timeout negative", `{"tool":"t","timeout":"-5s"}`,
			[]string{`effectspec: t: timeout: must be positive (omit the field for the default 30s)`}},
		{"timeout too long", `{"tool":"t","timeout":"15m0.001s"}`,
			[]string{`effectspec: t: timeout: 15m0.001s is more than the maximum 15m0s`}},
		{"timeout an hour", `{"tool":"t","timeout":"1h"}`,
			[]string{`effectspec: t: timeout: 1h0m0s is more than the maximum 15m0s`}},
		{"timeout no unit", `{"tool":"t","timeout":"30"}`,
			[]string{`effectspec: t: timeout: "30" is not a Go duration such as "30s"`}},
		{"timeout words", `{"tool":"t","timeout":"30 seconds"}`,
			[]string{`effectspec: t: timeout: "30 seconds" is not a Go duration such as "30s"`}},
		{"timeout number", `{"tool":"t","timeout":30}`,
			[]string{`effectspec: t: timeout: must be a string`}},
		{"timeout null", `{"tool":"t","timeout":null}`,
			[]string{`effectspec: t: timeout: must be a string, not null`}},
		{"timeout empty", `{"tool":"t","timeout":""}`,
			[]string{`effectspec: t: timeout: must not be empty (omit the field for its default)`}},
		{"timeout repeated", `{"tool":"t","timeout":"1s","timeout":"2s"}`,
			[]string{`effectspec: t: timeout: repeated member`}},
		{"timeout wrong case", `{"tool":"t","Timeout":"1s"}`,
			[]string{`effectspec: t: Timeout: unknown field`}},
		{"window unsupported", `{"tool":"t","idempotency":{"binding":"unsupported","window":"24h"}}`,
			[]string{`effectspec: t: idempotency.window: not allowed with binding unsupported (the vendor deduplicates nothing)`}},
		{"window without binding", `{"tool":"t","idempotency":{"window":"24h"}}`,
			[]string{`effectspec: t: idempotency.window: not allowed with binding unsupported (the vendor deduplicates nothing)`}},
		{"window federated", `{"tool":"t","route":"federated","idempotency":{"window":"1h"}}`,
			[]string{`effectspec: t: idempotency.window: not allowed with binding unsupported (the vendor deduplicates nothing)`}},
		{"window zero", `{"tool":"t","idempotency":{"binding":"header","header":"K","window":"0s"}}`,
			[]string{`effectspec: t: idempotency.window: must be positive (omit the field for the default 24h0m0s)`}},
		{"window negative", `{"tool":"t","idempotency":{"binding":"header","header":"K","window":"-1h"}}`,
			[]string{`effectspec: t: idempotency.window: must be positive (omit the field for the default 24h0m0s)`}},
		{"window too short", `{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/k","window":"999ms"}}`,
			[]string{`effectspec: t: idempotency.window: 999ms is less than the minimum 1s`}},
		{"window too long", `{"tool":"t","idempotency":{"binding":"header","header":"K","window":"8761h"}}`,
			[]string{`effectspec: t: idempotency.window: 8761h0m0s is more than the maximum 8760h0m0s`}},
		{"window no unit", `{"tool":"t","idempotency":{"binding":"header","header":"K","window":"24"}}`,
			[]string{`effectspec: t: idempotency.window: "24" is not a Go duration such as "30s"`}},
		{"window number", `{"tool":"t","idempotency":{"binding":"header","header":"K","window":86400}}`,
			[]string{`effectspec: t: idempotency.window: must be a string`}},
		{"window empty", `{"tool":"t","idempotency":{"binding":"header","header":"K","window":""}}`,
			[]string{`effectspec: t: idempotency.window: must not be empty (omit the field for its default)`}},
		{"window wrong case", `{"tool":"t","idempotency":{"binding":"header","header":"K","Window":"1h"}}`,
			[]string{`effectspec: t: idempotency.Window: unknown field`}},
		{"unknown top field", `{"tool":"t","effects":"read"}`,
			[]string{`effectspec: t: effects: unknown field`}},
		{"field name case", `{"tool":"t","Effect":"read"}`,
			[]string{`effectspec: t: Effect: unknown field`}},
		{"unknown nested idempotency field", `{"tool":"t","idempotency":{"binding":"header","header":"X-Key","headr":"Y"}}`,
			[]string{`effectspec: t: idempotency.headr: unknown field`}},
		{"unknown nested status field", `{"tool":"t","status":{"acepted":[200]}}`,
			[]string{`effectspec: t: status.acepted: unknown field`}},
		{"repeated member", `{"tool":"t","effect":"read","effect":"write"}`,
			[]string{`effectspec: t: effect: repeated member`}},
		{"repeated nested member", `{"tool":"t","idempotency":{"binding":"header","binding":"unsupported","header":"X-Key"}}`,
			[]string{`effectspec: t: idempotency.binding: repeated member`}},
		{"not an object", `[1]`,
			[]string{`effectspec: document must be a JSON object`}},
		{"trailing data", `{"tool":"t"} {}`,
			[]string{`effectspec: trailing data after a JSON object`}},
		{"trailing garbage", `{"tool":"t"}x`,
			[]string{`effectspec: trailing data after a JSON object`}},
		{"empty document", ``,
			[]string{`effectspec: empty document`}},
		{"invalid JSON", `{"tool":`,
			[]string{`effectspec: invalid JSON: unexpected EOF`}},
		{"lone surrogate", `{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/a\ud800"}}`,
			[]string{`effectspec: invalid JSON: invalid UTF-8 or a lone surrogate`}},
		{"invalid UTF-8", "{\"tool\":\"t\",\"idempotency\":{\"binding\":\"body_pointer\",\"pointer\":\"/\xff\"}}",
			[]string{`effectspec: invalid JSON: invalid UTF-8 or a lone surrogate`}},
		{"many problems at once", `{"tool":"t","effect":"w","route":"r","approval":"a","status":{"accepted":[1]}}`,
			[]string{
				`effectspec: t: effect: "w" is not "read" or "write"`,
				`effectspec: t: route: "r" is not "native" or "federated"`,
				`effectspec: t: approval: "a" is not "none" or "required"`,
				`effectspec: t: status.accepted[0]: 1 is not a status code (100-599)`,
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.doc))
			if !reflect.DeepEqual(s, Spec{}) {
				t.Errorf("Parse returned a spec with its error: %+v", s)
			}
			probs := problemsOf(t, err)
			var got []string
			for _, p := range probs {
				got = append(got, p.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
			if err.Error() != strings.Join(tc.want, "\n") {
				t.Errorf("Error() = %q", err.Error())
			}
		})
	}
}

func TestReservedHeaders(t *testing.T) {
	for _, h := range []string{"Host", "Content-Length", "Transfer-Encoding", "Connection",
		"Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade", "Proxy-Authorization",
		"Proxy-Authenticate", "Authorization", "Cookie", "Expect", "Content-Type",
		"content-encoding", "AUTHORIZATION"} {
		s := Spec{Tool: "t", Idempotency: Binding{Kind: BindingHeader, Header: h}}
		probs := problemsOf(t, s.check())
		if len(probs) != 1 || probs[0].Field != "idempotency.header" || !strings.Contains(probs[0].Problem, "may not carry the key") {
			t.Errorf("%s: got %v", h, probs)
		}
	}
	for _, h := range []string{"Idempotency-Key", "X-Request-Id", "x-idempotency-key", "Nango-Proxy-Idempotency-Key", "a!#$%&'*+-.^_`|~z"} {
		s := Spec{Tool: "t", Idempotency: Binding{Kind: BindingHeader, Header: h}}
		if err := s.check(); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
}

func TestValidBindings(t *testing.T) {
	for _, doc := range []string{
		`{"tool":"a","idempotency":{"binding":"header","header":"Idempotency-Key"}}`,
		`{"tool":"a","idempotency":{"binding":"body_pointer","pointer":"/meta/idempotency.key"}}`,
		`{"tool":"a","idempotency":{"binding":"body_pointer","pointer":"/"}}`,
		`{"tool":"a","idempotency":{"binding":"body_pointer","pointer":"/a~1b/~0/-"}}`,
		`{"tool":"a","idempotency":{"binding":"unsupported"}}`,
		`{"tool":"a","idempotency":{}}`,
		`{"tool":"a","route":"federated","idempotency":{"binding":"unsupported"}}`,
		`{"tool":"a","route":"federated"}`,
		`{"tool":"a","effect":"read","approval":"required"}`,
		`{"tool":"a","status":{"definitely_rejected":[429],"retryable":[429]}}`,
		`{"tool":"a","status":{}}`,
		` {"tool":"A-z_0.9"} ` + "\n",
	} {
		s, err := Parse([]byte(doc))
		if err != nil {
			t.Errorf("%s: %v", doc, err)
			continue
		}
		if err := s.check(); err != nil {
			t.Errorf("%s: Validate after Parse: %v", doc, err)
		}
	}
}

func TestValidateZeroDefaults(t *testing.T) {
	if err := (Spec{Tool: "t"}).check(); err != nil {
		t.Fatal(err)
	}
	probs := problemsOf(t, Spec{}.check())
	if len(probs) != 1 || probs[0].Error() != "effectspec: tool: must not be empty" || probs[0].Subject != "" {
		t.Fatalf("got %+v", probs)
	}
}

func TestParseList(t *testing.T) {
	specs, err := ParseList([]byte(`[` + stripeSpec + `, {"tool":"github.create_issue","effect":"write"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2 || specs[0].Tool != "stripe.create_charge" || specs[1].Tool != "github.create_issue" {
		t.Fatalf("got %+v", specs)
	}
	empty, err := ParseList([]byte(`[]`))
	if err != nil || len(empty) != 0 {
		t.Fatalf("empty list: %v %v", empty, err)
	}
}

func TestParseListProblems(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"duplicate tool", `[{"tool":"a"},{"tool":"b"},{"tool":"a"}]`,
			[]string{`effectspec: a: tool: duplicates the spec at [0]`}},
		{"all specs reported", `[{"tool":"a","effect":"x"},{},{"tool":"c","route":"y"},{"tool":"b c"}]`,
			[]string{
				`effectspec: a: effect: "x" is not "read" or "write"`,
				`effectspec: [1]: tool: must not be empty`,
				`effectspec: c: route: "y" is not "native" or "federated"`,
				`effectspec: [3]: tool: must be 1 to 128 of A-Z a-z 0-9 _ . -`,
			}},
		{"element not object", `[{"tool":"a"}, 5]`,
			[]string{`effectspec: [1]: spec must be a JSON object`}},
		{"object instead of list", `{"tool":"a"}`,
			[]string{`effectspec: document must be a JSON array`}},
		{"trailing data", `[] []`,
			[]string{`effectspec: trailing data after a JSON array`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			specs, err := ParseList([]byte(tc.doc))
			if specs != nil {
				t.Errorf("specs returned with error: %+v", specs)
			}
			var got []string
			for _, p := range problemsOf(t, err) {
				got = append(got, p.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	for _, doc := range []string{stripeSpec, `{"tool":"t"}`, `{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/a"},"status":{"accepted":[]}}`} {
		roundTrip(t, doc)
	}
	if got, _ := json.Marshal(Spec{Tool: "t"}); string(got) != `{"tool":"t","idempotency":{},"status":{}}` {
		t.Fatalf("zero defaults written: %s", got)
	}
}

func roundTrip(t *testing.T, doc string) {
	t.Helper()
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(data)
	if err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	if !reflect.DeepEqual(s, again) || !again.Validated() {
		t.Fatalf("round trip changed the spec:\n%+v\n%+v", s, again)
	}
}

func TestParseTimeout(t *testing.T) {
	for _, tt := range []struct {
		text string
		want time.Duration
	}{
		{"30s", 30 * time.Second}, {"15m", 15 * time.Minute}, {"1m30s", 90 * time.Second},
		{"1.5s", 1500 * time.Millisecond}, {"250ms", 250 * time.Millisecond}, {"+2m", 2 * time.Minute},
		{"900s", MaxAttemptTimeout}, {"1ns", time.Nanosecond},
	} {
		s, err := Parse([]byte(`{"tool":"t","timeout":"` + tt.text + `"}`))
		if err != nil {
			t.Errorf("timeout %q: %v", tt.text, err)
			continue
		}
		if s.Timeout != tt.want || s.AttemptTimeout() != tt.want {
			t.Errorf("timeout %q: Timeout %v, AttemptTimeout %v; want %v", tt.text, s.Timeout, s.AttemptTimeout(), tt.want)
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := Parse(enc); err != nil || again.Timeout != tt.want {
			t.Errorf("timeout %q: %s parses as %v, %v", tt.text, enc, again.Timeout, err)
		}
	}
	// The default is left out, not written as "30s": a spec that never set
	// a timeout keeps following the default.
	if enc, _ := json.Marshal(mustParse(t, `{"tool":"t"}`)); strings.Contains(string(enc), "timeout") {
		t.Errorf("zero Timeout marshals as %s", enc)
	}
}

func TestValidateTimeout(t *testing.T) {
	for _, tt := range []struct {
		timeout time.Duration
		want    string // "" for valid
	}{
		{0, ""}, {time.Nanosecond, ""}, {MaxAttemptTimeout, ""},
		{-time.Second, "effectspec: t: timeout: must be positive (zero means the default 30s)"},
		{MaxAttemptTimeout + time.Nanosecond, "effectspec: t: timeout: 15m0.000000001s is more than the maximum 15m0s"},
	} {
		_, err := New(Spec{Tool: "t", Timeout: tt.timeout})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Timeout %v: %v", tt.timeout, err)
		case tt.want != "" && (err == nil || err.Error() != tt.want || !errors.Is(err, ErrInvalidSpec)):
			t.Errorf("Timeout %v: error %v, want %q", tt.timeout, err, tt.want)
		}
	}
}

func TestAttemptTimeout(t *testing.T) {
	for _, tt := range []struct{ timeout, want time.Duration }{
		{0, DefaultAttemptTimeout},
		{2 * time.Minute, 2 * time.Minute},
		{MaxAttemptTimeout, MaxAttemptTimeout},
		// Invalid specs (Validate refuses them) still get a bounded timeout.
		{-time.Second, DefaultAttemptTimeout},
		{time.Hour, MaxAttemptTimeout},
	} {
		if got := (Spec{Timeout: tt.timeout}).AttemptTimeout(); got != tt.want {
			t.Errorf("Timeout %v: AttemptTimeout = %v, want %v", tt.timeout, got, tt.want)
		}
	}
	if DefaultAttemptTimeout != 30*time.Second || MaxAttemptTimeout != 15*time.Minute {
		t.Errorf("defaults %v, %v are not the contract's 30s and 15m", DefaultAttemptTimeout, MaxAttemptTimeout)
	}
}

func TestParseVendorWindow(t *testing.T) {
	for _, tt := range []struct {
		spec string
		want time.Duration // VendorWindow
		set  time.Duration // Idempotency.Window
	}{
		{`{"tool":"t","idempotency":{"binding":"header","header":"K"}}`, DefaultVendorWindow, 0},
		{`{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/k"}}`, DefaultVendorWindow, 0},
		{`{"tool":"t","idempotency":{"binding":"header","header":"K","window":"1s"}}`, time.Second, time.Second},
		{`{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/k","window":"90m"}}`, 90 * time.Minute, 90 * time.Minute},
		{`{"tool":"t","idempotency":{"binding":"header","header":"K","window":"8760h"}}`, maxVendorWindow, maxVendorWindow},
		{`{"tool":"t"}`, 0, 0},
		{`{"tool":"t","idempotency":{"binding":"unsupported"}}`, 0, 0},
	} {
		s, err := Parse([]byte(tt.spec))
		if err != nil {
			t.Errorf("%s: %v", tt.spec, err)
			continue
		}
		if s.Idempotency.Window != tt.set || s.VendorWindow() != tt.want {
			t.Errorf("%s: Window %v, VendorWindow %v; want %v, %v", tt.spec, s.Idempotency.Window, s.VendorWindow(), tt.set, tt.want)
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := Parse(enc); err != nil || !reflect.DeepEqual(again, s) {
			t.Errorf("%s: %s parses as %+v, %v", tt.spec, enc, again, err)
		}
		if tt.set == 0 && strings.Contains(string(enc), "window") {
			t.Errorf("%s: the default window marshals as %s", tt.spec, enc)
		}
	}
	// A Go value: a window is checked whatever its source.
	s := Spec{Tool: "t", Idempotency: Binding{Kind: BindingHeader, Header: "K", Window: -time.Hour}}
	if err := s.check(); err == nil || !strings.Contains(err.Error(), "idempotency.window") {
		t.Errorf("negative window: %v", err)
	}
}

// TestMaxAttemptsRoundTrip: max_attempts parses, survives Marshal, and a
// change to it makes the spec unvalidated.
func TestMaxAttemptsRoundTrip(t *testing.T) {
	s, err := Parse([]byte(`{"tool":"t","idempotency":{"binding":"header","header":"Idempotency-Key"},"max_attempts":3}`))
	if err != nil || s.MaxAttempts != 3 {
		t.Fatalf("Parse: %+v, %v; want max_attempts 3", s, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(b)
	if err != nil || again.MaxAttempts != 3 {
		t.Fatalf("Parse(Marshal) of %s: %+v, %v", b, again, err)
	}
	s.MaxAttempts = 4
	if s.Validated() {
		t.Fatal("a spec whose max_attempts changed still reads validated")
	}
}
