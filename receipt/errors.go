package receipt

import "errors"

// ErrShortSecret: a secret is shorter than MinSecretLen bytes. Replacing so
// short a string in a vendor's answer would corrupt it, and leaving it would
// leak it, so such a secret is a configuration error wherever it is given.
// An error wrapping it names the field, never the value.
var ErrShortSecret = errors.New("receipt: secret shorter than 8 bytes")
