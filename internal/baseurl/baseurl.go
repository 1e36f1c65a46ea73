// Package baseurl parses the base URL of a vendor or a broker: the root that
// request paths are appended to, and whose scheme, host and path go into the
// route fingerprint.
package baseurl

import (
	"errors"
	"net/url"
	"strings"
)

// The errors of Parse read as the tail of "field: ", so they carry no
// package prefix. None quotes the URL: it may hold credentials.
var (
	errRequired = errors.New("required")
	errSyntax   = errors.New("not a URL")
	errScheme   = errors.New("must be http or https")
	errHost     = errors.New("must have a host")
	errQuery    = errors.New("must not have a query or fragment")

	// ErrCredentials is returned for a URL with userinfo. Callers add where
	// the credential belongs instead.
	ErrCredentials = errors.New("must not hold credentials")
)

// Parse checks that raw is an absolute http or https URL with a host and no
// userinfo, query or fragment, and returns it with its trailing slashes
// dropped, so that appending a path that starts with "/" never doubles one.
// Escapes in the path are decoded (RawPath is cleared): the URL sent is then
// the path that a route records, so two spellings of one path cannot send to
// different places under one fingerprint.
func Parse(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errRequired
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, errSyntax
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errScheme
	case u.Host == "":
		return nil, errHost
	case u.User != nil:
		return nil, ErrCredentials
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errQuery
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}
