package operator

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/obol-gateway/obol/internal/baseurl"
	"github.com/obol-gateway/obol/internal/printable"
	"github.com/obol-gateway/obol/mcpgateway/admin"
)

// EnvApproverKey names the environment variable that holds the approver key.
const EnvApproverKey = "OBOL_APPROVER_KEY"

// defaultURL is where a gateway started with no -addr listens: the -url
// flag's default.
const defaultURL = "http://127.0.0.1:8080"

// cliTimeout bounds each request of a subcommand: an admin endpoint answers
// within its store bound (2s), so a longer wait is a gateway that is gone.
const cliTimeout = 30 * time.Second

// commands maps a first argument to its subcommands.
var commands = map[string]func(*cli, []string) int{
	"unknown":       (*cli).unknown,
	"approvals":     (*cli).approvals,
	"scope-version": (*cli).scopeVersion,
	"store":         (*cli).storeCmd,
	"tools":         (*cli).toolsCmd,
}

// Run runs the operator subcommand args name, as program's (messages say
// "program unknown list: ..."), and returns its exit code: 0, 1 when the
// gateway refused or could not be reached, 2 for a usage error. ok is
// false, and nothing is run, when args[0] is none of unknown, approvals,
// scope-version, store and tools. getenv reads the environment (os.Getenv).
func Run(ctx context.Context, program string, args []string, stdout, stderr io.Writer, getenv func(string) string) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	f, ok := commands[args[0]]
	if !ok {
		return 0, false
	}
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr, getenv: getenv, name: program + " " + args[0], program: program}
	return f(c, args[1:]), true
}

// cli is one run of an operator subcommand.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	getenv         func(string) string
	name           string // "refserver unknown list", for messages
	program        string // "refserver"

	api    admin.Client
	asJSON bool
}

// usage prints a usage error and returns exit code 2.
func (c *cli) usage(format string, args ...any) int {
	fmt.Fprintf(c.stderr, c.name+": "+format+"\n", args...)
	return 2
}

// flags is a FlagSet with the flags every subcommand shares. positional
// names the subcommand's positional arguments for its -h ("" for none).
func (c *cli) flags(sub, positional string) (*flag.FlagSet, *string) {
	c.name += " " + sub
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.Usage = func() {
		if positional != "" {
			fmt.Fprintf(c.stderr, "Usage: %s %s [flags]\n\n", c.name, positional)
		} else {
			fmt.Fprintf(c.stderr, "Usage: %s [flags]\n\n", c.name)
		}
		fmt.Fprintf(c.stderr, "Environment: %s, the approver key (approver_keys in the gateway's configuration; never a flag).\n\nFlags:\n", EnvApproverKey)
		fs.PrintDefaults()
	}
	u := fs.String("url", defaultURL, "the gateway's `URL` (its -addr)")
	fs.BoolVar(&c.asJSON, "json", false, "print the gateway's JSON answer instead of a table")
	return fs, u
}

// parse parses args, flags and positional arguments in any order (so that
// "settle KEY -tool T" reads as "settle -tool T KEY"), checks the URL and
// reads the approver key. It returns the positional arguments, or ok false
// after printing why (exit code 2). More than maxPos positional arguments
// are refused (maxPos < 0: any number).
func (c *cli) parse(fs *flag.FlagSet, u *string, args []string, maxPos int) (pos []string, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if maxPos >= 0 && len(pos) > maxPos {
		c.usage("unexpected argument %q", printable.Cut(pos[maxPos], 40))
		return nil, false
	}
	base, err := baseurl.Parse(*u)
	if errors.Is(err, baseurl.ErrCredentials) {
		err = errors.New("must not hold a user or password; the approver key comes from " + EnvApproverKey)
	}
	if err != nil {
		c.usage("-url: %v", err)
		return nil, false
	}
	key := c.getenv(EnvApproverKey)
	if key == "" {
		c.usage("set %s to an approver key (approver_keys in the gateway's configuration); it is never taken as a flag", EnvApproverKey)
		return nil, false
	}
	c.api = admin.Client{BaseURL: base.String(), Key: key, HTTP: &http.Client{Timeout: cliTimeout}}
	return pos, true
}

// request runs one request of the subcommand, bounded by cliTimeout.
func request[T any](c *cli, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(c.ctx, cliTimeout)
	defer cancel()
	return f(ctx)
}

// fail prints a failed request and returns exit code 1. With -json a
// refusal's body is printed as the gateway wrote it, on stdout.
func (c *cli) fail(err error) int {
	var e *admin.Error
	if c.asJSON && errors.As(err, &e) && e.Reason != "" {
		c.stdout.Write(e.Body)
	}
	fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
	return 1
}

