// Package retry makes the outbound attempts of a tool call: exactly one HTTP
// attempt per reservation, with no hidden retry below it, so that the
// attempt_count on a receipt equals the number of requests the vendor could
// have seen.
//
// # Orchestrator
//
// The one recommended path is an Orchestrator per gateway and one Do per
// tool call:
//
//	o := &retry.Orchestrator{Store: store} // zero Policy: production
//	out, err := o.Do(ctx, retry.Call{
//		Scope: scope, Key: key, KeySource: source, Arguments: args, Spec: spec,
//		Route:  idempotency.Route{Connection: "conn_stripe", Provider: "stripe", ...},
//		Target: &retry.HTTPTarget{URL: url, Header: auth},
//	})
//	// err: a refusal (errors.Is against idempotency.ErrRequestMismatch,
//	// ErrInProgress, ErrOutcomeUnknown, effectspec.ErrPolicyDenied, ...),
//	// nothing was sent. Otherwise out.Receipt says what happened, out.Result
//	// holds the vendor's answer (fresh or replayed).
//
// Do checks the policy, hashes the arguments, claims the key, and when the
// claim reserved an attempt sends it through the Target and finalizes the
// record with the fencing token it holds. The rules it keeps:
//
//   - One immediate second attempt at most, and only after a proven
//     BeforeSend failure (not an invalid request, not an expired deadline),
//     or a complete Responded answer whose status the spec lists as
//     retryable when the vendor deduplicates on our key
//     (effectspec.Spec.Retryable). The second attempt is reserved in the
//     store (Reserve, compare-and-set on the token) before it is sent; if
//     the reservation fails, nothing more is sent.
//   - A PostSend failure finalizes unknown with its attempt counted. A
//     proven BeforeSend attempt is finalized as never sent (and taken back
//     by the Reserve of a second attempt): it counts on the receipt but does
//     not burn the slot, so the next call with the key dispatches, for every
//     binding. A request that cannot be built is idempotency.ErrInvalidRequest,
//     never retried.
//   - One lease, the store's (Store.Lease). An attempt may start sending
//     only before its lease ends minus SafetyMargin, measured from just
//     before its reservation was sent (WithSendDeadline stops an attempt
//     that has not written a byte by then). Once sent, it runs until the
//     tool's timeout (EffectSpec timeout) while its owner renews the lease
//     every lease/3 by fencing token; a renewed lease never allows a send.
//     A crashed gateway stops renewing, so its slot is taken over within
//     one lease, even for a tool that runs for minutes.
//   - A refusal decided before the claim (the policy, Call.Refuse) is
//     decided inside it: a final record under the key still replays.
//   - After the claim, sending and finalizing run on
//     context.WithoutCancel(ctx): a client that disconnects does not turn an
//     answered call into unknown; the outcome is recorded and replayed to
//     the next call with the key.
//   - Store calls whose reply was lost are re-sent with the same operation
//     id (StoreRetries), which the store answers as already applied; when
//     the store stays unavailable, a claim or reserve fails closed (no send)
//     and a finalize returns an error wrapping idempotency.ErrStoreUnavailable
//     together with the vendor's answer in Outcome.Result (the record reads
//     unknown once its lease ends).
//   - A finalize answered ErrStale (another gateway took the slot over after
//     the lease) is reported, never overwritten.
//
// attempt_count on a receipt counts reserved attempts, each made durable
// before it may be sent: the vendor saw at most that many requests, and
// fewer only when a reserved attempt never left (a proven BeforeSend, or a
// gateway that died between the reservation and the send). It is never
// lower than what the vendor saw: that is the promise the proof suite
// checks.
//
// Hooks (OnClaim, OnAttempt, OnStoreError) are function fields so a gateway
// can log and count. Their errors hold no secret; OnAttempt's Result carries
// the vendor's body and headers as received, so log its Phase, Status and
// Err only.
// Tracer, if set, gets a span for the claim, each attempt, a second
// attempt's reservation and the finalize, under the span of Do's ctx, with
// no argument value, key or header; package otelretry adapts it to
// OpenTelemetry, and HTTPTarget.InjectHeaders sends the W3C traceparent.
//
// # Secrets never come back
//
// A vendor may echo its request, credentials included. Before a vendor's
// answer is stored (finalize) or returned (fresh or replayed), every secret
// of the call is replaced by receipt.Redacted in the body and in the kept
// headers, raw, JSON-escaped and inside base64 (see receipt.Redactor). The
// secrets are Call.Secrets and, when the Target is a SecretHolder, its
// Secrets: HTTPTarget reports the credentials of its Authorization,
// Proxy-Authorization and X-Api-Key headers and of its URL's userinfo, and
// the broker adapters their keys. Call.Secrets exists for a TargetFunc,
// which has no method to report them, and for credentials that travel where
// HTTPTarget does not look (a query, the body). A secret shorter than
// receipt.MinSecretLen bytes is refused before the claim (an error wrapping
// receipt.ErrShortSecret, naming where it came from): it could not be
// replaced without corrupting answers. Replays are scrubbed too, so a record
// stored before a secret was known comes back clean.
//
// # Executor
//
// Targets use a long-lived Executor per gateway (its zero value is ready)
// and one Do per reserved attempt:
//
//	var exec retry.Executor // keep it: it pools keep-alive connections
//
//	res := exec.Do(ctx, req) // ctx: the dispatch deadline inside the lease
//	switch res.Phase {
//	case retry.BeforeSend: // proven: the vendor got no byte; may be attempted again
//	case retry.PostSend:   // the vendor may have seen it: the outcome is unknown
//	case retry.Responded:  // res.Status, res.Header, res.Body (or res.Truncated)
//	}
//
// Do never returns an error of its own: every outcome is a Result, and
// Result.Err, an *Error, explains a BeforeSend or PostSend attempt. An
// *Error's message never holds a header value, the URL (path, query and
// userinfo may hold credentials) or bytes the vendor sent; the error it
// wraps may, so log Error() and nothing below it. errors.Is(res.Err,
// ErrInvalidRequest) tells a request that can never be sent from a network
// failure; it is reported as BeforeSend, since nothing was written.
//
// # How before_send is proven
//
// Every connection the Executor dials is wrapped in a conn that counts the
// bytes handed to Write, counting before the write starts. An httptrace
// GotConn hook finds the connection the request is about to be written to
// (under the *tls.Conn for https) and notes its count. When the round trip
// fails, the connection is sealed: under the same mutex as the count, every
// later Write fails without writing, and the connection is closed. If the
// count at the seal equals the count at GotConn, no request byte reached the
// socket and none ever will, and the phase is BeforeSend; otherwise it is
// PostSend. A failure before GotConn (a refused dial, a context done before
// a connection was found) is BeforeSend. httptrace's WroteHeaders and
// WroteRequest callbacks are not used: they fire while bytes may still sit
// in a buffer. TLS handshake bytes are written before GotConn and are not
// request bytes. Any other byte written after GotConn, even one that failed,
// counts: the proof errs only towards PostSend.
//
// # No hidden retry
//
// net/http's Transport silently re-sends a request on a new connection when
// a reused keep-alive connection fails and the request is "replayable" (a
// GET, HEAD, OPTIONS or TRACE, or any request with an Idempotency-Key or
// X-Idempotency-Key header, whose body is nil, http.NoBody or rewindable
// through GetBody), and also when the transport wrote nothing to the
// connection and the body is empty or rewindable. The Executor closes each
// path:
//
//   - The request handed to the transport always has a non-nil body other
//     than http.NoBody, and no GetBody. Such a request is never replayable,
//     and its outgoing length is never zero, so the transport's own rules
//     retry nothing, not even when nothing was written. (The transport judges
//     "nothing written" by bytes the connection accepted; the Executor does
//     not rely on that judgement but leaves the second attempt to the caller,
//     after a proven BeforeSend.) A keep-alive connection is still reused
//     whenever the previous response was read in full.
//   - An empty body is sent as net/http sends a nil one for GET, HEAD,
//     DELETE and OPTIONS (no body framing), because the transport probes
//     such bodies and finds them empty. For POST,
//     PUT, PATCH and other methods an empty body goes out as an empty chunked
//     body (Transfer-Encoding: chunked), since only a nil body gets
//     Content-Length: 0 and a nil body is replayable.
//   - HTTP/1.1 only: no HTTP/2, whose transport re-sends on GOAWAY,
//     REFUSED_STREAM and some protocol errors. ALPN offers only http/1.1.
//   - Transport.RoundTrip, not http.Client: a redirect is a Responded result
//     with its 3xx status and Location header, never followed.
//   - No proxy: the environment's proxy settings are ignored, since a
//     forward proxy may retry on its own.
//   - One Transport per Executor, so no other code shares its pool.
//   - Should the transport still ask for a second connection within one Do,
//     that connection is sealed before the request is handed to it and the
//     attempt is canceled: at most one connection ever receives a byte of an
//     attempt.
//
// # Other decisions
//
//   - The whole response body is read, up to MaxBodyBytes. A larger body is
//     not read further: the Result is Responded with Status and Header,
//     Truncated is set, Body is nil, and the connection is closed instead
//     of reused. A truncated response is not complete, so a caller must not
//     treat it as a consistent answer.
//   - A body cut short by the connection, or by ctx, is PostSend, with the
//     Status that had arrived.
//   - Responses are not decompressed (no Accept-Encoding is added), so Body
//     holds the bytes the vendor sent.
//   - Do ignores req's own context and uses ctx: deadlines, cancellation and
//     trace hooks come from ctx.
package retry
