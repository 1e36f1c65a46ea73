package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
	"github.com/obol-gateway/obol/mcpgateway/admin"
)

// The admin handler mounted next to a gateway's other endpoints, and its
// Client: an approver's decision on a ticket the store does not hold, and
// a request with a key that is not an approver's.
func Example() {
	store, closeStore, err := embedded.New(context.Background(), redisstore.Options{})
	if err != nil {
		panic(err)
	}
	defer closeStore()

	h, err := admin.New(admin.Config{
		Store:      store,
		Approver:   func(key string) (string, bool) { return "ops-oncall", key == "ob_approver_1" },
		Workspaces: []string{"ws_acme"},
	})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/v1/", h)
	mux.Handle("/healthz", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	api := admin.Client{BaseURL: srv.URL, Key: "ob_approver_1"}
	_, err = api.Decide(context.Background(), "apt_00000000000000000000000000000001", true)
	fmt.Println(err)
	_, err = (&admin.Client{BaseURL: srv.URL, Key: "ob_guess"}).Decide(context.Background(), "apt_00000000000000000000000000000001", true)
	fmt.Println(err)
	// Output:
	// not_found (HTTP 404): not found
	// unauthorized (HTTP 401): missing or unknown approver key (Authorization: Bearer <approver key>)
}
