package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// chargeSpec is the EffectSpec of the one tool this gateway fronts: the
// vendor deduplicates on our key in its Idempotency-Key header.
const chargeSpec = `{
	"tool": "payments.create_charge", "effect": "write", "route": "native",
	"idempotency": {"binding": "header", "header": "Idempotency-Key"},
	"status": {"accepted": [200, 201], "definitely_rejected": [400, 402, 404, 422],
	           "retryable": [429, 503], "in_use": [409]}
}`

// Names of the existing gateway: its tenant (normally from its own auth),
// its connection to the vendor, and the vendor path it forwards to.
const (
	workspace    = "ws_example"
	vendorKeyEnv = "VENDOR_API_KEY" // the variable main reads the vendor's key from
	connection   = "conn_payments"
	vendorPath   = "/v1/charges"
	maxBodySize  = 1 << 20
)

// newGateway returns the existing gateway's mux with the idempotency core
// added to its one side-effecting route. vendorKey, if set, is sent as
// Authorization: Bearer; it reaches no receipt, stored result or error.
func newGateway(store idempotency.Store, vendorURL, vendorKey string) (http.Handler, error) {
	u, err := url.Parse(vendorURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return nil, errors.New("embed: vendor URL: want http(s)://host[:port] without userinfo")
	}
	spec, err := effectspec.Parse([]byte(chargeSpec))
	if err != nil {
		return nil, err
	}
	target := &retry.HTTPTarget{URL: u.JoinPath(vendorPath).String(), Header: http.Header{}}
	if vendorKey != "" {
		target.Header.Set("Authorization", "Bearer "+vendorKey)
	}
	// Non-secret dispatch facts: the claim pins their fingerprint. The
	// vendor account is named by the variable its key is read from (never
	// the key): another account, or http instead of https, for a key whose
	// call is unknown is a destination_conflict, never a second effect.
	credential := idempotency.NoCredential
	if vendorKey != "" {
		credential = vendorKeyEnv
	}
	route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{Connection: connection, Provider: "payments",
		URL: target.URL, Credential: credential})
	if err != nil {
		return nil, err
	}
	// Checked once here rather than on every call.
	tool, err := retry.NewDispatch(spec, route, target)
	if err != nil {
		return nil, err
	}
	c := &charges{orch: &retry.Orchestrator{Store: store}, tool: tool}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("POST "+vendorPath, withIdempotencyKey(c))
	return mux, nil
}

type keyCtx struct{}

type effectiveKey struct {
	key    idempotency.Key
	source idempotency.KeySource
}

// withIdempotencyKey resolves the effective key (supplied or minted) and
// echoes it. A malformed key is refused, never replaced by a minted one.
func withIdempotencyKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, source, err := idempotency.FromHeader(r.Header.Values("Idempotency-Key"))
		if err != nil {
			refuse(w, err)
			return
		}
		w.Header().Set("Idempotency-Key", key.String())
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), keyCtx{}, effectiveKey{key, source})))
	})
}

type charges struct {
	orch *retry.Orchestrator
	tool *retry.Dispatch
}

func (c *charges) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ek := r.Context().Value(keyCtx{}).(effectiveKey)
	args, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodySize))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]string{"reason": "body_too_large"})
		}
		return // the client went away: nothing was claimed
	}
	out, err := c.orch.Do(r.Context(), retry.Call{
		Scope: idempotency.Scope{Workspace: workspace, Connection: connection, Tool: c.tool.Spec().Tool},
		Key:   ek.key, KeySource: ek.source, Arguments: args, Dispatch: c.tool,
	})
	if err != nil {
		refuse(w, err)
		return
	}
	rc := out.Receipt
	slog.Info("charge", "key", rc.IdempotencyKey, "outcome", rc.Outcome, "attempts", rc.AttemptCount,
		"status", rc.Status, "replayed", rc.Replayed)
	if rc.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	res := out.Result
	if res == nil {
		// No answer arrived (the connection failed after the request may have
		// left): the vendor may or may not have charged. Never report success.
		writeJSON(w, http.StatusBadGateway, map[string]any{"reason": "outcome_unknown", "receipt": rc})
		return
	}
	for name, vals := range res.Header { // only idempotency.SafeHeader names were stored
		if name != "Idempotency-Key" && name != "Idempotent-Replayed" {
			w.Header()[name] = vals
		}
	}
	w.WriteHeader(res.Status)
	w.Write(res.Body) // nil when the body was over the store's limit (res.BodyDropped)
}

// refuse maps a refusal to its HTTP status and a stable JSON reason. Nothing
// was sent to the vendor.
func refuse(w http.ResponseWriter, err error) {
	reason, status := idempotency.Reason(err)
	if reason == "" {
		slog.Error("charge", "error", err) // library errors hold no secret
		reason, status = "internal", http.StatusInternalServerError
	}
	if reason == "in_progress" || reason == "vendor_unreachable" {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, map[string]string{"reason": reason})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("embed: marshal reply: %v", err)) // maps of strings and receipts always marshal
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
