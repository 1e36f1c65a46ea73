package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
)

// The operator's subcommands talk to a running gateway's admin API
// (docs/DESIGN.md, "refserver wire contract") rather than to Redis: every
// decision stays with the gateway that enforces the contract, and the
// command needs no Redis credentials. The approver key comes from
// OBOL_APPROVER_KEY only: a flag would put it in argv, which every user of
// the machine can read.

// envApproverKey names the environment variable that holds the approver key.
const envApproverKey = "OBOL_APPROVER_KEY"

// defaultAdminURL is where a gateway started with no -addr listens.
const defaultAdminURL = "http://127.0.0.1:8080"

// cliTimeout bounds each request of a subcommand: an admin endpoint answers
// within its store bound (2s), so a longer wait is a gateway that is gone.
const cliTimeout = 30 * time.Second

// operatorCommands maps a first argument to its subcommands.
var operatorCommands = map[string]func(*cli, []string) int{
	"unknown":       (*cli).unknown,
	"approvals":     (*cli).approvals,
	"scope-version": (*cli).scopeVersion,
	"store":         (*cli).storeCmd,
}

// operator runs an operator subcommand when args name one (ok false
// otherwise). getenv reads the environment (os.Getenv in main).
func operator(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) (code int, ok bool) {
	if len(args) == 0 {
		return 0, false
	}
	f, ok := operatorCommands[args[0]]
	if !ok {
		return 0, false
	}
	c := &cli{ctx: ctx, stdout: stdout, stderr: stderr, getenv: getenv, name: "refserver " + args[0]}
	return f(c, args[1:]), true
}

// cli is one run of an operator subcommand.
type cli struct {
	ctx            context.Context
	stdout, stderr io.Writer
	getenv         func(string) string
	name           string // "refserver unknown list", for messages

	base   string // the gateway's URL, without a trailing slash
	key    string // the approver key
	asJSON bool
	http   *http.Client
}

// usage prints a usage error and returns exit code 2.
func (c *cli) usage(format string, args ...any) int {
	fmt.Fprintf(c.stderr, c.name+": "+format+"\n", args...)
	return 2
}

// flags is a FlagSet with the flags every subcommand shares.
func (c *cli) flags(sub string) (*flag.FlagSet, *string) {
	c.name += " " + sub
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	u := fs.String("url", defaultAdminURL, "the gateway's `URL` (its -addr)")
	fs.BoolVar(&c.asJSON, "json", false, "print the gateway's JSON answer instead of a table")
	return fs, u
}

// parse parses args, flags and positional arguments in any order (so that
// "settle KEY -tool T" reads as "settle -tool T KEY"), checks the URL and
// reads the approver key. It returns the positional arguments, or ok false
// after printing why (exit code 2).
func (c *cli) parse(fs *flag.FlagSet, u *string, args []string) (pos []string, ok bool) {
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
	base, err := adminURL(*u)
	if err != nil {
		c.usage("-url: %v", err)
		return nil, false
	}
	c.base = base
	c.key = c.getenv(envApproverKey)
	if c.key == "" {
		c.usage("set %s to an approver key (approver_keys in the gateway's configuration); it is never taken as a flag", envApproverKey)
		return nil, false
	}
	c.http = &http.Client{Timeout: cliTimeout}
	return pos, true
}

// adminURL checks a -url value: http or https, a host, no user or password
// (a secret in argv), no query or fragment.
func adminURL(s string) (string, error) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", errors.New("not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("must start with http:// or https://")
	case u.Host == "":
		return "", errors.New("names no host")
	case u.User != nil:
		return "", errors.New("must not hold a user or password; the approver key comes from " + envApproverKey)
	case u.RawQuery != "" || u.Fragment != "":
		return "", errors.New("must not hold a query or fragment")
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// apiError is a refusal from the gateway (its /v1 error body), or an answer
// that is not one.
type apiError struct {
	status  int
	reason  string
	message string
}

