package retry_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/retry"
)

// TestCallMemoryBound: a call whose vendor answers DefaultMaxResponseBytes
// allocates about one body in the gateway (read once, scrubbed in place
// when no secret is in it, not copied to be stored when the store would
// drop it) when the vendor sent a Content-Length, about two without one
// (read in pieces, then joined). The bound is on bytes allocated, which
// does not depend on timing, with a quarter body of margin.
func TestCallMemoryBound(t *testing.T) {
	const size = retry.DefaultMaxResponseBytes
	body := bytes.Repeat([]byte(`{"row":"0123456789abcdef"},`), size/27)
	body = append(body, bytes.Repeat([]byte(" "), size-len(body))...)
	for _, chunked := range []bool{false, true} {
		bound := 1.25
		if chunked {
			bound = 2.25
		}
		t.Run("chunked="+strconv.FormatBool(chunked), func(t *testing.T) {
			v := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				if !chunked {
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				}
				w.WriteHeader(http.StatusOK)
				w.Write(body)
			}))
			t.Cleanup(v.Close)
			m := miniredis.RunT(t)
			st := openStore(t, rueidis.ClientOption{InitAddress: []string{m.Addr()}, DisableCache: true}, 5*time.Second, true)
			o := &retry.Orchestrator{Store: st}
			target := &retry.HTTPTarget{URL: v.URL, Method: http.MethodPost, Header: http.Header{"Authorization": {"Bearer sk_test_memory_bound_0123"}}}
			spec := effectspec.MustNew(effectspec.Spec{Tool: "t", Effect: effectspec.EffectWrite,
				Idempotency: effectspec.Binding{Kind: effectspec.BindingHeader, Header: "Idempotency-Key"},
				Status:      effectspec.Statuses{Accepted: []int{200}}})
			route, err := idempotency.NewRoute(spec, idempotency.RouteTarget{Connection: "c", Provider: "p", Method: http.MethodPost, URL: v.URL, Credential: "SECRET"})
			if err != nil {
				t.Fatal(err)
			}
			do := func() {
				out, err := o.Do(context.Background(), retry.Call{
					Scope: idempotency.Scope{Workspace: "ws", Connection: "c", Tool: "t"},
					Key:   idempotency.NewKey(), KeySource: idempotency.KeyMinted, Arguments: []byte(`{}`),
					Spec: spec, Route: route, Target: target,
				})
				if err != nil || out.Receipt.Outcome != effectspec.Accepted || len(out.Result.Body) != size {
					t.Fatalf("err %v receipt %+v", err, out.Receipt)
				}
			}
			do() // warm: connections, pools, scripts
			const calls = 4
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for range calls {
				do()
			}
			runtime.ReadMemStats(&after)
			perCall := float64(after.TotalAlloc-before.TotalAlloc) / calls / size
			t.Logf("allocated per call: %.2f bodies", perCall)
			if perCall > bound {
				t.Errorf("a call allocated %.2f times the vendor's body, want at most %.2f", perCall, bound)
			}
		})
	}
}

// TestHeadContentLength: a HEAD answer's Content-Length describes a body
// that is never sent; the read allocated for it must not wait for it.
func TestHeadContentLength(t *testing.T) {
	v := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "500")
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(v.Close)
	req, _ := http.NewRequest(http.MethodHead, v.URL, nil)
	res := new(retry.Executor).Do(context.Background(), req)
	if res.Phase != retry.Responded || res.Status != 200 || len(res.Body) != 0 || res.Truncated {
		t.Errorf("result %+v", res)
	}
}
