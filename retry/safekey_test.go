package retry_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

func safeOf(p *bool) string {
	if p == nil {
		return "absent"
	}
	if *p {
		return "true"
	}
	return "false"
}

// TestSafeNewKeyOnReceipts: every receipt says whether a new key is safe
// (docs/DESIGN.md, "refserver wire contract"): only a definitely_rejected call
// none of whose earlier attempts may have left, and a denied one, are.
func TestSafeNewKeyOnReceipts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t, 5*time.Second)
		o := orch(st, 5*time.Second)
		check := func(name string, out retry.Answer, err error, want string) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if got := safeOf(out.Receipt.SafeNewKey); got != want {
				t.Errorf("%s (%s): safe_new_key %s, want %s", name, out.Receipt.Outcome, got, want)
			}
		}
		ok := newVendor(t, status(201))
		c := call(ok.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		out, err := o.Do(context.Background(), c)
		check("accepted", out, err, "false")
		out, err = o.Do(context.Background(), c)
		check("accepted replay", out, err, "false")

		no := newVendor(t, status(422))
		c = call(no.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		out, err = o.Do(context.Background(), c)
		check("rejected", out, err, "true")
		out, err = o.Do(context.Background(), c)
		check("rejected replay", out, err, "true")

		// 503 then 422: the first attempt reached the vendor.
		twice := newVendor(t, func(n int64, w http.ResponseWriter, r *http.Request) {
			if n == 1 {
				status(503)(n, w, r)
				return
			}
			status(422)(n, w, r)
		})
		c = call(twice.URL, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		out, err = o.Do(context.Background(), c)
		check("rejected after a 503", out, err, "false")
		if out.Receipt.AttemptCount != 2 {
			t.Fatalf("attempt_count %d, want 2", out.Receipt.AttemptCount)
		}

		url, _ := closeAfterRead(t)
		out, err = o.Do(context.Background(), call(url, spec(effectspec.BindingUnsupported), idempotency.NewKey(), &retry.Executor{}))
		check("unknown", out, err, "false")

		sp := spec(effectspec.BindingHeader)
		sp.Approval = effectspec.ApprovalRequired
		sp = effectspec.MustNew(sp)
		c = call(ok.URL, sp, idempotency.NewKey(), nil)
		out, err = o.Do(context.Background(), c)
		check("held", out, err, "false")
	})
}

// TestSafeNewKeyOnDenied: a denied call that sent nothing is safe under a
// new key; a re-held unknown one whose attempt may have left is not.
func TestSafeNewKeyOnDenied(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		st := b.open(t, 5*time.Second)
		o := orch(st, 5*time.Second)
		ok := newVendor(t, status(201))
		sp := spec(effectspec.BindingHeader)
		sp.Approval = effectspec.ApprovalRequired
		sp = effectspec.MustNew(sp)
		deny := func(ticket string) {
			t.Helper()
			if _, err := st.Decide(context.Background(), idempotency.DecideRequest{Ticket: ticket, Approve: false, OpID: idempotency.NewOpID()}); err != nil {
				t.Fatal(err)
			}
		}
		c := call(ok.URL, sp, idempotency.NewKey(), nil)
		held, err := o.Do(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		deny(held.Ticket)
		_, err = o.Do(context.Background(), c)
		var de *retry.RefusalError
		if !errors.As(err, &de) || !errors.Is(err, idempotency.ErrDenied) || safeOf(de.SafeNewKey) != "true" {
			t.Fatalf("denied held call: %v, want a denial with safe_new_key true", err)
		}

		// An unknown call with a vendor binding, re-held once the tool
		// requires approval, then denied: its attempt may have left.
		url, seen := closeAfterRead(t)
		c = call(url, spec(effectspec.BindingHeader), idempotency.NewKey(), &retry.Executor{})
		out, err := o.Do(context.Background(), c)
		expect(t, out, err, effectspec.Unknown, 1, seen.Load())
		c.Spec = sp
		reheld, err := o.Do(context.Background(), c)
		if err != nil || reheld.Ticket == "" {
			t.Fatalf("re-hold: %+v %v", reheld, err)
		}
		deny(reheld.Ticket)
		_, err = o.Do(context.Background(), c)
		if !errors.As(err, &de) || !errors.Is(err, idempotency.ErrDenied) || safeOf(de.SafeNewKey) != "false" {
			t.Fatalf("denied re-held unknown call: %v, want a denial with safe_new_key false", err)
		}
	})
}
