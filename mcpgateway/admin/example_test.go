package admin_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/mcpgateway/admin"
)

// The admin handler mounted next to a gateway's other endpoints, and its
// Client: an approver lists the unknown calls of every workspace.
func Example() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	defer mr.Close()
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	store, err := redisstore.New(context.Background(), client, redisstore.Options{SkipEvictionCheck: true})
	if err != nil {
		panic(err)
	}

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
	page, err := api.ListUnknown(context.Background(), admin.ListRequest{})
	fmt.Println(len(page.Unknown), "unknown calls;", err)
	_, err = (&admin.Client{BaseURL: srv.URL, Key: "ob_guess"}).ListUnknown(context.Background(), admin.ListRequest{})
	fmt.Println(err)
	// Output:
	// 0 unknown calls; <nil>
	// unauthorized (HTTP 401): missing or unknown approver key (Authorization: Bearer <approver key>)
}
