// Package refunds is a gateway team's own handler built on the Obol
// idempotency core, kept tiny so that its tests stand out: they are the
// pattern to copy for unit-testing a handler against miniredis.
//
// The handler takes its two dependencies as fields, so a test passes a
// redisstore.Store opened on miniredis and a fake vendor (a retry.TargetFunc)
// while production passes real Redis and a retry.HTTPTarget. See
// refunds_test.go for opening the store on miniredis, moving Redis's clock to
// expire a lease or a record, and asserting on receipts.
package refunds

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// spec is the refunds tool's EffectSpec: the vendor deduplicates on our key,
// which it reads from the "idempotency_key" member of the body. MustNew
// validates it: the orchestrator runs only validated specs.
var spec = effectspec.MustNew(effectspec.Spec{
	Tool:        "payments.refund",
	Effect:      effectspec.EffectWrite,
	Route:       effectspec.RouteNative,
	Idempotency: effectspec.Binding{Kind: effectspec.BindingBodyPointer, Pointer: "/idempotency_key"},
	Status: effectspec.Statuses{
		Accepted:           []int{200, 201},
		DefinitelyRejected: []int{400, 402, 404, 422},
		Retryable:          []int{429, 503},
		// The vendor's "a request with this key is still being processed":
		// always unknown, never retried at once.
		InUse: []int{409},
	},
})

// scope is where a refund's key is unique: the workspace (a real gateway takes
// it from its own authentication), the connection and the tool.
var scope = idempotency.Scope{Workspace: "ws_acme", Connection: "conn_payments", Tool: spec.Tool}

// route is the dispatch facts of a refund, which the claim pins: the
// vendor's endpoint (Vendor sends there), the binding from spec, and the
// vendor account, named by the variable that holds its API key (never the
// key). Another account or endpoint for a key whose call is unknown is then a
// destination_conflict, never a dispatch elsewhere.
var route = func() idempotency.Route {
	r, err := idempotency.NewRoute(spec, idempotency.RouteTarget{Connection: scope.Connection, Provider: "payments",
		URL: "https://payments.example/v1/refunds", Credential: "PAYMENTS_API_KEY"})
	if err != nil {
		panic(err)
	}
	return r
}()

// Handler serves POST /refunds: the request body is the refund's arguments.
type Handler struct {
	// Orchestrator runs the claim, the attempt and the finalize. Its Store
	// is a redisstore.Store: on Redis in production, on miniredis in tests.
	Orchestrator *retry.Orchestrator
	// Vendor sends one attempt: a *retry.HTTPTarget in production.
	Vendor retry.Target
}

// Reply is the body of every answer the vendor gave (fresh or replayed).
type Reply struct {
	Refund  json.RawMessage `json:"refund,omitempty"` // the vendor's body, if JSON
	Receipt receipt.Receipt `json:"receipt"`
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, source, err := idempotency.FromHeader(r.Header.Values("Idempotency-Key"))
	if err != nil {
		refuse(w, err)
		return
	}
	w.Header().Set("Idempotency-Key", key.String())
	args, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 64<<10))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"reason": "body_too_large"})
		}
		return // or the client went away; nothing was claimed
	}
	out, err := h.Orchestrator.Do(r.Context(), retry.Call{
		Scope: scope, Key: key, KeySource: source, Arguments: args, Spec: spec, Target: h.Vendor, Route: route,
	})
	if err != nil {
		refuse(w, err)
		return
	}
	if out.Receipt.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	reply := Reply{Receipt: out.Receipt}
	status := http.StatusBadGateway // no answer: the outcome is unknown, never success
	if res := out.Result; res != nil {
		status = res.Status
		if json.Valid(res.Body) {
			reply.Refund = res.Body
		}
	}
	writeJSON(w, status, reply)
}

// refuse answers a refusal with its HTTP status and stable reason.
func refuse(w http.ResponseWriter, err error) {
	reason, status := idempotency.Reason(err)
	if reason == "" {
		reason, status = "internal", http.StatusInternalServerError
	}
	writeJSON(w, status, map[string]string{"reason": reason})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v) // string maps and Replies always marshal
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b)
}
