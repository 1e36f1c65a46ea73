package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// roleEnv makes the process serve row 4's bare server ("bare") or its
// limit server ("limit"), or row 7's limit server ("mcplimit"), instead of
// running the harness (the harness starts itself that way).
const roleEnv = "OBOL_BENCH_ROLE"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if code, ok := serveRole(ctx); ok {
		os.Exit(code)
	}
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// serveRole serves the server of roleEnv's role, if it names one.
func serveRole(ctx context.Context) (code int, ok bool) {
	switch os.Getenv(roleEnv) {
	case "bare":
		return serveBare(ctx, os.Args[1:], os.Stdout, os.Stderr), true
	case "limit":
		return serveLimit(ctx, os.Args[1:], os.Stdout, os.Stderr), true
	case "mcplimit":
		return serveMCPLimit(ctx, os.Args[1:], os.Stdout, os.Stderr), true
	}
	return 0, false
}

// options are the harness flags, resolved.
type options struct {
	ownRedis      bool
	redisServer   string // redis-server binary
	redisAddr     string
	db            int
	benchBin      string // redis-benchmark binary
	refserverBin  string // -refserver, or the one built into tmp
	tmp           string // the run's directory, removed at its end
	serverTrace   bool
	serverProfile string // directory of refserver's CPU profile and execution trace
	duration      time.Duration
	rounds        int
	concurrency   []int
	mcpClients    []int
	memRecords    int
	rows          map[int]bool
	cpuProfile    string
	pipeline      int
	quick         bool
	progress      io.Writer
	moduleRoot    string
	redisURL      string // for refserver
	redisHostPort string
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{progress: stderr}
	fs.BoolVar(&o.ownRedis, "redis-server", false, "start a private redis-server on a free loopback port (persistence off) and use it")
	fs.StringVar(&o.redisServer, "redis-server-bin", "redis-server", "redis-server `binary` for -redis-server")
	fs.StringVar(&o.redisAddr, "redis", "", "use the Redis at `host:port` instead (database -db must be empty; it is flushed between measurements)")
	fs.IntVar(&o.db, "db", 15, "Redis logical `database` used with -redis")
	fs.StringVar(&o.benchBin, "redis-benchmark", "redis-benchmark", "redis-benchmark `binary` (row 1)")
	fs.StringVar(&o.refserverBin, "refserver", "", "prebuilt refserver `binary` (rows 4 and 7); default: go build ./refserver into a temporary directory")
	fs.DurationVar(&o.duration, "duration", 3*time.Second, "length of one measurement")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds per row; each round measures ours and the reference, alternating, and the table shows medians")
	conc := fs.String("concurrency", "1,50,200", "client concurrencies of rows 1 and 2, comma-separated")
	mcpClients := fs.String("mcp-clients", "1,32", "concurrent MCP clients of rows 4 and 7, comma-separated: one line each")
	fs.IntVar(&o.memRecords, "mem-records", 20000, "records written per kind to measure used_memory per record (row 5)")
	only := fs.String("rows", "1,2,3,4,5,6,7", "rows to run, comma-separated")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the harness process (the client side of rows 1-3) to `file`")
	fs.BoolVar(&o.serverTrace, "refserver-trace", true, "with -refserver-profile, also write the execution trace; false for a CPU profile undistorted by tracing")
	fs.StringVar(&o.serverProfile, "refserver-profile", "", "write refserver's CPU profile and execution trace of row 4 into `dir` (refserver.cpu.pprof, refserver.trace; row 7: refserver-mcp.*), and its references'; tracing slows them, so such a run diagnoses and does not measure")
	fs.IntVar(&o.pipeline, "P", 16, "redis-benchmark pipeline depth (-P) of the Redis-side limit")
	fs.BoolVar(&o.quick, "quick", false, "smoke test: 300ms measurements, one round, 2000 memory records")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: go run ./examples/bench (-redis-server | -redis host:port) [flags]\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		if !set["duration"] {
			o.duration = 300 * time.Millisecond
		}
		if !set["rounds"] {
			o.rounds = 1
		}
		if !set["mem-records"] {
			o.memRecords = 2000
		}
	}
	switch {
	case o.ownRedis == (o.redisAddr != ""):
		return nil, errors.New("give exactly one of -redis-server and -redis host:port")
	case o.duration < 50*time.Millisecond:
		return nil, fmt.Errorf("-duration %v: must be at least 50ms", o.duration)
	case o.rounds < 1:
		return nil, fmt.Errorf("-rounds %d: must be at least 1", o.rounds)
	case o.memRecords < 100:
		return nil, fmt.Errorf("-mem-records %d: must be at least 100", o.memRecords)
	case o.db < 0:
		return nil, fmt.Errorf("-db %d: must not be negative", o.db)
	case o.pipeline < 1:
		return nil, fmt.Errorf("-P %d: must be at least 1", o.pipeline)
	}
	if o.redisAddr != "" {
		if _, _, err := net.SplitHostPort(o.redisAddr); err != nil {
			return nil, fmt.Errorf("-redis %q: want host:port", o.redisAddr)
		}
	}
	var err error
	if o.concurrency, err = intList("concurrency", *conc, 1, 10000); err != nil {
		return nil, err
	}
	if o.mcpClients, err = intList("mcp-clients", *mcpClients, 1, 10000); err != nil {
		return nil, err
	}
	rows, err := intList("rows", *only, 1, 7)
	if err != nil {
		return nil, err
	}
	o.rows = map[int]bool{}
	for _, r := range rows {
		o.rows[r] = true
	}
	return o, nil
}

