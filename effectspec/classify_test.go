package effectspec

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func mustParse(t *testing.T, doc string) Spec {
	t.Helper()
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestClassify(t *testing.T) {
	s := mustParse(t, stripeSpec)
	tests := []struct {
		status int
		want   Outcome
	}{
		{200, Accepted}, {201, Accepted},
		{400, DefinitelyRejected}, {402, DefinitelyRejected}, {422, DefinitelyRejected}, {409, Unknown},
		{202, Unknown}, {204, Unknown}, {302, Unknown}, {401, Unknown}, {429, Unknown},
		{500, Unknown}, {503, Unknown}, {0, Unknown}, {-1, Unknown}, {999, Unknown},
	}
	for _, tc := range tests {
		if got := s.Classify(tc.status); got != tc.want {
			t.Errorf("Classify(%d) = %s, want %s", tc.status, got, tc.want)
		}
	}
	// An invalid spec that lists a status twice never makes it a success.
	bad := Spec{Status: Statuses{Accepted: []int{200}, DefinitelyRejected: []int{200}}}
	if got := bad.Classify(200); got != Unknown {
		t.Errorf("status in both lists: %s", got)
	}
	if got := (Spec{}).Classify(200); got != Unknown {
		t.Errorf("zero spec: %s", got)
	}
}

// An in-use answer is unknown and never retried, also when an invalid spec
// lists it elsewhere too.
func TestInUse(t *testing.T) {
	s := mustParse(t, stripeSpec)
	if got := s.Classify(409); got != Unknown {
		t.Errorf("Classify(409) = %s, want unknown", got)
	}
	if s.Retryable(409) {
		t.Error("Retryable(409) with 409 in use")
	}
	if !s.Retryable(503) {
		t.Error("Retryable(503) = false: the spec's retry list is ignored")
	}
	for name, st := range map[string]Statuses{
		"accepted":            {Accepted: []int{200, 409}, InUse: []int{409}},
		"definitely_rejected": {DefinitelyRejected: []int{409}, InUse: []int{409}},
		"retryable":           {Retryable: []int{409}, InUse: []int{409}},
	} {
		bad := Spec{Tool: "t", Idempotency: Binding{Kind: BindingHeader, Header: "Idempotency-Key"}, Status: st}
		if err := bad.check(); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("409 in use and %s: Validate = %v", name, err)
		}
		if got := bad.Classify(409); got != Unknown {
			t.Errorf("409 in use and %s: Classify = %s, want unknown", name, got)
		}
		if bad.Retryable(409) {
			t.Errorf("409 in use and %s: Retryable", name)
		}
	}
}

func TestBindingBehaviour(t *testing.T) {
	status := `"status":{"accepted":[200],"definitely_rejected":[400],"retryable":[429,503]}`
	tests := []struct {
		name        string
		doc         string
		prop        Propagation
		dedup       bool
		retry429    bool
		retry400    bool
		prodAllowed bool
	}{
		{"header", `{"tool":"t","idempotency":{"binding":"header","header":"Idempotency-Key"},` + status + `}`,
			PropagationHeader, true, true, false, true},
		{"body pointer", `{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/k"},` + status + `}`,
			PropagationBodyPointer, true, true, false, true},
		{"unsupported", `{"tool":"t","idempotency":{"binding":"unsupported"},` + status + `}`,
			PropagationNone, false, false, false, false},
		{"absent binding", `{"tool":"t",` + status + `}`,
			PropagationNone, false, false, false, false},
		{"federated", `{"tool":"t","route":"federated",` + status + `}`,
			PropagationNone, false, false, false, false},
		{"unsupported read", `{"tool":"t","effect":"read",` + status + `}`,
			PropagationNone, false, false, false, true},
		{"federated read", `{"tool":"t","effect":"read","route":"federated",` + status + `}`,
			PropagationNone, false, false, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, tc.doc)
			if got := s.Propagation(); got != tc.prop {
				t.Errorf("Propagation = %s, want %s", got, tc.prop)
			}
			if got := s.vendorDedup(); got != tc.dedup {
				t.Errorf("vendorDedup = %v", got)
			}
			if got := s.Retryable(429); got != tc.retry429 {
				t.Errorf("Retryable(429) = %v", got)
			}
			if got := s.Retryable(400); got != tc.retry400 {
				t.Errorf("Retryable(400) = %v", got)
			}
			if s.Retryable(200) || s.Retryable(500) {
				t.Errorf("status outside the retryable list is retryable")
			}
			err := (Policy{Environment: Production}).Check(s)
			if (err == nil) != tc.prodAllowed {
				t.Errorf("Check(production) = %v", err)
			}
			if err != nil && !errors.Is(err, ErrPolicyDenied) {
				t.Errorf("denial %v does not wrap ErrPolicyDenied", err)
			}
			for _, env := range []Environment{Development, Staging, Test} {
				if err := (Policy{Environment: env}).Check(s); err != nil {
					t.Errorf("Check(%s) = %v", env, err)
				}
			}
		})
	}
}

