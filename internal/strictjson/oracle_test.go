package strictjson

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
)

// The implementation of Check and Object before the one-pass scanner, kept
// as the oracle of the differential tests: it reads with encoding/json's
// Decoder.Token, after checking UTF-8 and surrogate escapes over the whole
// document. The new code must accept and refuse exactly what this does.

func oracleCheck(data []byte) error {
	if !utf8.Valid(data) {
		return &Error{Err: ErrSyntax}
	}
	if off, ok := surrogatesOK(data); !ok {
		return &Error{Offset: off, Err: ErrSyntax}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	w := &oracleWalker{dec: dec}
	if err := w.value("", 0); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Error{Offset: dec.InputOffset(), Err: ErrSyntax}
	}
	return nil
}

type oracleWalker struct {
	dec *json.Decoder
}

func (w *oracleWalker) token() (json.Token, error) {
	t, err := w.dec.Token()
	if err != nil {
		return nil, &Error{Offset: w.dec.InputOffset(), Err: ErrSyntax}
	}
	return t, nil
}

func (w *oracleWalker) value(path string, depth int) error {
	t, err := w.token()
	if err != nil {
		return err
	}
	if n, ok := t.(json.Number); ok {
		if f, err := n.Float64(); err != nil && math.IsInf(f, 0) {
			return &Error{Path: path, Err: ErrNumber}
		}
		return nil
	}
	d, isDelim := t.(json.Delim)
	if !isDelim {
		return nil
	}
	if depth >= MaxDepth {
		return &Error{Path: path, Err: ErrDepth}
	}
	switch d {
	case '[':
		for i := 0; w.dec.More(); i++ {
			if err := w.value(path+"["+strconv.Itoa(i)+"]", depth+1); err != nil {
				return err
			}
		}
	case '{':
		seen := map[string]bool{}
		for i := 0; w.dec.More(); i++ {
			t, err := w.token()
			if err != nil {
				return err
			}
			name := t.(string)
			p := join(path, name, i)
			if seen[name] {
				return &Error{Path: p, Err: ErrRepeated}
			}
			seen[name] = true
			if err := w.value(p, depth+1); err != nil {
				return err
			}
		}
	}
	_, err = w.token() // the closing delimiter
	return err
}

func oracleObject(data []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, &Error{Err: ErrType}
	}
	m := map[string]json.RawMessage{}
	folded := map[string]bool{}
	for i := 0; dec.More(); i++ {
		t, err := dec.Token()
		if err != nil {
			return nil, &Error{Offset: dec.InputOffset(), Err: ErrSyntax}
		}
		name := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, &Error{Offset: dec.InputOffset(), Err: ErrSyntax}
		}
		k := foldKey(name)
		if folded[k] {
			return nil, &Error{Path: join("", name, i), Err: ErrRepeated}
		}
		folded[k] = true
		m[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, &Error{Offset: dec.InputOffset(), Err: ErrSyntax}
	}
	return m, nil
}
