package strictjson

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrSyntax: not one valid JSON value (trailing data, invalid UTF-8 and
	// lone surrogates included).
	ErrSyntax = errors.New("strictjson: not valid JSON")
	// ErrRepeated: a member name occurs twice in one object (compared after
	// unescaping; for Decode, also compared up to case).
	ErrRepeated = errors.New("strictjson: repeated member")
	// ErrUnknown: a member that the target type does not declare (names are
	// matched exactly, case included).
	ErrUnknown = errors.New("strictjson: unknown field")
	// ErrType: a value of the wrong JSON type for its field.
	ErrType = errors.New("strictjson: wrong type")
	// ErrDepth: the document nests deeper than MaxDepth.
	ErrDepth = errors.New("strictjson: nested too deeply")
	// ErrNumber: a number beyond a float64's range, which encoding/json
	// cannot read into any, float or interface value.
	ErrNumber = errors.New("strictjson: number out of range")
	// ErrTarget: Decode was given something other than a non-nil pointer.
	ErrTarget = errors.New("strictjson: Decode needs a non-nil pointer")
)

// Error is a problem at one place of a document. It unwraps to one of the
// sentinel errors of this package.
type Error struct {
	// Path is where the problem is, such as "workspaces[0].id"; empty for
	// the document as a whole. A member name that is not a plain identifier
	// ([A-Za-z0-9_.-], at most 64 bytes) is shown as {member N}, its
	// position in its object, so a hostile or secret name never appears.
	Path string
	// Offset is the byte offset of the problem in the document, when known.
	Offset int64
	Err    error
}

func (e *Error) Error() string {
	msg := strings.TrimPrefix(e.Err.Error(), "strictjson: ")
	if e.Path == "" {
		if e.Offset > 0 {
			return fmt.Sprintf("strictjson: %s at byte %d", msg, e.Offset)
		}
		return "strictjson: " + msg
	}
	return "strictjson: " + e.Path + ": " + msg
}

func (e *Error) Unwrap() error { return e.Err }
