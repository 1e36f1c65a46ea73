package redisstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/redis/rueidis"
)

// ParseURL turns a -redis flag into client options. It takes the schemes
// rueidis takes:
//
//	redis://[user:password@]host[:port][/db][?query]
//	rediss://...                                      (TLS)
//	valkey://..., valkeys://...                       (the same as redis, rediss)
//	redis://[user:password@]h1:p1,h2:p2,h3:p3         (a Cluster seed list)
//	h1:p1,h2:p2                                       (bare addresses, no TLS)
//	unix://[user:password@]/path/to/redis.sock[?db=N] (a Unix socket)
//
// The query takes rueidis' own parameters (dial_timeout, protocol, ...).
// A unix URL names no host (rueidis would ignore it) and no addr parameter
// (rueidis would dial it as a socket path). The options are the ones this
// store needs: client-side caching off (the store never reads through the
// cache, and miniredis lacks it), ConnLifetime 0 (an expiring connection
// re-sends in-flight writes). Errors never quote any part of the URL, which
// may hold a password.
func ParseURL(s string) (rueidis.ClientOption, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return rueidis.ClientOption{}, errors.New("redisstore: redis URL: empty")
	}
	if !strings.Contains(s, "://") {
		s = "redis://" + s
	}
	scheme, rest, _ := strings.Cut(s, "://")
	scheme = strings.ToLower(scheme) // RFC 3986: schemes are case-insensitive
	if strings.Count(rest[:authorityEnd(rest)], "@") > 1 {
		return rueidis.ClientOption{}, errors.New("redisstore: redis URL: more than one '@' (percent-encode it in a password)")
	}
	var (
		opt rueidis.ClientOption
		err error
	)
	switch scheme {
	case "redis", "rediss", "valkey", "valkeys":
		opt, err = parseHosts(scheme, rest)
	case "unix":
		opt, err = parseUnix(rest)
	default:
		err = errors.New("unknown scheme: want redis, rediss, valkey, valkeys or unix")
	}
	if err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: redis URL: %w", err)
	}
	opt.DisableCache = true
	opt.ConnLifetime = 0
	return opt, nil
}

// parseHosts parses what follows "scheme://" in a TCP URL, whose host may be
// a comma-separated Cluster seed list.
func parseHosts(scheme, rest string) (rueidis.ClientOption, error) {
	// The authority ends at the first '/', '?' or '#' after any userinfo.
	userinfo, hostsAndTail := "", rest
	if at := strings.Index(rest[:authorityEnd(rest)], "@"); at >= 0 {
		userinfo, hostsAndTail = rest[:at+1], rest[at+1:]
	}
	end := authorityEnd(hostsAndTail)
	hosts, tail := hostsAndTail[:end], hostsAndTail[end:]
	if tail == "/" || strings.HasPrefix(tail, "/?") {
		tail = tail[1:] // no database given
	}
	list := strings.Split(hosts, ",")
	for i, h := range list {
		if h = strings.TrimSpace(h); h == "" {
			return rueidis.ClientOption{}, fmt.Errorf("address %d is empty", i+1)
		}
		list[i] = h
	}
	opt, err := rueidis.ParseURL(scheme + "://" + userinfo + list[0] + tail)
	if err != nil {
		return rueidis.ClientOption{}, errors.New(redact(err))
	}
	for i, h := range list[1:] {
		u, err := url.Parse(scheme + "://" + h)
		if err != nil || u.Host != h || u.User != nil {
			return rueidis.ClientOption{}, fmt.Errorf("address %d is not host[:port]", i+2)
		}
		port := u.Port()
		if port == "" {
			port = "6379"
		}
		opt.InitAddress = append(opt.InitAddress, net.JoinHostPort(u.Hostname(), port))
	}
	if len(opt.InitAddress) > 1 && opt.SelectDB != 0 {
		return rueidis.ClientOption{}, errors.New("a Cluster has only database 0")
	}
	return opt, nil
}

// parseUnix parses what follows "unix://": rueidis takes the URL path as the
// socket path and the database from ?db=.
func parseUnix(rest string) (rueidis.ClientOption, error) {
	const want = "want unix://[user:password@]/path/to/socket"
	u, err := url.Parse("unix://" + rest)
	if err != nil {
		return rueidis.ClientOption{}, errors.New(redact(err))
	}
	switch p := strings.TrimSpace(u.Path); {
	case u.Host != "":
		return rueidis.ClientOption{}, errors.New("a unix URL names no host: " + want)
	case p == "" || strings.HasSuffix(p, "/"):
		return rueidis.ClientOption{}, errors.New("no socket path: " + want)
	case u.Query().Has("addr"):
		return rueidis.ClientOption{}, errors.New("a unix URL takes no addr parameter")
	}
	opt, err := rueidis.ParseURL("unix://" + rest)
	if err != nil {
		return rueidis.ClientOption{}, errors.New(redact(err))
	}
	return opt, nil
}

func authorityEnd(s string) int {
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		return i
	}
	return len(s)
}

// redact keeps the reason of a URL error and drops whatever it quotes of the
// URL (net/url and rueidis quote the bad port, escape or database number):
// the reason is the message up to its first ':' or '"', and only if it is
// plain words.
func redact(err error) string {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = ue.Err.Error()
	}
	msg = strings.TrimPrefix(msg, "net/url: ")
	msg = strings.TrimPrefix(msg, "redis: ")
	if i := strings.IndexAny(msg, ":\""); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.TrimSpace(msg)
	for _, c := range msg {
		if !(c == ' ' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return "malformed"
		}
	}
	if msg == "" {
		return "malformed"
	}
	return msg
}

// Dial connects to the Redis that url names ([ParseURL]) the way a gateway
// wants it: pooled connections rather than auto-pipelining, so that a call
// writes and reads its own command instead of waking a writer and a reader
// goroutine (latency first: every agent waits for every call; the cost is
// more Redis CPU per command under heavy concurrency). An embedding that is
// Redis-bound may build its own client with [ParseURL] and keep
// auto-pipelining. The caller closes the client after the [Store].
func Dial(url string) (rueidis.Client, error) {
	opt, err := ParseURL(url)
	if err != nil {
		return nil, err
	}
	opt.DisableAutoPipelining = true
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("redisstore: connect: %w", err)
	}
	return client, nil
}
