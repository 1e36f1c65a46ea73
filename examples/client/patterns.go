package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/obol-gateway/obol/effectspec"
	"github.com/obol-gateway/obol/idempotency"
)

// RetryOwnKey is pattern 1: it calls tool with a key of its own, loses the
// reply on purpose, and calls again with the same key. The second answer is
// the first one replayed; the vendor acted once. It returns that answer.
func RetryOwnKey(ctx context.Context, c *Client, w io.Writer, tool string, args any) (*Answer, error) {
	call := Call{Tool: tool, Arguments: args, Key: idempotency.NewKey().String()}
	fmt.Fprintf(w, "1. own key: %s with Idempotency-Key %s\n", tool, call.Key)

	call.LoseReply = true
	_, err := c.Call(ctx, call)
	if !errors.Is(err, ErrReplyLost) {
		return nil, fmt.Errorf("%w: first call: %v, want a lost reply", ErrUnexpected, err)
	}
	fmt.Fprintln(w, "   the gateway answered but the reply was lost: did the call happen? The client cannot tell.")

	call.LoseReply = false
	a, err := c.Call(ctx, call)
	if err != nil {
		return nil, fmt.Errorf("retry: %w", err)
	}
	fmt.Fprintf(w, "   retry with the same key: %s\n", summary(a))
	if !a.Receipt.Replayed || a.Receipt.IdempotencyKey != call.Key {
		return a, fmt.Errorf("%w: the retry was not a replay of the key", ErrUnexpected)
	}
	fmt.Fprintln(w, "   the stored result of the first call, replayed: the vendor acted once.")
	return a, nil
}

// RetryMintedKey is pattern 2: it calls tool without a key, reads the key the
// gateway minted from the answer, and calls again with it. After an unknown
// outcome the retry settles it, the vendor deduplicating on the key it
// receives; after any other outcome the retry replays it. It returns both
// answers.
func RetryMintedKey(ctx context.Context, c *Client, w io.Writer, tool string, args any) (first, retry *Answer, err error) {
	fmt.Fprintf(w, "2. minted key: %s without Idempotency-Key\n", tool)
	first, err = c.Call(ctx, Call{Tool: tool, Arguments: args})
	if err != nil {
		return nil, nil, fmt.Errorf("first call: %w", err)
	}
	key, err := first.Key()
	if err != nil {
		return first, nil, err
	}
	fmt.Fprintf(w, "   the gateway minted %s (response header and _meta): %s\n", key, summary(first))
	if first.Receipt.Outcome == effectspec.Unknown {
		fmt.Fprintln(w, "   outcome unknown: the vendor may or may not have acted. Retrying with the same key is safe.")
	} else {
		fmt.Fprintln(w, "   settled; a retry with the same key replays it.")
	}

	retry, err = c.Call(ctx, Call{Tool: tool, Arguments: args, Key: key})
	if err != nil {
		return first, nil, fmt.Errorf("retry: %w", err)
	}
	fmt.Fprintf(w, "   retry with %s: %s\n", key, summary(retry))
	if retry.Receipt.IdempotencyKey != key {
		return first, retry, fmt.Errorf("%w: the retry answered for another key", ErrUnexpected)
	}
	return first, retry, nil
}

// Key returns the effective key of a, after checking that the response
// header, _meta and the receipt agree on it.
func (a *Answer) Key() (string, error) {
	if a.HeaderKey == "" || a.HeaderKey != a.MetaKey || a.MetaKey != a.Receipt.IdempotencyKey {
		return "", ErrKeyMismatch
	}
	return a.HeaderKey, nil
}

func summary(a *Answer) string {
	return fmt.Sprintf("outcome %s, status %d, attempt_count %d, replayed %t",
		a.Receipt.Outcome, a.Receipt.Status, a.Receipt.AttemptCount, a.Receipt.Replayed)
}
