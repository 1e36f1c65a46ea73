// Package scriptargs is the one definition of the arguments of
// redisstore's Lua scripts: per script, a struct whose fields, in order,
// are the script's ARGV. The Go side encodes a value of it with Argv; the
// Lua side never reads ARGV by position: redisstore puts each script's
// Prologue, generated from the same struct, ahead of its body, which uses
// the names only. Adding an argument is one field here, its use in the
// script and its value in the Go caller.
//
// A Spec also names the script's KEYS, in order (every key the script
// touches is declared: Redis routes a script and decides TRYAGAIN and ASK
// from them); the prologue refuses another count.
//
// A field's tag `lua:"name[,num]"` is its Lua local. Its Go type is its
// encoding and its Lua kind:
//
//	string    sent as it is; a Lua string (with ,num: tonumber of it)
//	int       decimal; a Lua string (with ,num: a number)
//	bool      "1" or "0"; a Lua boolean (the argument is "1")
//	[]string  last only: the script's remaining arguments, sent in order;
//	          the Lua local is the index of the first (ARGV[i] to ARGV[#ARGV])
//
// The encoding is positional: the order of the fields is the order of
// ARGV, and a script's SHA (the prologue is part of its source) names its
// argument layout. Each binary sends its own scripts by SHA, so binaries
// of different layouts run side by side on one Redis; the record they
// write is the same.
//
// The package is internal to the module: the store, its tests, the
// fault-injecting proxy of the reliability suite and the benchmark's
// Redis-side limit build the same argument lists from it.
package scriptargs

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"unsafe"
)

type kind uint8

const (
	kString kind = iota
	kInt
	kBool
	kRest
)

type field struct {
	name string // the Lua local
	kind kind
	num  bool    // the Lua reads a number
	off  uintptr // the Go field's offset in the struct
}

// Spec is the argument list of one script, from its struct T.
type Spec[T any] struct {
	script string
	keys   []string
	fields []field
	rest   bool
}

// Args describes a Spec whatever its struct, for the store's script loader
// and for tests.
type Args interface {
	// Script is the script's name (lua/<name>.lua).
	Script() string
	// Names are the Lua locals, in ARGV order.
	Names() []string
	// Keys name the script's KEYS, in order.
	Keys() []string
	// Prologue is the Lua chunk that checks the key and argument counts and assigns
	// every argument to its local.
	Prologue() string
}

func newSpec[T any](script string, keys ...string) *Spec[T] {
	t := reflect.TypeFor[T]()
	if len(keys) == 0 {
		panic(fmt.Sprintf("scriptargs: %s: no keys", script))
	}
	s := &Spec[T]{script: script, keys: keys}
	seen := map[string]bool{}
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, ok := sf.Tag.Lookup("lua")
		name, opt, _ := strings.Cut(tag, ",")
		if !ok || !luaName(name) || seen[name] || (opt != "" && opt != "num") {
			panic(fmt.Sprintf("scriptargs: %s.%s: tag %q: want lua:\"name[,num]\", a unique Lua name", t.Name(), sf.Name, tag))
		}
		seen[name] = true
		f := field{name: name, num: opt == "num", off: sf.Offset}
		switch sf.Type {
		case reflect.TypeFor[string]():
			f.kind = kString
		case reflect.TypeFor[int]():
			f.kind = kInt
		case reflect.TypeFor[bool]():
			f.kind = kBool
		case reflect.TypeFor[[]string]():
			f.kind = kRest
		default:
			panic(fmt.Sprintf("scriptargs: %s.%s: type %s: want string, int, bool or []string", t.Name(), sf.Name, sf.Type))
		}
		if (f.kind == kBool || f.kind == kRest) && f.num {
			panic(fmt.Sprintf("scriptargs: %s.%s: ,num on a %s", t.Name(), sf.Name, sf.Type))
		}
		if s.rest {
			panic(fmt.Sprintf("scriptargs: %s.%s: the []string field must be the last", t.Name(), sf.Name))
		}
		s.rest = f.kind == kRest
		s.fields = append(s.fields, f)
	}
	return s
}

func luaName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' || luaKeywords[s] {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

var luaKeywords = map[string]bool{"and": true, "break": true, "do": true, "else": true, "elseif": true,
	"end": true, "false": true, "for": true, "function": true, "if": true, "in": true, "local": true,
	"nil": true, "not": true, "or": true, "repeat": true, "return": true, "then": true, "true": true,
	"until": true, "while": true}

// Script is the script's name.
func (s *Spec[T]) Script() string { return s.script }

// Names are the Lua locals, in ARGV order.
func (s *Spec[T]) Names() []string {
	out := make([]string, len(s.fields))
	for i, f := range s.fields {
		out[i] = f.name
	}
	return out
}

// Keys name the script's KEYS, in order.
func (s *Spec[T]) Keys() []string { return s.keys }

// Argv encodes v as the script's ARGV. It reads the fields at the offsets
// newSpec took from T's reflect.Type: the claim is the most frequent write,
// and a reflect.Value walk costs it several hundred ns more.
func (s *Spec[T]) Argv(v *T) []string {
	p := unsafe.Pointer(v)
	n := len(s.fields)
	var rest []string
	if s.rest {
		n--
		rest = *(*[]string)(unsafe.Add(p, s.fields[n].off))
	}
	out := make([]string, n, n+len(rest))
	for i, f := range s.fields[:n] {
		fp := unsafe.Add(p, f.off)
		switch f.kind {
		case kString:
			out[i] = *(*string)(fp)
		case kInt:
			out[i] = strconv.Itoa(*(*int)(fp))
		case kBool:
			if *(*bool)(fp) {
				out[i] = "1"
			} else {
				out[i] = "0"
			}
		}
	}
	return append(out, rest...)
}

// Prologue is the Lua chunk that checks the key and argument counts (a
// call made by hand with another layout is an error, never a misread
// argument or an undeclared key) and assigns every argument to its local,
// in one statement.
func (s *Spec[T]) Prologue() string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- The arguments of %s (generated from internal/scriptargs; never read ARGV by position).\n", s.script)
	fmt.Fprintf(&b, "if #KEYS ~= %d then\n  return redis.error_reply('ERR redisstore: %s takes %d keys (%s), got ' .. #KEYS)\nend\n",
		len(s.keys), s.script, len(s.keys), strings.Join(s.keys, ", "))
	n := len(s.fields)
	if s.rest {
		fmt.Fprintf(&b, "if #ARGV < %d then\n", n-1)
	} else {
		fmt.Fprintf(&b, "if #ARGV ~= %d then\n", n)
	}
	fmt.Fprintf(&b, "  return redis.error_reply('ERR redisstore: %s takes %s arguments, got ' .. #ARGV)\nend\n", s.script, s.arity())
	if n == 0 {
		return b.String()
	}
	vals := make([]string, n)
	for i, f := range s.fields {
		a := fmt.Sprintf("ARGV[%d]", i+1)
		switch {
		case f.kind == kRest:
			a = strconv.Itoa(i + 1)
		case f.kind == kBool:
			a += " == '1'"
		case f.num:
			a = "tonumber(" + a + ")"
		}
		vals[i] = a
	}
	fmt.Fprintf(&b, "local %s =\n  %s\n", strings.Join(s.Names(), ", "), strings.Join(vals, ", "))
	return b.String()
}

func (s *Spec[T]) arity() string {
	if s.rest {
		return fmt.Sprintf("at least %d", len(s.fields)-1)
	}
	return strconv.Itoa(len(s.fields))
}