// printJSON prints an answer as the gateway encodes it: no HTML escaping,
// a newline at the end.
func (c *cli) printJSON(v any) int {
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
	return 0
}

// cell is a value for a table: printable, never empty.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return printable.Cut(s, 200)
}

// dispatch runs the subcommand of args among subs. synopsis is -h's text:
// one line per subcommand with its positional arguments.
func (c *cli) dispatch(args []string, subs map[string]func([]string) int, names, synopsis string) int {
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintf(c.stdout, "Usage:\n%s\nEnvironment: %s, the approver key (approver_keys in the gateway's configuration; never a flag).\n"+
			"\"%s SUBCOMMAND -h\" lists a subcommand's flags.\n", synopsis, EnvApproverKey, c.name)
		return 0
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return c.usage("name a subcommand: %s (-h describes them)", names)
	}
	f, ok := subs[args[0]]
	if !ok {
		return c.usage("unknown subcommand %q (%s)", printable.Cut(args[0], 40), names)
	}
	return f(args[1:])
}

// listing is what one list subcommand lists.
type listing[T any] struct {
	noun   string // "unknown call(s)"
	header string
	page   func(context.Context, admin.ListRequest) ([]T, string, error)
	json   func([]T, string) any
	row    func(T) []string
}

// list is a list subcommand: every page from -cursor, up to -max items,
// then the cursor that continues.
func list[T any](c *cli, args []string, l listing[T]) int {
	fs, u := c.flags("list", "")
	ws := fs.String("workspace", "", "list one `workspace`'s "+l.noun+"; default: every workspace")
	most := fs.Int("max", 1000, "stop after `n` items and print the cursor that continues")
	cursor := fs.String("cursor", "", "continue a listing from its `cursor`")
	if _, ok := c.parse(fs, u, args, 0); !ok {
		return 2
	}
	if *most < 1 {
		return c.usage("-max must be at least 1")
	}
	var all []T
	cur := *cursor
	for {
		ctx, cancel := context.WithTimeout(c.ctx, cliTimeout)
		items, next, err := l.page(ctx, admin.ListRequest{Workspace: *ws, Cursor: cur})
		cancel()
		if err != nil {
			return c.fail(err)
		}
		all, cur = append(all, items...), next
		if cur == "" || len(all) >= *most {
			break
		}
	}
	if c.asJSON {
		return c.printJSON(l.json(append([]T{}, all...), cur))
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, l.header)
	for _, it := range all {
		fmt.Fprintln(tw, strings.Join(l.row(it), "\t"))
	}
	tw.Flush()
	fmt.Fprintf(c.stdout, "%d %s\n", len(all), l.noun)
	if cur != "" {
		fmt.Fprintf(c.stdout, "more: %s -cursor %s\n", c.name, cur)
	}
	return 0
}

// unknown is "unknown list|settle".
func (c *cli) unknown(args []string) int {
	return c.dispatch(args, map[string]func([]string) int{
		"list": func(args []string) int {
			return list(c, args, listing[admin.ListedReceipt]{
				noun:   "unknown call(s)",
				header: "WORKSPACE\tTOOL\tIDEMPOTENCY KEY\tATTEMPTS\tCREATED\tSETTLE AFTER",
				page: func(ctx context.Context, req admin.ListRequest) ([]admin.ListedReceipt, string, error) {
					p, err := c.api.ListUnknown(ctx, req)
					return p.Unknown, p.Cursor, err
				},
				json: func(all []admin.ListedReceipt, cur string) any { return admin.UnknownPage{Unknown: all, Cursor: cur} },
				row: func(r admin.ListedReceipt) []string {
					return []string{cell(r.Workspace), cell(r.Tool), cell(r.IdempotencyKey), strconv.Itoa(r.AttemptCount),
						cell(timeText(r.CreatedAt)), cell(timeText(r.SettleAfter))}
				},
			})
		},
		"settle": c.unknownSettle,
	}, "list, settle",
		"  "+c.name+" list [-workspace W] [-max N] [-cursor C]      the unknown calls, with their attempt counts\n"+
			"  "+c.name+" settle KEY -workspace W -tool T -outcome accepted|definitely_rejected -attempts N [-note TEXT]\n"+
			"      settle the call of idempotency key KEY, after asking the vendor what it did; N is the listed attempt count\n")
}

