package refunds

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/receipt"
	"github.com/obol-gateway/obol/retry"
)

// A handler on a store in miniredis: the second call with the key replays
// the first answer, and the vendor sees one request.
func ExampleHandler() {
	store, closeStore, err := embedded.New(context.Background(), redisstore.Options{})
	if err != nil {
		panic(err)
	}
	defer closeStore()

	v := &vendor{} // a fake retry.Target; production uses a *retry.HTTPTarget
	h := &Handler{Orchestrator: &retry.Orchestrator{Store: store}, Vendor: v}
	for range 2 {
		r := httptest.NewRequest(http.MethodPost, "/refunds", strings.NewReader(`{"charge":"ch_1","amount":500}`))
		r.Header.Set("Idempotency-Key", "idt_0123456789abcdef0123456789abcdef")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var reply struct {
			Refund  json.RawMessage
			Receipt receipt.Receipt
		}
		json.Unmarshal(w.Body.Bytes(), &reply)
		fmt.Println(w.Code, string(reply.Refund), reply.Receipt.Outcome, reply.Receipt.AttemptCount, reply.Receipt.Replayed)
	}
	fmt.Println("vendor attempts:", v.attempts())
	// Output:
	// 201 {"id":"re_1","status":201} accepted 1 false
	// 201 {"id":"re_1","status":201} accepted 1 true
	// vendor attempts: 1
}