func TestInvalidSpecIsCautious(t *testing.T) {
	// A federated spec that claims a binding (refused by Validate) still
	// propagates nothing and earns no second attempt.
	s := Spec{Route: RouteFederated, Idempotency: Binding{Kind: BindingHeader, Header: "X-Key"},
		Status: Statuses{Retryable: []int{503}}}
	if s.Propagation() != PropagationNone || s.vendorDedup() || s.Retryable(503) {
		t.Fatalf("federated spec with a binding: %s %v %v", s.Propagation(), s.vendorDedup(), s.Retryable(503))
	}
	s = Spec{Idempotency: Binding{Kind: "query"}}
	if s.Propagation() != PropagationNone || s.vendorDedup() {
		t.Fatal("unknown binding kind propagates")
	}
}

func TestPolicy(t *testing.T) {
	s := Spec{Tool: "mail.send"}
	err := (Policy{Environment: ""}).Check(s)
	if !errors.Is(err, ErrPolicyDenied) {
		t.Fatalf("zero environment: %v", err)
	}
	want := "effectspec: policy denied: mail.send: a write whose vendor cannot deduplicate on the key (binding unsupported) is not allowed in production"
	if err.Error() != want {
		t.Errorf("got %q\nwant %q", err, want)
	}
	if err := (Policy{Environment: "prod"}).Check(s); !errors.Is(err, ErrPolicyDenied) {
		t.Errorf("unknown environment must read as production: %v", err)
	}
	if err := (Policy{Environment: Production, AllowUnsupportedWrites: true}).Check(s); err != nil {
		t.Errorf("opt-out: %v", err)
	}
	if err := (Policy{}).Check(s); !errors.Is(err, ErrPolicyDenied) {
		t.Errorf("zero policy: %v", err)
	}
	fed := Spec{Tool: "nango.create_issue", Route: RouteFederated}
	if err := (Policy{Environment: Production}).Check(fed); err == nil || !strings.Contains(err.Error(), "federated") {
		t.Errorf("federated write: %v", err)
	}
	if ReasonPolicyDenied != "policy_denied" {
		t.Errorf("reason %q", ReasonPolicyDenied)
	}
}

