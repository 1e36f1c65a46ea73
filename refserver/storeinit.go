package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/obol-gateway/obol/idempotency/redisstore"
	"github.com/obol-gateway/obol/mcpgateway/gatewayconfig"
	"github.com/obol-gateway/obol/retry"
)

// storeInit is "refserver store init": it initialises the fleet's Redis
// once, before the first production gateway starts (redisstore.Init;
// docs/DESIGN.md, "The record and its lifecycle", Store amnesia). It takes
// the server's own -config and -redis, so it writes what the fleet will
// read: its key prefix, scope version and deployment id. It exits 0 when
// the store is initialised now or was already, and refuses while the fleet
// records a loss of data nobody acknowledged.
func storeInit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("refserver store init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: refserver store init -config FILE [-redis URL] [-adopt-records]\n\n"+
			"Initialises the fleet's Redis once, before the first production gateway starts.\n"+
			"Environment: "+envRedisURL+" (as -redis), "+envDeploymentID+" (the fleet's deployment id), each secret_env of FILE.\n\nFlags:")
		fs.PrintDefaults()
	}
	configPath := fs.String("config", "", "the fleet's configuration `file` (as for the server)")
	redisURL := fs.String("redis", "", "Redis `URL` (as for the server); default: $"+envRedisURL)
	adopt := fs.Bool("adopt-records", false, "write the scope version over existing records: only after refserver scope-status "+
		"showed every live record of this build's version")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "refserver store init: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *redisURL == "" {
		*redisURL = os.Getenv(envRedisURL)
	}
	if *configPath == "" || *redisURL == "" {
		fmt.Fprintln(stderr, "refserver store init: give -config FILE and -redis URL (or set "+envRedisURL+")")
		return 2
	}
	cfg, err := wrapConfig(gatewayconfig.LoadFile(ctx, *configPath, gatewayconfig.Options{Executor: &retry.Executor{}}))
	if err == nil {
		err = cfg.resolveDeployment(os.Getenv, false)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if _, err := redisstore.ParseURL(*redisURL); err != nil {
		fmt.Fprintf(stderr, "refserver store init: -redis: %v\n", err)
		return 2
	}
	client, err := redisstore.Dial(*redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "refserver store init: %v\n", err)
		return 1
	}
	defer client.Close()
	ictx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	res, err := redisstore.Init(ictx, client, cfg.Store, redisstore.InitOptions{AdoptRecords: *adopt})
	if err != nil {
		fmt.Fprintf(stderr, "refserver store init: %v\n", err)
		return 1
	}
	what := "the store was initialised already; nothing written"
	if res.Wrote {
		what = fmt.Sprintf("store initialised (%d generation sentinels written)", res.Generations)
	}
	fmt.Fprintf(stdout, "%s: prefix %s, scope version %s\n", what, cfg.Store.Prefix, res.ScopeVersion)
	return 0
}