// timeText is a time as the API writes it; "" for none.
func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func (c *cli) unknownSettle(args []string) int {
	fs, u := c.flags("settle", "KEY")
	ws := fs.String("workspace", "", "the call's `workspace` (required)")
	tool := fs.String("tool", "", "the call's `tool` (required)")
	outcome := fs.String("outcome", "", "what the vendor did: `accepted` or definitely_rejected (required)")
	attempts := fs.Int("attempts", -1, "the call's attempt count as listed (required): the settle is refused if it changed")
	note := fs.String("note", "", "why: what the vendor said, a ticket number (recorded on the call's receipt; `text`)")
	pos, ok := c.parse(fs, u, args, -1)
	if !ok {
		return 2
	}
	switch {
	case len(pos) != 1:
		return c.usage("name one idempotency key: %s KEY -workspace W -tool T -outcome accepted|definitely_rejected -attempts N -note TEXT", c.name)
	case *ws == "" || *tool == "":
		return c.usage("-workspace and -tool are required")
	case *outcome != "accepted" && *outcome != "definitely_rejected":
		return c.usage("-outcome must be accepted or definitely_rejected")
	case *attempts < 0:
		return c.usage("-attempts is required: the attempt count the listing shows (" + c.program + " unknown list)")
	}
	rc, err := request(c, func(ctx context.Context) (admin.ListedReceipt, error) {
		return c.api.Settle(ctx, *ws, *tool, pos[0], admin.Resolve{Outcome: *outcome, AttemptCount: attempts, Note: *note})
	})
	if err != nil {
		var e *admin.Error
		if errors.As(err, &e) && e.Reason == "in_progress" && e.RetryAfterMS > 0 {
			err = fmt.Errorf("%w (retry in %s)", err, (time.Duration(e.RetryAfterMS) * time.Millisecond).Round(time.Millisecond))
		}
		if errors.As(err, &e) && e.Reason == "stale" {
			err = fmt.Errorf("%w: -attempts %d was given; %s", err, *attempts, c.attemptsNow(*ws, *tool, pos[0]))
		}
		return c.fail(err)
	}
	if c.asJSON {
		return c.printJSON(rc.Receipt)
	}
	var by, at string
	if r := rc.Resolution; r != nil {
		by, at = r.By, timeText(r.At)
	}
	fmt.Fprintf(c.stdout, "settled %s (%s, %s): %s by %s at %s\n", cell(rc.IdempotencyKey), cell(rc.Workspace), cell(rc.Tool),
		cell(string(rc.Outcome)), cell(by), cell(at))
	return 0
}

// attemptsNow says what the listing holds for the unknown call of key: its
// attempt count, for a settle refused because -attempts differs.
func (c *cli) attemptsNow(ws, tool, key string) string {
	req := admin.ListRequest{Workspace: ws}
	for range 100 { // pages; a fleet with more unknown calls has other problems
		p, err := request(c, func(ctx context.Context) (admin.UnknownPage, error) { return c.api.ListUnknown(ctx, req) })
		if err != nil {
			return "the record's attempt count could not be read: " + err.Error()
		}
		for _, r := range p.Unknown {
			if r.Tool == tool && r.IdempotencyKey == key {
				return fmt.Sprintf("the record holds %d (%s unknown list)", r.AttemptCount, c.program)
			}
		}
		if p.Cursor == "" {
			break
		}
		req.Cursor = p.Cursor
	}
	return "the call is no longer listed as unknown"
}

// approvals is "approvals list|approve|deny".
func (c *cli) approvals(args []string) int {
	return c.dispatch(args, map[string]func([]string) int{
		"list": func(args []string) int {
			return list(c, args, listing[admin.Pending]{
				noun:   "pending approval(s)",
				header: "TICKET\tWORKSPACE\tTOOL\tIDEMPOTENCY KEY\tSTATE\tHELD AT",
				page: func(ctx context.Context, req admin.ListRequest) ([]admin.Pending, string, error) {
					p, err := c.api.ListApprovals(ctx, req)
					return p.Pending, p.Cursor, err
				},
				json: func(all []admin.Pending, cur string) any { return admin.PendingPage{Pending: all, Cursor: cur} },
				row: func(p admin.Pending) []string {
					return []string{cell(p.Ticket), cell(p.Workspace), cell(p.Tool), cell(p.IdempotencyKey), cell(p.State), cell(p.HeldAt)}
				},
			})
		},
		"approve": func(args []string) int { return c.decide("approve", args) },
		"deny":    func(args []string) int { return c.decide("deny", args) },
	}, "list, approve, deny",
		"  "+c.name+" list [-workspace W] [-max N] [-cursor C]   the calls held for approval, with their tickets\n"+
			"  "+c.name+" approve TICKET                               run the held call of TICKET (apt_...)\n"+
			"  "+c.name+" deny TICKET                                  refuse it\n")
}

func (c *cli) decide(sub string, args []string) int {
	fs, u := c.flags(sub, "TICKET")
	pos, ok := c.parse(fs, u, args, -1)
	if !ok {
		return 2
	}
	if len(pos) != 1 {
		return c.usage("name one ticket: %s apt_...", c.name)
	}
	t, err := request(c, func(ctx context.Context) (admin.Ticket, error) { return c.api.Decide(ctx, pos[0], sub == "approve") })
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		return c.printJSON(t)
	}
	fmt.Fprintf(c.stdout, "%s %s (%s, %s, key %s)\n", cell(t.Ticket), cell(t.Status), cell(t.Workspace), cell(t.Tool), cell(t.IdempotencyKey))
	return 0
}