func (e *apiError) Error() string {
	if e.reason == "" {
		return fmt.Sprintf("HTTP %d: %s", e.status, e.message)
	}
	return fmt.Sprintf("%s (HTTP %d): %s", e.reason, e.status, e.message)
}

// do sends one admin request and returns the answer's body when its status
// is 2xx. A refusal is an *apiError with the gateway's reason and message.
func (c *cli) do(method, path string, query url.Values, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	ctx, cancel := context.WithTimeout(c.ctx, cliTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The error names the URL (never the key, which is in a header).
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%s %s: %v", method, c.base+path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the answer: %v", method, c.base+path, err)
	}
	if resp.StatusCode/100 == 2 {
		return raw, nil
	}
	var re restError
	if json.Unmarshal(raw, &re) == nil && re.Reason != "" {
		return raw, &apiError{status: resp.StatusCode, reason: printable(re.Reason, 64), message: printable(re.Message, 1000)}
	}
	// Not a gateway's answer (a proxy's page, say): say so, briefly.
	return raw, &apiError{status: resp.StatusCode, message: "not an answer of the gateway's admin API: " + printable(string(raw), 200)}
}

// printable is s without control or format characters (a terminal would
// act on them), cut to at most n runes.
func printable(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if n == 0 {
			b.WriteString("...")
			break
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			r = ' '
		}
		b.WriteRune(r)
		n--
	}
	return b.String()
}

// fail prints a failed request and returns exit code 1. With -json a
// refusal's body is printed as the gateway wrote it, on stdout.
func (c *cli) fail(raw []byte, err error) int {
	var ae *apiError
	if c.asJSON && errors.As(err, &ae) && ae.reason != "" {
		c.stdout.Write(raw)
	}
	fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
	return 1
}

// printJSON prints a gateway's JSON answer as it came (it ends in a newline).
func (c *cli) printJSON(raw []byte) int {
	c.stdout.Write(raw)
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		fmt.Fprintln(c.stdout)
	}
	return 0
}

func (c *cli) table() *tabwriter.Writer {
	return tabwriter.NewWriter(c.stdout, 0, 0, 2, ' ', 0)
}

// cell is a value for a table: printable, never empty.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return printable(s, 200)
}

func subcommand(c *cli, args []string, subs string) (string, []string, bool) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		c.usage("name a subcommand: %s", subs)
		return "", nil, false
	}
	return args[0], args[1:], true
}

// unknown is "refserver unknown list|settle".
func (c *cli) unknown(args []string) int {
	sub, args, ok := subcommand(c, args, "list, settle")
	if !ok {
		return 2
	}
	switch sub {
	case "list":
		return c.unknownList(args)
	case "settle":
		return c.unknownSettle(args)
	}
	return c.usage("unknown subcommand %q (list, settle)", printable(sub, 40))
}

// listedCall is the part of a listed receipt that the table shows.
type listedCall struct {
	Workspace      string `json:"workspace"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotency_key"`
	AttemptCount   int    `json:"attempt_count"`
	CreatedAt      string `json:"created_at"`
	SettleAfter    string `json:"settle_after"`
}

