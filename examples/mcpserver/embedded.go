package main

import (
	"context"
	"flag"
	"log"
	"net/http"

	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/idempotency/redisstore/embedded"
)

// embeddedStore is a store on an in-process miniredis: NOT durable, not
// shared. A real server connects with redisstore.ParseURL's options instead.
// It exits the process when the store cannot start.
func embeddedStore() (*redisstore.Store, func()) {
	store, closeStore, err := embedded.New(context.Background(), redisstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return store, closeStore
}

// listen serves h on -addr until the process ends.
func listen(h http.Handler) {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address host:port")
	flag.Parse()
	log.Printf("MCP at http://%s/mcp (embedded store, workspace local, development policy)", *addr)
	log.Print(http.ListenAndServe(*addr, h))
}
