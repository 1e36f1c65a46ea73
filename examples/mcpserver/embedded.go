package main

import (
	"context"
	"flag"
	"log"
	"net/http"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"

	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// embeddedStore is a store on an in-process miniredis: NOT durable, not
// shared. A real server connects with redisstore.ParseURL's options instead.
// It exits the process when the store cannot start.
func embeddedStore() (*redisstore.Store, func()) {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		log.Fatal(err)
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		log.Fatal(err)
	}
	store, err := redisstore.New(context.Background(), client, redisstore.Options{SkipEvictionCheck: true})
	if err != nil {
		log.Fatal(err)
	}
	return store, func() { client.Close(); mr.Close() }
}

// listen serves h on -addr until the process ends.
func listen(h http.Handler) {
	addr := flag.String("addr", "127.0.0.1:8090", "listen address host:port")
	flag.Parse()
	log.Printf("MCP at http://%s/mcp (embedded store, workspace local, development policy)", *addr)
	log.Print(http.ListenAndServe(*addr, h))
}
