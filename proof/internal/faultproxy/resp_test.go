package faultproxy

import (
	"bufio"
	"slices"
	"strings"
	"testing"
)

func TestReadValue(t *testing.T) {
	for _, v := range []string{
		"+OK\r\n",
		"-ERR x\r\n",
		":42\r\n",
		"$-1\r\n",
		"$0\r\n\r\n",
		"$4\r\na\r\nb\r\n", // a bulk string may hold CRLF
		"*-1\r\n",
		"*2\r\n:1\r\n$1\r\nx\r\n",
		"_\r\n",
		"#t\r\n",
		",1.5\r\n",
		"(123456789012345678901234567890\r\n",
		"!3\r\nerr\r\n",
		"=7\r\ntxt:abc\r\n",
		"~1\r\n+a\r\n",
		"%1\r\n+k\r\n*1\r\n:1\r\n",
		">2\r\n+message\r\n+x\r\n",
		"|1\r\n+ttl\r\n:3\r\n+value\r\n", // an attribute, then the reply it annotates
	} {
		r := bufio.NewReader(strings.NewReader(v + "+next\r\n"))
		got, err := readValue(r)
		if err != nil || string(got) != v {
			t.Errorf("readValue(%q) = %q, %v", v, got, err)
			continue
		}
		if next, err := readValue(r); err != nil || string(next) != "+next\r\n" {
			t.Errorf("after %q: %q, %v; the value was not read exactly", v, next, err)
		}
	}
	for _, bad := range []string{"?x\r\n", "\r\n", "$x\r\n", "*1\r\n", "$5\r\nab\r\n"} {
		if got, err := readValue(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("readValue(%q) = %q, nil error", bad, got)
		}
	}
}

func TestReadCommand(t *testing.T) {
	in := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n"
	raw, args, err := readCommand(bufio.NewReader(strings.NewReader(in)))
	if err != nil || string(raw) != in || !slices.Equal(args, []string{"SET", "k", "a\r\nb"}) {
		t.Fatalf("readCommand = %q, %q, %v", raw, args, err)
	}
	for _, bad := range []string{"PING\r\n", "*1\r\n:1\r\n", "*x\r\n", "*1\r\n$-1\r\n", "*1\r\n$3\r\nab"} {
		if _, args, err := readCommand(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("readCommand(%q) = %q, nil error", bad, args)
		}
	}
}