func intList(name, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("-%s: %q is not an integer in [%d, %d]", name, f, lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}

// run is main without the process: it returns the exit code. The table goes
// to stdout, progress and errors to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 2
	}
	if err := runHarness(ctx, o, stdout); err != nil {
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

func runHarness(ctx context.Context, o *options, stdout io.Writer) error {
	root, err := moduleRoot()
	if err != nil {
		return err
	}
	o.moduleRoot = root
	if o.tmp, err = os.MkdirTemp("", "obol-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(o.tmp)
	if o.ownRedis {
		rs, err := startRedis(ctx, o.redisServer)
		if err != nil {
			return err
		}
		defer rs.stop()
		o.redisHostPort, o.db = rs.addr, 0
	} else {
		o.redisHostPort = o.redisAddr
	}
	o.redisURL = fmt.Sprintf("redis://%s/%d", o.redisHostPort, o.db)
	env, err := openEnv(ctx, o)
	if err != nil {
		return err
	}
	defer env.close()

	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	t := &table{}
	start := time.Now()
	if o.rows[1] || o.rows[2] {
		if err := claimRows(ctx, o, env, t); err != nil {
			return fmt.Errorf("rows 1-2: %w", err)
		}
	}
	if o.rows[3] {
		if err := hashRows(ctx, o, t); err != nil {
			return fmt.Errorf("row 3: %w", err)
		}
	}
	if o.rows[4] {
		if err := mcpRows(ctx, o, env, t); err != nil {
			return fmt.Errorf("row 4: %w", err)
		}
	}
	if o.rows[5] {
		if err := memoryRows(ctx, o, env, t); err != nil {
			return fmt.Errorf("row 5: %w", err)
		}
	}
	if o.rows[6] {
		if err := quotaRows(ctx, o, env, t); err != nil {
			return fmt.Errorf("row 6: %w", err)
		}
	}
	if o.rows[7] {
		if err := proxyRows(ctx, o, env, t); err != nil {
			return fmt.Errorf("row 7: %w", err)
		}
	}
	fmt.Fprintf(stdout, "obol benchmark: %s, GOMAXPROCS %d, %d CPUs, Redis %s, %d round(s) of %v per side, medians\n\n",
		runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), env.redisVersion, o.rounds, o.duration)
	t.write(stdout)
	fmt.Fprintf(stdout, "\n%d of %d targets met; run took %v\n", t.passes(), t.targets(), time.Since(start).Round(time.Second))
	return nil
}
