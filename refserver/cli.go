package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/mcpgateway/admin/operator"
	"github.com/obol-gateway/obol/mcpgateway/gatewayconfig"
	"github.com/obol-gateway/obol/retry"
)

// subcommands is what "refserver help" lists: one line each.
const subcommands = `Usage: refserver [flags]            serve (the demo configuration and vendor without -config)
       refserver SUBCOMMAND [-h]

Subcommands:
  help                    this text
  version                 the module version and VCS revision of this build
  config check            check a configuration file and exit: every problem, nothing started
  store init              initialise the fleet's Redis once, before the first production gateway
  scope-status            read a Redis's scope version and record counts (an advance's progress)
  unknown list|settle     list unknown calls, settle one (needs ` + operator.EnvApproverKey + `)
  approvals list|approve|deny
                          the approval queue (needs ` + operator.EnvApproverKey + `)
  scope-version show|advance|finish
                          the fleet's scope version (needs ` + operator.EnvApproverKey + `)
  store ...               the store's loss records (needs ` + operator.EnvApproverKey + `)

Environment: ` + envRedisURL + ` (the -redis URL), ` + envDeploymentID + ` (the fleet's deployment id),
` + operator.EnvApproverKey + ` (the approver key of the admin subcommands), and each secret_env of the
configuration. "refserver SUBCOMMAND -h" describes one subcommand.

Flags of the server:
`

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "help" || arg == "-h" || arg == "-help" || arg == "--help"
}

// version prints the module version and VCS revision the build recorded.
func version(stdout io.Writer) int {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(stdout, "refserver: no build information")
		return 1
	}
	rev, modified := "unknown", ""
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			modified = " (modified)"
		}
	}
	fmt.Fprintf(stdout, "refserver %s %s revision %s%s %s\n", bi.Main.Path, bi.Main.Version, rev, modified, bi.GoVersion)
	return 0
}

// errEmbeddedProduction refuses production on the embedded store: it keeps
// nothing across a restart and is shared by no other gateway.
var errEmbeddedProduction = errors.New("store: production refuses the embedded store (not durable, not shared): give -redis URL or set " + envRedisURL)

// checkStart is what a start checks before it opens anything: the file (or
// the demo's), then the store's kind and the fleet's deployment id.
func checkStart(cfg *config, loadErr error, embedded bool) error {
	if loadErr != nil {
		return loadErr
	}
	if embedded && cfg.Environment == effectspec.Production {
		return errEmbeddedProduction
	}
	return cfg.resolveDeployment(os.Getenv, embedded)
}

// configCheck is "refserver config check": the checks of a start, and
// nothing started.
func configCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("refserver config check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: refserver config check -config FILE [-redis URL]\n\n"+
			"Checks FILE as a start would (the loader's rules, the store, the deployment id) and prints every\n"+
			"problem; exit 0 and one line when there is none. Nothing is started or connected.\n"+
			"Environment: "+envRedisURL+" (as -redis), "+envDeploymentID+", and each secret_env the file names.\n\nFlags:")
		fs.PrintDefaults()
	}
	configPath := fs.String("config", "", "the configuration `file` (required)")
	redisURL := fs.String("redis", "", "Redis `URL` the server would use; default: $"+envRedisURL+", else the embedded store")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "refserver config check: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if *configPath == "" {
		fmt.Fprintln(stderr, "refserver config check: give -config FILE")
		return 2
	}
	if *redisURL == "" {
		*redisURL = os.Getenv(envRedisURL)
	}
	cfg, err := wrapConfig(gatewayconfig.LoadFile(ctx, *configPath, gatewayconfig.Options{Executor: &retry.Executor{}}))
	if err = checkStart(cfg, err, *redisURL == ""); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: OK (environment %s, %d tools)\n", *configPath, cfg.Environment, len(cfg.Tools))
	return 0
}
