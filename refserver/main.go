package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/mcpgateway/admin/operator"
	"github.com/obol-gateway/obol/mcpgateway/gatewayconfig"
	"github.com/obol-gateway/obol/mcpgateway/otelhooks"
	"github.com/obol-gateway/obol/retry"
)

// envRedisURL names the environment variable that may hold the -redis URL,
// so that a password never has to be on the command line (where every user
// of the machine can read it).
const envRedisURL = "OBOL_REDIS_URL"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code. The listen
// address is printed on stdout on start; the Redis URL never is. When both
// -redis and OBOL_REDIS_URL are set, -redis wins and the server warns that
// OBOL_REDIS_URL is ignored.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) > 0 && isHelp(args[0]):
		fs, _ := newServerFlags()
		fs.SetOutput(stdout)
		fmt.Fprint(stdout, subcommands)
		fs.PrintDefaults()
		return 0
	case len(args) > 0 && args[0] == "version":
		return version(stdout)
	case len(args) > 1 && args[0] == "config" && args[1] == "check":
		return configCheck(ctx, args[2:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "scope-status" {
		return scopeStatus(ctx, args[1:], stdout, stderr)
	}
	if len(args) > 1 && args[0] == "store" && args[1] == "init" {
		return storeInit(ctx, args[2:], stdout, stderr)
	}
	if code, ok := operator.Run(ctx, "refserver", args, stdout, stderr, os.Getenv); ok {
		return code
	}
	fs, f := newServerFlags()
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, subcommands)
		fs.PrintDefaults()
	}
	configPath, redisURL, addr, cpuProfile, execTrace := f.config, f.redis, f.addr, f.cpuProfile, f.execTrace
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "refserver: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	// Logs are slog text on stderr: one line per call and per attempt with
	// workspace, tool, key, outcome and timing. Keys are identifiers, not
	// secrets, and are logged; Authorization values, API keys and
	// connection secrets never are (error texts pass through a
	// receipt.Redactor of every configured secret).
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if env, ok := os.LookupEnv(envRedisURL); ok && env != "" {
		// The flag wins, so a command line can always override what the
		// environment says; the URL itself is never printed (it may hold a
		// password).
		if flagSet(fs, "redis") {
			log.Warn("-redis is set: " + envRedisURL + " is ignored")
		} else {
			*redisURL = env
		}
	}

	prof, err := createProfiles(*cpuProfile, *execTrace)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer prof.stop() // on every early return; a second stop does nothing

	exec := &retry.Executor{}
	var (
		cfg    *config
		vendor *demoVendor
	)
	if *configPath != "" {
		cfg, err = wrapConfig(gatewayconfig.LoadFile(ctx, *configPath, gatewayconfig.Options{Executor: exec}))
	} else {
		vendor, err = startDemoVendor()
		if err == nil {
			defer vendor.close(context.Background())
			cfg, err = vendor.config(exec)
		}
	}
	if err = checkStart(cfg, err, *redisURL == ""); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	// Tools whose writes the policy denies here are refused per call with
	// policy_denied; mcpgateway.New warns of each at start.

	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	opts := cfg.Store
	opts.ReadTimeout = storeReadTimeout
	// A production fleet's Redis is initialised explicitly (refserver store
	// init): an empty one is a Redis that lost the fleet's data, never one
	// to start over on. The embedded store is empty at every start.
	opts.RequireInit = cfg.Environment == effectspec.Production && *redisURL != ""
	store, release, err := openStore(octx, opts, *redisURL, stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer release()
	sdk, err := otelhooks.FromEnv(octx, "obol-refserver", log)
	if err != nil {
		fmt.Fprintln(stderr, "refserver:", err)
		return 1
	}
	var tp trace.TracerProvider // nil without tracing
	if sdk != nil {
		tp = sdk
		defer func() {
			// Flush what is buffered: the last calls' spans.
			fctx, fcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer fcancel()
			if sdk.Shutdown(fctx) != nil {
				log.Warn("tracing: spans not flushed at shutdown")
			}
		}()
	}
	s := newTracedServer(cfg, store, store, log, tp)
	s.watchDataLoss(store, stderr)
	// Before the store is released: stop re-sending claims.
	defer s.orch.Close()
	defer s.gw.Close() // quotas' background reads, before the store is released
	s.durability = checkDurability(octx, store, *redisURL == "", cfg.Environment, log, stderr)
	s.operatorMetrics()
	logStore(octx, log, store, *redisURL == "", cfg.Environment, len(cfg.Tools))
	if err := s.seedPins(octx); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	cancel()
	// The upstream MCP servers' tools, before serving; an upstream that is
	// down is read again in the background until shutdown.
	ictx, icancel := context.WithCancel(ctx)
	imported := s.startImport(ictx)
	defer func() { icancel(); <-imported }()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintf(stderr, "refserver: listen: %v\n", err)
		return 1
	}
	hs := &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		// A call may take two attempts of its tool's timeout (the lease is
		// renewed meanwhile); the answer still has to get out.
		WriteTimeout:   2*cfg.maxAttemptTimeout() + cfg.Store.Lease + 15*time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	base := "http://" + ln.Addr().String()
	metricsAccess := "open to any caller"
	if cfg.MetricsTokenRequired() {
		metricsAccess = "metrics_token required"
	}
	fmt.Fprintf(stdout, "obol refserver listening on %s (MCP at %s/mcp; metrics at %s/metrics, %s)\n", base, base, base, metricsAccess)
	if vendor != nil {
		fmt.Fprintf(stdout, "demo mode: environment %s, demo vendor at %s (GET %s/stats counts its requests)\n", cfg.Environment, vendor.URL, vendor.URL)
		fmt.Fprintf(stdout, "demo API keys: ws_acme %s, ws_globex %s; approver %s\n", demoKeyAcme, demoKeyGlobex, demoKeyAdmin)
	}
	if *redisURL == "" {
		fmt.Fprintln(stdout, "store: EMBEDDED, NOT DURABLE (use -redis URL)")
	}

	if err := prof.start(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	select {
	case err := <-served:
		fmt.Fprintf(stderr, "refserver: serve: %v\n", err)
		return 1
	case <-ctx.Done():
	}
	// Stop accepting, then let in-flight calls finalize: an attempt never
	// outlives its lease, so lease plus a margin bounds the wait.
	// An attempt may run until its tool's timeout; one cut short by the
	// bound is left in flight, and once its lease (no longer renewed)
	// lapses another gateway takes the slot over.
	bound := cfg.maxAttemptTimeout() + 5*time.Second
	log.Info("shutting down: waiting for in-flight calls", "bound", bound)
	sctx, scancel := context.WithTimeout(context.Background(), bound)
	defer scancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("shutdown incomplete", "error", err.Error())
		return 1
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("serve", "error", err.Error())
	}
	if err := prof.stop(); err != nil {
		log.Warn("profile not written", "error", err.Error())
		return 1
	}
	log.Info("stopped")
	return 0
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// serverFlags are the server's flags.
type serverFlags struct {
	config, redis, addr, cpuProfile, execTrace *string
}

func newServerFlags() (*flag.FlagSet, serverFlags) {
	fs := flag.NewFlagSet("refserver", flag.ContinueOnError)
	return fs, serverFlags{
		config:     fs.String("config", "", "configuration `file` (JSON, DESIGN.md section 11); default: the demo configuration and demo vendor"),
		redis:      fs.String("redis", "", "Redis `URL`: redis://, rediss://, or comma-separated Cluster seeds; default: $"+envRedisURL+", else an embedded, NOT durable store"),
		addr:       fs.String("addr", "127.0.0.1:8080", "listen `address` host:port"),
		cpuProfile: fs.String("cpuprofile", "", "diagnosis: write a CPU profile of serving (listen to shutdown) to `file`"),
		execTrace:  fs.String("exectrace", "", "diagnosis: write a runtime execution trace of serving to `file` (go tool trace)"),
	}
}
