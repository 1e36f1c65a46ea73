// Command embed is an existing plain net/http gateway with the Obol
// idempotency core added to its one side-effecting route, POST /v1/charges.
// gateway.go is the whole integration; this file only wires flags, the
// store and a demo vendor.
//
//	go run ./examples/embed                          # embedded store, demo vendor
//	go run ./examples/embed -redis redis://127.0.0.1:6379/0 -vendor https://vendor.example
//
// The vendor's API key, if any, is read from VENDOR_API_KEY.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
)

const notDurable = `
************************************************************************
*  EMBEDDED STORE: an in-process miniredis. It is NOT DURABLE.         *
*  Every claim is lost when this process exits, and two gateway        *
*  processes do not share it. Use -redis URL for anything but a demo.  *
************************************************************************
`

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	redisURL := flag.String("redis", "", "Redis URL (redis://, rediss://, or a comma-separated Cluster seed list); empty: an embedded, NOT durable miniredis")
	vendorURL := flag.String("vendor", "", "vendor base URL; empty: an in-process demo vendor")
	flag.Parse()
	if err := run(*addr, *redisURL, *vendorURL); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(addr, redisURL, vendorURL string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	store, closeStore, err := openStore(ctx, redisURL)
	if err != nil {
		return err
	}
	defer closeStore()

	if vendorURL == "" {
		vendor := httptest.NewServer(demoVendor())
		defer vendor.Close()
		vendorURL = vendor.URL
		slog.Info("demo vendor", "url", vendorURL)
	}
	h, err := newGateway(store, vendorURL, os.Getenv(vendorKeyEnv))
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	shut := make(chan error, 1)
	go func() {
		<-ctx.Done()
		// In-flight calls finalize within their tool's timeout (30s by
		// default) even if their clients left; give them that long before
		// the store closes.
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		shut <- srv.Shutdown(sctx)
	}()
	slog.Info("listening", "addr", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return <-shut
}

// demoVendor answers every charge with 201 and counts the requests it saw,
// so a replay is visible: its charge id does not change.
func demoVendor() http.Handler {
	var n atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		id := n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "{\"id\":\"ch_%d\",\"vendor_requests\":%d}\n", id, id)
	})
}

// openStore connects to Redis at redisURL, or starts the embedded, NOT
// durable miniredis when redisURL is empty.
func openStore(ctx context.Context, redisURL string) (*redisstore.Store, func(), error) {
	if redisURL == "" {
		store, closeStore, err := embedded.New(ctx, redisstore.Options{})
		if err != nil {
			return nil, nil, fmt.Errorf("embed: embedded store: %w", err)
		}
		fmt.Fprint(os.Stderr, notDurable)
		return store, closeStore, nil
	}
	opt, err := redisstore.ParseURL(redisURL) // never echoes the URL
	if err != nil {
		return nil, nil, fmt.Errorf("embed: -redis: %w", err)
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, nil, fmt.Errorf("embed: redis: %w", err)
	}
	store, err := redisstore.New(ctx, client, redisstore.Options{})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return store, func() { store.Close(); client.Close() }, nil
}