func (c *cli) unknownList(args []string) int {
	fs, u := c.flags("list")
	ws := fs.String("workspace", "", "list one `workspace`'s unknown calls; default: every workspace")
	most := fs.Int("max", 1000, "stop after `n` calls and print the cursor that continues")
	cursor := fs.String("cursor", "", "continue a listing from its `cursor`")
	pos, ok := c.parse(fs, u, args)
	if !ok {
		return 2
	}
	if len(pos) > 0 {
		return c.usage("unexpected argument %q", printable(pos[0], 40))
	}
	if *most < 1 {
		return c.usage("-max must be at least 1")
	}
	var all []json.RawMessage
	cur := *cursor
	for {
		q := url.Values{}
		if *ws != "" {
			q.Set("workspace", *ws)
		}
		if cur != "" {
			q.Set("cursor", cur)
		}
		raw, err := c.do("GET", "/v1/unknown", q, nil)
		if err != nil {
			return c.fail(raw, err)
		}
		var page struct {
			Unknown []json.RawMessage `json:"unknown"`
			Cursor  string            `json:"cursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return c.fail(nil, fmt.Errorf("the gateway's answer is not a listing: %v", err))
		}
		all = append(all, page.Unknown...)
		cur = page.Cursor
		if cur == "" || len(all) >= *most {
			break
		}
	}
	if c.asJSON {
		b, _ := marshalText(struct {
			Unknown []json.RawMessage `json:"unknown"`
			Cursor  string            `json:"cursor"`
		}{append([]json.RawMessage{}, all...), cur})
		return c.printJSON(b)
	}
	tw := c.table()
	fmt.Fprintln(tw, "WORKSPACE\tTOOL\tIDEMPOTENCY KEY\tATTEMPTS\tCREATED\tSETTLE AFTER")
	for _, r := range all {
		var l listedCall
		if err := json.Unmarshal(r, &l); err != nil {
			return c.fail(nil, fmt.Errorf("the gateway's answer is not a listing: %v", err))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", cell(l.Workspace), cell(l.Tool), cell(l.IdempotencyKey),
			l.AttemptCount, cell(l.CreatedAt), cell(l.SettleAfter))
	}
	tw.Flush()
	fmt.Fprintf(c.stdout, "%d unknown call(s)\n", len(all))
	if cur != "" {
		fmt.Fprintf(c.stdout, "more: %s -cursor %s\n", c.name, cur)
	}
	return 0
}

func (c *cli) unknownSettle(args []string) int {
	fs, u := c.flags("settle")
	ws := fs.String("workspace", "", "the call's `workspace` (required)")
	tool := fs.String("tool", "", "the call's `tool` (required)")
	outcome := fs.String("outcome", "", "what the vendor did: `accepted` or definitely_rejected (required)")
	attempts := fs.Int("attempts", -1, "the call's attempt count as listed (required): the settle is refused if it changed")
	note := fs.String("note", "", "why: what the vendor said, a ticket number (recorded on the call's receipt; `text`)")
	pos, ok := c.parse(fs, u, args)
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
		return c.usage("-attempts is required: the attempt count the listing shows (refserver unknown list)")
	}
	q := url.Values{"tool": {*tool}, "workspace": {*ws}}
	raw, err := c.do("POST", "/v1/receipts/"+url.PathEscape(pos[0])+"/resolve", q,
		map[string]any{"outcome": *outcome, "attempt_count": *attempts, "note": *note})
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.reason == "in_progress" {
			var busy struct {
				RetryAfterMS int64 `json:"retry_after_ms"`
			}
			if json.Unmarshal(raw, &busy) == nil && busy.RetryAfterMS > 0 {
				err = fmt.Errorf("%w (retry in %s)", err, (time.Duration(busy.RetryAfterMS) * time.Millisecond).Round(time.Millisecond))
			}
		}
		return c.fail(raw, err)
	}
	if c.asJSON {
		return c.printJSON(raw)
	}
	var rc struct {
		listedCall
		Outcome    string `json:"outcome"`
		Resolution struct {
			By string `json:"by"`
			At string `json:"at"`
		} `json:"resolution"`
	}
	if err := json.Unmarshal(raw, &rc); err != nil {
		return c.fail(nil, fmt.Errorf("the gateway's answer is not a receipt: %v", err))
	}
	fmt.Fprintf(c.stdout, "settled %s (%s, %s): %s by %s at %s\n", cell(rc.IdempotencyKey), cell(rc.Workspace), cell(rc.Tool),
		cell(rc.Outcome), cell(rc.Resolution.By), cell(rc.Resolution.At))
	return 0
}

// approvals is "refserver approvals list|approve|deny".
func (c *cli) approvals(args []string) int {
	sub, args, ok := subcommand(c, args, "list, approve, deny")
	if !ok {
		return 2
	}
	switch sub {
	case "list":
		return c.approvalsList(args)
	case "approve", "deny":
		return c.decide(sub, args)
	}
	return c.usage("unknown subcommand %q (list, approve, deny)", printable(sub, 40))
}

// pendingCall is the part of a pending approval that the table shows.
type pendingCall struct {
	Ticket         string `json:"ticket"`
	Workspace      string `json:"workspace"`
	Tool           string `json:"tool"`
	IdempotencyKey string `json:"idempotency_key"`
	State          string `json:"state"`
	HeldAt         string `json:"held_at"`
}

func (c *cli) approvalsList(args []string) int {
	fs, u := c.flags("list")
	ws := fs.String("workspace", "", "list one `workspace`'s pending approvals; default: every workspace")
	most := fs.Int("max", 1000, "stop after `n` approvals and print the cursor that continues")
	cursor := fs.String("cursor", "", "continue a listing from its `cursor`")
	pos, ok := c.parse(fs, u, args)
	if !ok {
		return 2
	}
	if len(pos) > 0 {
		return c.usage("unexpected argument %q", printable(pos[0], 40))
	}
	if *most < 1 {
		return c.usage("-max must be at least 1")
	}
	var all []json.RawMessage
	cur := *cursor
	for {
		q := url.Values{}
		if *ws != "" {
			q.Set("workspace", *ws)
		}
		if cur != "" {
			q.Set("cursor", cur)
		}
		raw, err := c.do("GET", "/v1/approvals", q, nil)
		if err != nil {
			return c.fail(raw, err)
		}
		var page struct {
			Pending []json.RawMessage `json:"pending"`
			Cursor  string            `json:"cursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return c.fail(nil, fmt.Errorf("the gateway's answer is not a listing: %v", err))
		}
		all = append(all, page.Pending...)
		cur = page.Cursor
		if cur == "" || len(all) >= *most {
			break
		}
	}
	if c.asJSON {
		b, _ := marshalText(struct {
			Pending []json.RawMessage `json:"pending"`
			Cursor  string            `json:"cursor"`
		}{append([]json.RawMessage{}, all...), cur})
		return c.printJSON(b)
	}
	tw := c.table()
	fmt.Fprintln(tw, "TICKET\tWORKSPACE\tTOOL\tIDEMPOTENCY KEY\tSTATE\tHELD AT")
	for _, r := range all {
		var p pendingCall
		if err := json.Unmarshal(r, &p); err != nil {
			return c.fail(nil, fmt.Errorf("the gateway's answer is not a listing: %v", err))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(p.Ticket), cell(p.Workspace), cell(p.Tool), cell(p.IdempotencyKey),
			cell(p.State), cell(p.HeldAt))
	}
	tw.Flush()
	fmt.Fprintf(c.stdout, "%d pending approval(s)\n", len(all))
	if cur != "" {
		fmt.Fprintf(c.stdout, "more: %s -cursor %s\n", c.name, cur)
	}
	return 0
}

