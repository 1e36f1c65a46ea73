package faultproxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// errShortLine is a RESP line too short to hold a type and a CRLF.
var errShortLine = errors.New("faultproxy: short RESP line")

// readCommand reads one RESP array of bulk strings (how every client sends
// commands) and returns its raw bytes, to forward unchanged, and its
// arguments, for the rule.
func readCommand(r *bufio.Reader) ([]byte, []string, error) {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return nil, nil, err
	}
	raw := append([]byte(nil), line...)
	if len(line) < 3 || line[0] != '*' {
		return nil, nil, fmt.Errorf("faultproxy: not a command array: %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(line[1:])))
	if err != nil {
		return nil, nil, fmt.Errorf("faultproxy: command array length: %w", err)
	}
	args := make([]string, 0, max(n, 0))
	for range n {
		hdr, err := r.ReadSlice('\n')
		if err != nil {
			return nil, nil, err
		}
		raw = append(raw, hdr...)
		if hdr[0] != '$' {
			return nil, nil, fmt.Errorf("faultproxy: not a bulk string: %q", hdr)
		}
		l, err := strconv.Atoi(strings.TrimSpace(string(hdr[1:])))
		if err != nil || l < 0 {
			return nil, nil, fmt.Errorf("faultproxy: bulk string length: %q", hdr)
		}
		buf := make([]byte, l+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, nil, err
		}
		raw = append(raw, buf...)
		args = append(args, string(buf[:l]))
	}
	return raw, args, nil
}

// readValue reads one complete RESP2/RESP3 value, attributes included, and
// returns its raw bytes.
func readValue(r *bufio.Reader) ([]byte, error) {
	var raw []byte
	if err := appendValue(r, &raw); err != nil {
		return nil, err
	}
	return raw, nil
}

func appendValue(r *bufio.Reader, raw *[]byte) error {
	line, err := r.ReadSlice('\n')
	if err != nil {
		return err
	}
	*raw = append(*raw, line...)
	if len(line) < 3 {
		return errShortLine
	}
	head := strings.TrimSpace(string(line[1:]))
	switch line[0] {
	case '+', '-', ':', '_', '#', ',', '(':
		return nil
	case '$', '!', '=':
		n, err := strconv.Atoi(head)
		if err != nil {
			return fmt.Errorf("faultproxy: %c length: %w", line[0], err)
		}
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		*raw = append(*raw, buf...)
		return nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(head)
		if err != nil {
			return fmt.Errorf("faultproxy: %c length: %w", line[0], err)
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range n {
			if err := appendValue(r, raw); err != nil {
				return err
			}
		}
		if line[0] == '|' { // an attribute precedes the actual reply
			return appendValue(r, raw)
		}
		return nil
	}
	return fmt.Errorf("faultproxy: unknown RESP type %q", line[0])
}
