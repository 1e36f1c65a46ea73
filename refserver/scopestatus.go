package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/obol-gateway/obol/idempotency"
	"github.com/obol-gateway/obol/idempotency/redisstore"
)

// scopeStatus is "refserver scope-status": it counts the live records under
// a prefix by scope version and state (redisstore.CountRecords), so that an
// operator changing the key scope sees the old version's records end. It
// only reads: it never writes or deletes a key. It returns the exit code.
func scopeStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("refserver scope-status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: refserver scope-status [-redis URL] [-prefix P] [-progress N]\n\n"+
			"Reads (never writes) the fleet's scope version and counts its records by version and state.\n"+
			"Environment: "+envRedisURL+" (as -redis).\n\nFlags:")
		fs.PrintDefaults()
	}
	redisURL := fs.String("redis", "", "Redis `URL` (as for the server); default: $"+envRedisURL)
	prefix := fs.String("prefix", idempotency.DefaultPrefix, "the fleet's key `prefix` (key_prefix in its configuration)")
	every := fs.Int("progress", 100000, "print a progress line on stderr every `n` keys read")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "refserver scope-status: unexpected argument")
		return 2
	}
	if *redisURL == "" {
		*redisURL = os.Getenv(envRedisURL)
	}
	if *redisURL == "" {
		fmt.Fprintln(stderr, "refserver scope-status: give -redis URL or set "+envRedisURL)
		return 2
	}
	if *every < 1 {
		fmt.Fprintln(stderr, "refserver scope-status: -progress must be at least 1")
		return 2
	}
	if err := idempotency.ValidatePrefix(*prefix); err != nil {
		fmt.Fprintf(stderr, "refserver scope-status: -prefix: %v\n", err)
		return 2
	}
	if _, err := redisstore.ParseURL(*redisURL); err != nil {
		fmt.Fprintf(stderr, "refserver scope-status: -redis: %v\n", err)
		return 2
	}
	client, err := redisstore.Dial(*redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "refserver scope-status: %v\n", err)
		return 1
	}
	defer client.Close()

	fleet, set, err := redisstore.FleetScopeVersion(ctx, client, *prefix)
	switch {
	case err == nil && !set:
		fleet = "not set"
	case err != nil:
		fmt.Fprintf(stderr, "refserver scope-status: %v\n", err)
		return 1
	default:
		fleet = fleetVersionText(fleet)
	}
	start := time.Now()
	counts, err := redisstore.CountRecords(ctx, client, redisstore.CountOptions{
		Prefix:        *prefix,
		ProgressEvery: *every,
		Progress: func(n int) {
			fmt.Fprintf(stderr, "refserver scope-status: %d keys read (%s)\n", n, time.Since(start).Round(time.Millisecond))
		},
	})
	if err != nil {
		fmt.Fprintf(stderr, "refserver scope-status: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "prefix %s: fleet scope version %s; this build writes %d\n", *prefix, fleet, idempotency.ScopeVersion)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "version\tstate\trecords")
	total := 0
	for _, c := range counts {
		v, st := strconv.Itoa(c.Version), string(c.State)
		if c.Version == 0 {
			v = "none"
		}
		if st == "" {
			v, st = "-", "unreadable"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\n", v, st, c.Records)
		total += c.Records
	}
	fmt.Fprintf(tw, "total\t\t%d\n", total)
	tw.Flush()
	fmt.Fprintln(stdout, "(in_progress counts live leases only; a lapsed one is unknown)")
	return 0
}

// fleetVersionText describes the stored scope version: a number, or a
// number closing since a Redis time (an advance between its two runs,
// redisstore's "V closing MS"). Anything else is described, never quoted.
func fleetVersionText(v string) string {
	num, rest, _ := strings.Cut(v, " ")
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || strconv.Itoa(n) != num {
		return "not a version number"
	}
	switch word, ms, _ := strings.Cut(rest, " "); {
	case rest == "":
		return num
	case word != "closing":
		return "not a version number"
	case ms == "":
		return num + ", closing (an advance is in progress: refserver scope-version advance again finishes it)"
	default:
		t, err := strconv.ParseInt(ms, 10, 64)
		if err != nil || t < 0 {
			return "not a version number"
		}
		return fmt.Sprintf("%s, closing since %s (an advance is in progress: refserver scope-version advance again finishes it)",
			num, time.UnixMilli(t).UTC().Format(time.RFC3339))
	}
}