func (c *cli) decide(sub string, args []string) int {
	fs, u := c.flags(sub)
	pos, ok := c.parse(fs, u, args)
	if !ok {
		return 2
	}
	if len(pos) != 1 {
		return c.usage("name one ticket: %s apt_...", c.name)
	}
	raw, err := c.do("POST", "/v1/approvals/"+url.PathEscape(pos[0])+"/"+sub, nil, nil)
	if err != nil {
		return c.fail(raw, err)
	}
	if c.asJSON {
		return c.printJSON(raw)
	}
	var t ticketView
	if err := json.Unmarshal(raw, &t); err != nil {
		return c.fail(nil, fmt.Errorf("the gateway's answer is not a ticket: %v", err))
	}
	fmt.Fprintf(c.stdout, "%s %s (%s, %s, key %s)\n", cell(t.Ticket), cell(t.Status), cell(t.Workspace), cell(t.Tool), cell(t.IdempotencyKey))
	return 0
}

// scopeVersion is "refserver scope-version advance".
func (c *cli) scopeVersion(args []string) int {
	sub, args, ok := subcommand(c, args, "advance")
	if !ok {
		return 2
	}
	if sub != "advance" {
		return c.usage("unknown subcommand %q (advance)", printable(sub, 40))
	}
	fs, u := c.flags(sub)
	to := fs.Int("to", 0, "the new scope `version`; default: the gateway's version + 1")
	strand := fs.Int("strand", -1, "finish although `n` live records of the old version remain: the count an earlier run printed")
	pos, ok := c.parse(fs, u, args)
	if !ok {
		return 2
	}
	if len(pos) > 0 {
		return c.usage("unexpected argument %q", printable(pos[0], 40))
	}
	if flagSet(fs, "to") && *to < 1 {
		return c.usage("-to must be at least 1")
	}
	if flagSet(fs, "strand") && *strand < 0 {
		return c.usage("-strand must not be negative")
	}
	body := map[string]any{}
	if *to > 0 {
		body["to"] = *to
	}
	if *strand >= 0 {
		body["strand"] = *strand
	}
	raw, err := c.do("POST", "/v1/scope-version/advance", nil, body)
	var ae *apiError
	if err != nil && !(errors.As(err, &ae) && ae.reason == "records_live") {
		return c.fail(raw, err)
	}
	if c.asJSON {
		c.printJSON(raw)
		if err != nil {
			fmt.Fprintf(c.stderr, "%s: %v\n", c.name, err)
			return 1
		}
		return 0
	}
	var a advanceView
	if jerr := json.Unmarshal(raw, &a); jerr != nil {
		return c.fail(nil, fmt.Errorf("the gateway's answer is not an advance: %v", jerr))
	}
	fmt.Fprintf(c.stdout, "scope version %d -> %d: %s\n", a.From, a.To, cell(a.Phase))
	if len(a.Counts) > 0 {
		tw := c.table()
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

// storeCmd is "refserver store acknowledge-data-loss".
func (c *cli) storeCmd(args []string) int {
	sub, args, ok := subcommand(c, args, "acknowledge-data-loss")
	if !ok {
		return 2
	}
	if sub != "acknowledge-data-loss" {
		return c.usage("unknown subcommand %q (acknowledge-data-loss)", printable(sub, 40))
	}
	fs, u := c.flags(sub)
	pos, ok := c.parse(fs, u, args)
	if !ok {
		return 2
	}
	if len(pos) > 0 {
		return c.usage("unexpected argument %q", printable(pos[0], 40))
	}
	fmt.Fprintln(c.stderr, c.name+": WARNING: calls whose records the store lost can be dispatched again; "+
		"a vendor with an idempotency binding deduplicates them only if the deployment id is unchanged (deployment_id in the configuration)")
	raw, err := c.do("POST", "/v1/store/acknowledge-data-loss", nil, nil)
	if err != nil {
		return c.fail(raw, err)
	}
	if c.asJSON {
		return c.printJSON(raw)
	}
	// The answer of POST /v1/store/acknowledge-data-loss (DESIGN, section
	// "refserver wire contract").
	var a struct {
		Acknowledged bool   `json:"acknowledged"`
		Lost         string `json:"lost"`
		Sentinels    int    `json:"sentinels"`
		Message      string `json:"message"`
	}
	if err := json.Unmarshal(raw, &a); err != nil {
		return c.fail(raw, fmt.Errorf("the gateway's answer is not the acknowledgement's JSON"))
	}
	if !a.Acknowledged {
		fmt.Fprint(c.stdout, "no store data loss to acknowledge")
	} else {
		fmt.Fprintf(c.stdout, "store data loss acknowledged (%d sentinels placed", a.Sentinels)
		if a.Lost != "" {
			fmt.Fprintf(c.stdout, "; lost: %s", printable(a.Lost, 200))
		}
		fmt.Fprint(c.stdout, ")")
	}
	if a.Message != "" {
		fmt.Fprintf(c.stdout, ": %s", printable(a.Message, 1000))
	}
	fmt.Fprintln(c.stdout)
	return 0
}