func TestParseEnvironment(t *testing.T) {
	for in, want := range map[string]Environment{"": Production, "production": Production,
		"staging": Staging, "development": Development, "test": Test} {
		got, err := ParseEnvironment(in)
		if err != nil || got != want {
			t.Errorf("%q: %q %v", in, got, err)
		}
	}
	for _, in := range []string{"prod", "Production", "dev", " production"} {
		if _, err := ParseEnvironment(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	if !Environment("").isProduction() || !Environment("qa").isProduction() || Development.isProduction() {
		t.Error("isProduction")
	}
}

func TestApplyHeader(t *testing.T) {
	s := mustParse(t, stripeSpec)
	h := http.Header{
		"Idempotency-Key": {"client-value"},
		"idempotency-key": {"from-arguments", "second"},
		"IDEMPOTENCY-KEY": {"third"},
		"Content-Type":    {"application/json"},
	}
	body := []byte(`{"amount":100}`)
	out, prop, err := s.Apply(h, body, "idt_0123456789abcdef0123456789abcdef")
	if err != nil || prop != PropagationHeader {
		t.Fatalf("%s %v", prop, err)
	}
	want := http.Header{
		"Idempotency-Key": {"idt_0123456789abcdef0123456789abcdef"},
		"Content-Type":    {"application/json"},
	}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("headers %v", h)
	}
	if string(out) != string(body) {
		t.Errorf("body changed: %s", out)
	}
}

func TestApplyBodyPointer(t *testing.T) {
	s := mustParse(t, `{"tool":"t","idempotency":{"binding":"body_pointer","pointer":"/meta/idempotency.key"}}`)
	h := http.Header{"X": {"y"}}
	out, prop, err := s.Apply(h, []byte(`{"amount": 100}`), "idt_k")
	if err != nil || prop != PropagationBodyPointer {
		t.Fatalf("%s %v", prop, err)
	}
	if string(out) != `{"amount": 100,"meta":{"idempotency.key":"idt_k"}}` {
		t.Errorf("body %s", out)
	}
	if !reflect.DeepEqual(h, http.Header{"X": {"y"}}) {
		t.Errorf("headers changed: %v", h)
	}
	in := []byte(`{"meta": "flat"}`)
	out, prop, err = s.Apply(h, in, "idt_k")
	if !errors.Is(err, errNoTarget) || prop != PropagationNone || string(out) != `{"meta": "flat"}` {
		t.Errorf("crossing a string: %s %s %v", out, prop, err)
	}
}

func TestApplyNone(t *testing.T) {
	for _, doc := range []string{
		`{"tool":"t"}`,
		`{"tool":"t","idempotency":{"binding":"unsupported"}}`,
		`{"tool":"t","route":"federated"}`,
	} {
		s := mustParse(t, doc)
		h := http.Header{"Idempotency-Key": {"client"}}
		body := []byte(`{"a":1}`)
		out, prop, err := s.Apply(h, body, "idt_k")
		if err != nil || prop != PropagationNone || string(out) != `{"a":1}` ||
			!reflect.DeepEqual(h, http.Header{"Idempotency-Key": {"client"}}) {
			t.Errorf("%s: %s %s %v %v", doc, out, prop, err, h)
		}
	}
}

func TestApplyRefuses(t *testing.T) {
	s := mustParse(t, stripeSpec)
	for _, key := range []string{"", "idt_k\r\nX-Evil: 1", "idt k", "idt_é"} {
		h := http.Header{}
		if _, _, err := s.Apply(h, nil, key); !errors.Is(err, errInvalidKey) || len(h) != 0 {
			t.Errorf("key %q: %v %v", key, err, h)
		} else if strings.Contains(err.Error(), key) && key != "" {
			t.Errorf("error quotes the key: %v", err)
		}
	}
	bad := Spec{Tool: "t", Idempotency: Binding{Kind: BindingHeader, Header: "Authorization"}}
	h := http.Header{"Authorization": {"Bearer secret"}}
	_, _, err := bad.Apply(h, nil, "idt_k")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "idempotency.header" || h.Get("Authorization") != "Bearer secret" {
		t.Errorf("reserved header: %v %v", err, h)
	}
	if strings.Contains(err.Error(), "secret") {
		t.Errorf("error leaks the header value: %v", err)
	}
	if _, _, err := s.Apply(nil, nil, "idt_k"); err == nil {
		t.Error("nil header accepted")
	}
}

// TestOutcomeFinal: only accepted and definitely_rejected replay as-is.
func TestOutcomeFinal(t *testing.T) {
	for o, want := range map[Outcome]bool{Accepted: true, DefinitelyRejected: true,
		Unknown: false, InProgress: false, Held: false, Denied: false, "": false} {
		if o.Final() != want {
			t.Errorf("%q.Final() = %v, want %v", o, !want, want)
		}
	}
}

// TestBindingPropagation: a binding says how the key reaches the vendor,
// and a spec's propagation is its binding's but on a federated route.
func TestBindingPropagation(t *testing.T) {
	for b, want := range map[BindingKind]Propagation{BindingHeader: PropagationHeader, BindingBodyPointer: PropagationBodyPointer,
		BindingInProcessKeyed: PropagationHandler, BindingMeta: PropagationMeta, BindingInProcess: PropagationNone, BindingUnsupported: PropagationNone, "": PropagationNone} {
		if got := b.Propagation(); got != want {
			t.Errorf("%q.Propagation() = %q, want %q", b, got, want)
		}
		if got := (Spec{Idempotency: Binding{Kind: b}}).Propagation(); got != want {
			t.Errorf("spec of %q: Propagation() = %q, want %q", b, got, want)
		}
		if got := (Spec{Route: RouteFederated, Idempotency: Binding{Kind: b}}).Propagation(); got != PropagationNone {
			t.Errorf("federated spec of %q: Propagation() = %q, want none", b, got)
		}
	}
}