// scopeVersion is "scope-version advance".
func (c *cli) scopeVersion(args []string) int {
	return c.dispatch(args, map[string]func([]string) int{"advance": c.advance}, "advance",
		"  "+c.name+" advance [-to V] [-strand N]   advance the fleet's scope version (run again to finish)\n")
}

func (c *cli) advance(args []string) int {
	fs, u := c.flags("advance", "")
	to := fs.Int("to", 0, "the new scope `version`; default: the gateway's version + 1")
	strand := fs.Int("strand", -1, "finish although `n` live records of the old version remain: the count an earlier run printed")
	if _, ok := c.parse(fs, u, args, 0); !ok {
		return 2
	}
	var req admin.AdvanceRequest
	if flagSet(fs, "to") {
		if *to < 1 {
			return c.usage("-to must be at least 1")
		}
		req.To = to
	}
	if flagSet(fs, "strand") {
		if *strand < 0 {
			return c.usage("-strand must not be negative")
		}
		req.Strand = strand
	}
	a, err := request(c, func(ctx context.Context) (admin.Advance, error) { return c.api.AdvanceScope(ctx, req) })
	var e *admin.Error
	if err != nil && !(errors.As(err, &e) && e.Reason == "records_live") {
		return c.fail(err)
	}
	if c.asJSON {
		c.printJSON(a)
		if err != nil {
			fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
			return 1
		}
		return 0
	}
	fmt.Fprintf(c.stdout, "scope version %d -> %d: %s\n", a.From, a.To, cell(a.Phase))
	if len(a.Counts) > 0 {
		tw := tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "VERSION\tSTATE\tRECORDS")
		for _, n := range a.Counts {
			v := strconv.Itoa(n.Version)
			if n.Version == 0 {
				v = "none"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\n", v, cell(n.State), n.Records)
		}
		tw.Flush()
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
		fmt.Fprintf(c.stderr, "%s: %d live record(s) of the old version; wait for them to end (settle unknown calls meanwhile), or strand them: %s -strand %d\n",
			c.name, a.Live, c.name, a.Live)
		return 1
	}
	return 0
}

// storeCmd is "store acknowledge-data-loss".
func (c *cli) storeCmd(args []string) int {
	return c.dispatch(args, map[string]func([]string) int{"acknowledge-data-loss": c.acknowledge}, "acknowledge-data-loss",
		"  "+c.name+" acknowledge-data-loss   acknowledge the store's recorded loss of data, so that fresh claims resume\n")
}

func (c *cli) acknowledge(args []string) int {
	fs, u := c.flags("acknowledge-data-loss", "")
	if _, ok := c.parse(fs, u, args, 0); !ok {
		return 2
	}
	fmt.Fprintln(c.stderr, c.name+": WARNING: calls whose records the store lost can be dispatched again; "+
		"a vendor with an idempotency binding deduplicates them only if the deployment id is unchanged (deployment_id in the configuration)")
	a, err := request(c, c.api.AcknowledgeDataLoss)
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		return c.printJSON(a)
	}
	if !a.Acknowledged {
		fmt.Fprint(c.stdout, "no store data loss to acknowledge")
	} else {
		fmt.Fprintf(c.stdout, "store data loss acknowledged (%d sentinels placed", a.Sentinels)
		if a.Lost != "" {
			fmt.Fprintf(c.stdout, "; lost: %s", printable.Cut(a.Lost, 200))
		}
		fmt.Fprint(c.stdout, ")")
	}
	if a.Message != "" {
		fmt.Fprintf(c.stdout, ": %s", printable.Cut(a.Message, 1000))
	}
	fmt.Fprintln(c.stdout)
	return 0
}

func (c *cli) toolsCmd(args []string) int {
	return c.dispatch(args, map[string]func([]string) int{"import": c.importTools}, "import",
		"  "+c.name+" import   read the upstream MCP servers' tools/list again (descriptions, schemas, annotations)\n")
}

func (c *cli) importTools(args []string) int {
	fs, u := c.flags("import", "")
	if _, ok := c.parse(fs, u, args, 0); !ok {
		return 2
	}
	_, err := request(c, func(ctx context.Context) (struct{}, error) { return struct{}{}, c.api.ImportTools(ctx) })
	if err != nil {
		return c.fail(err)
	}
	if c.asJSON {
		return c.printJSON(map[string]bool{"imported": true})
	}
	fmt.Fprintln(c.stdout, "upstream MCP tools imported")
	return 0
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
