package effectspec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

const validatedDoc = `{"tool": "stripe.create_charge",
  "idempotency": {"binding": "header", "header": "Idempotency-Key"},
  "status": {"accepted": [200, 201], "definitely_rejected": [400], "retryable": [503], "in_use": [409]},
  "timeout": "45s"}`

func TestValidatedOnlyFromValidation(t *testing.T) {
	parsed, err := Parse([]byte(validatedDoc))
	if err != nil {
		t.Fatal(err)
	}
	list, err := ParseList([]byte("[" + validatedDoc + `, {"tool": "mail.send"}]`))
	if err != nil {
		t.Fatal(err)
	}
	built, err := New(Spec{Tool: "mail.send", Effect: EffectRead})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]Spec{"Parse": parsed, "ParseList[0]": list[0], "ParseList[1]": list[1], "New": built, "MustNew": MustNew(Spec{Tool: "t"})} {
		if !s.Validated() {
			t.Errorf("%s: not validated", name)
		}
		if c := s; !c.Validated() {
			t.Errorf("%s: a copy is not validated", name)
		}
	}

	// encoding/json cannot read a duration string into Timeout: a spec it
	// decodes would silently lose the timeout, so it refuses loudly.
	var decoded Spec
	if err := json.Unmarshal([]byte(validatedDoc), &decoded); err == nil {
		t.Fatal("encoding/json decoded a duration string into Timeout")
	}
	decoded = Spec{}
	if err := json.Unmarshal([]byte(strings.Replace(validatedDoc, `"timeout": "45s"`, `"timeout": 45000000000`, 1)), &decoded); err != nil {
		t.Fatal(err)
	}
	checked := Spec{Tool: "t"}
	if err := checked.check(); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]Spec{
		"zero":                 {},
		"literal":              {Tool: "t", Idempotency: Binding{Kind: BindingHeader, Header: "Idempotency-Key"}},
		"encoding/json":        decoded,
		"Validate checks only": checked,
	} {
		if s.Validated() {
			t.Errorf("%s: validated", name)
		}
	}
}

func TestNewRefusesInvalid(t *testing.T) {
	for _, s := range []Spec{
		{},
		{Tool: "t", Idempotency: Binding{Kind: BindingHeader, Header: "Authorization"}},
		{Tool: "t", Route: RouteFederated, Idempotency: Binding{Kind: BindingHeader, Header: "X-Key"}},
		{Tool: "t", Status: Statuses{Accepted: []int{200}, DefinitelyRejected: []int{200}}},
	} {
		got, err := New(s)
		if !errors.Is(err, ErrInvalidSpec) || fieldErrors(err) == nil {
			t.Errorf("%+v: err %v, want joined *FieldErrors", s, err)
		}
		if got.Validated() || got.Tool != "" {
			t.Errorf("%+v: returned %+v on error", s, got)
		}
	}
	defer func() {
		if r := recover(); r == nil {
			t.Error("MustNew of an invalid spec did not panic")
		} else if err, ok := r.(error); !ok || !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("MustNew panicked with %v", r)
		}
	}()
	MustNew(Spec{Tool: "t", Idempotency: Binding{Kind: "query"}})
}

// A change after validation undoes it, whichever field it touches, even a
// write through a status list the validated spec shares.
func TestValidatedSpecChanged(t *testing.T) {
	for name, change := range map[string]func(*Spec){
		"tool":            func(s *Spec) { s.Tool = "other" },
		"effect":          func(s *Spec) { s.Effect = EffectRead },
		"route":           func(s *Spec) { s.Route = RouteFederated },
		"approval":        func(s *Spec) { s.Approval = ApprovalRequired },
		"binding kind":    func(s *Spec) { s.Idempotency.Kind = BindingUnsupported },
		"binding header":  func(s *Spec) { s.Idempotency.Header = "Authorization" },
		"accepted":        func(s *Spec) { s.Status.Accepted = append(s.Status.Accepted, 400) },
		"rejected":        func(s *Spec) { s.Status.DefinitelyRejected = nil },
		"retryable":       func(s *Spec) { s.Status.Retryable[0] = 200 },
		"accepted[0]":     func(s *Spec) { s.Status.Accepted[0] = 400 },
		"timeout":         func(s *Spec) { s.Timeout = 10 * time.Minute },
		"timeout cleared": func(s *Spec) { s.Timeout = 0 },
		"in use":          func(s *Spec) { s.Status.InUse = append(s.Status.InUse, 425) },
		"in use cleared":  func(s *Spec) { s.Status.InUse = nil },
		"in_use[0]":       func(s *Spec) { s.Status.InUse[0] = 425 },
	} {
		s, err := Parse([]byte(validatedDoc))
		if err != nil {
			t.Fatal(err)
		}
		original := s // shares the status lists
		change(&s)
		if s.Validated() {
			t.Errorf("%s: still validated after the change", name)
		}
		if again, err := New(s); err == nil && !again.Validated() {
			t.Errorf("%s: New of the changed spec is not validated", name)
		}
		if name == "accepted[0]" || name == "retryable" || name == "in_use[0]" {
			// The write went through the shared array: the copy changed too.
			if original.Validated() {
				t.Errorf("%s: the copy sharing the list is still validated", name)
			}
		}
	}
}
