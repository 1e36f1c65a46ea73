package redisstore

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/redis/rueidis"
)

// ParseURL turns a -redis flag into client options:
//
//	redis://[user:password@]host[:port][/db][?query]
//	rediss://...                                      (TLS)
//	redis://[user:password@]h1:p1,h2:p2,h3:p3         (a Cluster seed list)
//	h1:p1,h2:p2                                       (bare addresses, no TLS)
//
// The query takes rueidis' own parameters (dial_timeout, protocol, ...).
// The options are the ones this store needs: client-side caching off (the
// store never reads through the cache, and miniredis lacks it),
// ConnLifetime 0 (an expiring connection re-sends in-flight writes). Errors
// never echo the URL, which may hold a password.
func ParseURL(s string) (rueidis.ClientOption, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return rueidis.ClientOption{}, errors.New("redisstore: redis URL: empty")
	}
	if !strings.Contains(s, "://") {
		s = "redis://" + s
	}
	scheme, rest, _ := strings.Cut(s, "://")
	switch scheme {
	case "redis", "rediss":
	default:
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: redis URL: scheme %q: want redis or rediss", scheme)
	}
	// The authority ends at the first '/', '?' or '#' after any userinfo.
	userinfo, hostsAndTail := "", rest
	if n := strings.Count(rest[:authorityEnd(rest)], "@"); n > 1 {
		return rueidis.ClientOption{}, errors.New("redisstore: redis URL: more than one '@' (percent-encode it in a password)")
	} else if n == 1 {
		at := strings.Index(rest, "@")
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
			return rueidis.ClientOption{}, fmt.Errorf("redisstore: redis URL: address %d is empty", i+1)
		}
		list[i] = h
	}
	opt, err := rueidis.ParseURL(scheme + "://" + userinfo + list[0] + tail)
	if err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: redis URL: %s", redact(err))
	}
	for _, h := range list[1:] {
		u, err := url.Parse(scheme + "://" + h)
		if err != nil || u.Host != h || u.User != nil {
			return rueidis.ClientOption{}, fmt.Errorf("redisstore: redis URL: address %q is not host[:port]", h)
		}
		port := u.Port()
		if port == "" {
			port = "6379"
		}
		opt.InitAddress = append(opt.InitAddress, net.JoinHostPort(u.Hostname(), port))
	}
	if len(opt.InitAddress) > 1 && opt.SelectDB != 0 {
		return rueidis.ClientOption{}, errors.New("redisstore: redis URL: a Cluster has only database 0")
	}
	opt.DisableCache = true
	opt.ConnLifetime = 0
	return opt, nil
}

func authorityEnd(s string) int {
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		return i
	}
	return len(s)
}

// redact keeps the reason of a URL error and drops the URL.
func redact(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	msg := err.Error()
	if strings.Contains(msg, "://") {
		return "malformed"
	}
	return msg
}
