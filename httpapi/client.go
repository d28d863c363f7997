package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/actorflow/actorflow"
)

// Client reads keys' states from the workers' State routes over HTTP, as
// actorflow.Get does in process, doing what the State route asks of a
// client: it follows a 307 to the key's owner (once per round), and asks
// again — at the URL it was given, not the redirect's — while the answer
// is temporary, for up to WithRetryFor: a 503 (a partition moving,
// recovering, catching up; a worker stopped, where a load balancer may
// send the next request to another; a proxy with no worker ready), a 502
// or 504 from a proxy, and a redirect's target that does not answer (a
// crashed owner is named until the group coordinator notices, for up to
// the group's session timeout; a paused one, past WithAttemptTimeout).
//
// A Client is safe for concurrent use.
type Client[S any] struct {
	url  string
	http *http.Client
	cfg  clientConfig
}

// ClientOption configures a Client.
type ClientOption func(*clientConfig)

type clientConfig struct {
	http     *http.Client
	retryFor time.Duration
	backoff  time.Duration
	attempt  time.Duration
}

// WithHTTPClient is the client the requests go through (its Transport,
// Timeout, Jar); its CheckRedirect is not used: the Client follows the
// State route's redirect itself. Default http.DefaultClient.
func WithHTTPClient(c *http.Client) ClientOption {
	return func(cc *clientConfig) {
		if c != nil {
			cc.http = c
		}
	}
}

// WithRetryFor bounds how long Get keeps asking again while the answer is
// temporary (the Client's doc); past it, Get returns the last answer's
// error, which matches actorflow.ErrUnavailable. Default 1 minute: longer
// than a group's default session timeout (45 s), within which a crashed
// owner is still named. 0: no retry. Get's ctx ending first ends it too.
func WithRetryFor(d time.Duration) ClientOption {
	return func(cc *clientConfig) { cc.retryFor = max(d, 0) }
}

// WithRetryBackoff is the wait before asking again after a temporary
// answer without Retry-After (a 503 with one waits what it says), plus up
// to a fifth of it at random, so that clients do not ask in step. Default
// 500 ms; at least 10 ms.
func WithRetryBackoff(d time.Duration) ClientOption {
	return func(cc *clientConfig) { cc.backoff = d }
}

// WithAttemptTimeout bounds each request: a worker that accepts the
// connection and does not answer (paused, partitioned away) is given up
// on — and, when it was a redirect's target, asked around again — after
// it. Default 10 s, above the State route's query bound (WithQueryTimeout,
// 5 s); 0: none (Get's ctx only).
func WithAttemptTimeout(d time.Duration) ClientOption {
	return func(cc *clientConfig) { cc.attempt = max(d, 0) }
}

// minBackoff floors the wait between rounds: a zero backoff asked a
// failing proxy thousands of times a second (found by a review).
const minBackoff = 10 * time.Millisecond

// NewClient is a Client of the State route at stateURL — an absolute
// http(s) URL without a query, e.g. "http://ledger:8080/state" (a load
// balancer in front of the workers, or any one worker: each redirects to
// the key's owner). It fails only on a stateURL it cannot use.
func NewClient[S any](stateURL string, opts ...ClientOption) (*Client[S], error) {
	u, err := url.Parse(stateURL)
	if err != nil {
		return nil, fmt.Errorf("httpapi: client of %q: %w", stateURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return nil, fmt.Errorf("httpapi: client of %q: want an absolute http(s) URL of the State route without a query", stateURL)
	}
	cc := clientConfig{http: http.DefaultClient, retryFor: time.Minute, backoff: 500 * time.Millisecond, attempt: 10 * time.Second}
	for _, o := range opts {
		o(&cc)
	}
	cc.backoff = max(cc.backoff, minBackoff)
	hc := *cc.http // a copy: the redirect is the Client's to follow
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client[S]{url: u.String(), http: &hc, cfg: cc}, nil
}

// ResponseError is Get's error for an answer other than a 200, or for no
// answer from a redirect's target (Code 0). It matches, with errors.Is and
// errors.As, what actorflow.Get would have returned on the worker:
// actorflow.ErrKeyNotFound for a 404; an *actorflow.NotOwnerError for a 421
// (the owner advertises no query endpoint); actorflow.ErrUnavailable for a
// 503, and also actorflow.ErrRunReturned when a State route answered it
// without Retry-After (that worker stopped); actorflow.ErrUnavailable for
// a proxy's 502 or 504, a second redirect (the owner moved while asked)
// and no answer (wrapping the transport's error);
// actorflow.ErrUndecodableState beside the rest when the route said so
// (StateAnswer.UndecodableState: a 500, or a 404 under a policy that drops
// the state).
type ResponseError struct {
	URL  string // the URL that answered, or did not
	Code int    // its status code; 0: no answer
	// Message is the body's error (StateAnswer.Error), or the status text
	// when the body was not a StateAnswer, or why there was no answer.
	Message string
	// Owner is the key's owner when the answer named one.
	Owner *actorflow.Member
	// RetryAfter is the answer's Retry-After, 0 when it had none.
	RetryAfter time.Duration
	key        string
	info       *actorflow.QueryInfo
	fromRoute  bool  // the body was a StateAnswer: a State route answered
	undecoded  bool  // StateAnswer.UndecodableState
	cause      error // no answer: the transport's error
}

func (e *ResponseError) Error() string {
	if e.Code == 0 {
		return fmt.Sprintf("httpapi: %s did not answer: %s", e.URL, e.Message)
	}
	return fmt.Sprintf("httpapi: %s answered %d: %s", e.URL, e.Code, e.Message)
}

// Unwrap is the actorflow errors the answer stands for (none for a 400 or
// a 500 other than an undecodable state: the message says what).
func (e *ResponseError) Unwrap() []error {
	var errs []error
	switch e.Code {
	case 0:
		errs = append(errs, actorflow.ErrUnavailable, e.cause)
	case http.StatusNotFound:
		errs = append(errs, actorflow.ErrKeyNotFound)
	case http.StatusMisdirectedRequest:
		nf := &actorflow.NotOwnerError{Key: e.key, Partition: -1}
		if e.info != nil {
			nf.Topic, nf.Partition = e.info.Topic, e.info.Partition
		}
		if e.Owner != nil {
			nf.Owner = *e.Owner
		}
		errs = append(errs, nf)
	case http.StatusServiceUnavailable:
		errs = append(errs, actorflow.ErrUnavailable)
		if e.RetryAfter == 0 && e.fromRoute {
			errs = append(errs, actorflow.ErrRunReturned)
		}
	case http.StatusTemporaryRedirect:
		errs = append(errs, actorflow.ErrUnavailable)
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		if !e.fromRoute {
			errs = append(errs, actorflow.ErrUnavailable)
		}
	}
	if e.undecoded {
		errs = append(errs, actorflow.ErrUndecodableState)
	}
	return errs
}

// Get returns key's state and where it was answered (QueryInfo.Local is
// the owner's view: true). Its errors are those of actorflow.Get, through a
// *ResponseError (errors.Is(err, actorflow.ErrKeyNotFound), ...): the last
// temporary one's once WithRetryFor has passed; a transport error at the
// URL the Client was given is returned at once, unless the request timed
// out (WithAttemptTimeout); when ctx ends first, an error matching ctx's
// and actorflow.ErrUnavailable, as actorflow.Get's.
func (c *Client[S]) Get(ctx context.Context, key string) (*S, actorflow.QueryInfo, error) {
	first := c.url + "?key=" + url.QueryEscape(key)
	var deadline time.Time
	for {
		s, info, wait, err := c.round(ctx, first, key)
		if wait == 0 {
			return s, info, err
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(c.cfg.retryFor)
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, info, err
		}
		// A fifth at most added at random, and one more round at the
		// budget's end rather than giving up before it.
		wait = min(wait+rand.N(wait/5+1), left)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, info, fmt.Errorf("httpapi: get %q: %w: %w (last: %w)", key, actorflow.ErrUnavailable, ctx.Err(), err)
		case <-t.C:
		}
	}
}

// errAttemptTimeout: a request ran out of WithAttemptTimeout.
var errAttemptTimeout = errors.New("no answer within the attempt's timeout")

// round asks first and follows its redirect, once. A wait above 0 says
// the answer is temporary: ask again after (at least) that long.
func (c *Client[S]) round(ctx context.Context, first, key string) (*S, actorflow.QueryInfo, time.Duration, error) {
	target := first
	for hop := 0; ; hop++ {
		ans, code, hdr, fromRoute, err := c.ask(ctx, target)
		info := infoOf(ans)
		switch {
		case ctx.Err() != nil:
			return nil, info, 0, fmt.Errorf("httpapi: get %q: %w: %w", key, actorflow.ErrUnavailable, ctx.Err())
		case errors.Is(err, errNotAnAnswer):
			return nil, info, 0, fmt.Errorf("httpapi: get %q: %w", key, err)
		case err != nil && target == first && !errors.Is(err, errAttemptTimeout):
			return nil, info, 0, fmt.Errorf("httpapi: get %q: %w", key, err)
		case err != nil:
			// The owner a worker redirected to does not answer (crashed or
			// paused, until the coordinator notices), or a request timed
			// out: ask again where we began.
			return nil, info, c.cfg.backoff, &ResponseError{URL: target, Message: err.Error(), key: key, cause: err}
		case code == http.StatusOK:
			return ans.State, info, 0, nil
		case code == http.StatusTemporaryRedirect && hop == 0:
			loc, lerr := location(target, hdr)
			if lerr == nil && loc == first {
				lerr = errors.New("a redirect to the URL asked")
			}
			if lerr != nil {
				return nil, info, 0, c.answerError(key, target, code, hdr, ans, fromRoute, lerr.Error())
			}
			target = loc
			continue
		}
		rerr := c.answerError(key, target, code, hdr, ans, fromRoute, "")
		switch {
		case code == http.StatusServiceUnavailable && rerr.RetryAfter > 0:
			return nil, info, max(rerr.RetryAfter, minBackoff), rerr
		case code == http.StatusServiceUnavailable, code == http.StatusTemporaryRedirect,
			!fromRoute && (code == http.StatusBadGateway || code == http.StatusGatewayTimeout):
			// A worker stopped (the next request may reach another
			// through a load balancer; a redirect's target stopped: where
			// we began may name a new owner), a second redirect (the
			// owner moved while asked), a proxy with no worker ready.
			return nil, info, c.cfg.backoff, rerr
		}
		return nil, info, 0, rerr
	}
}

// errNotAnAnswer: a 200 whose body is not a state (S is not the flow's
// state type, or the route is not a State route); not retried.
var errNotAnAnswer = errors.New("not a state answer")

// maxAnswerBytes bounds a State answer's body read: a state is a
// snapshot's size (the snapshot topic's max.message.bytes, 1 MiB by
// default), JSON-encoded.
const maxAnswerBytes = 64 << 20

// ask sends one GET to target, bounded by WithAttemptTimeout, and decodes
// its StateAnswer (zero, and fromRoute false, when the body is not one).
func (c *Client[S]) ask(ctx context.Context, target string) (ans StateAnswer[S], code int, hdr http.Header, fromRoute bool, err error) {
	actx := ctx
	if c.cfg.attempt > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeoutCause(ctx, c.cfg.attempt, errAttemptTimeout)
		defer cancel()
	}
	defer func() {
		if err != nil && ctx.Err() == nil && errors.Is(context.Cause(actx), errAttemptTimeout) {
			err = fmt.Errorf("%w (%s): %w", errAttemptTimeout, c.cfg.attempt, err)
		}
	}()
	req, err := http.NewRequestWithContext(actx, http.MethodGet, target, nil)
	if err != nil {
		return ans, 0, nil, false, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return ans, 0, nil, false, err
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxAnswerBytes)
	code, hdr = resp.StatusCode, resp.Header
	var raw json.RawMessage
	derr := json.NewDecoder(body).Decode(&raw)
	if derr == nil {
		var keys map[string]json.RawMessage // a StateAnswer names its key
		if json.Unmarshal(raw, &keys) == nil && keys["key"] != nil {
			fromRoute = true
			derr = json.Unmarshal(raw, &ans)
		}
	}
	_, _ = io.Copy(io.Discard, body) // the connection is reused once the body is read
	switch {
	case derr != nil && code == http.StatusOK:
		if ctx.Err() == nil && actx.Err() != nil {
			return StateAnswer[S]{}, code, hdr, fromRoute, derr // the body cut by the attempt's timeout
		}
		return StateAnswer[S]{}, code, hdr, fromRoute, fmt.Errorf("%w: %s answered 200 with %w", errNotAnAnswer, target, derr)
	case derr != nil:
		return StateAnswer[S]{}, code, hdr, false, nil
	case code == http.StatusOK && ans.State == nil:
		return ans, code, hdr, fromRoute, fmt.Errorf("%w: %s answered 200 without a state", errNotAnAnswer, target)
	}
	return ans, code, hdr, fromRoute, nil
}

func (c *Client[S]) answerError(key, target string, code int, hdr http.Header, ans StateAnswer[S], fromRoute bool, why string) *ResponseError {
	msg := ans.Error
	if msg == "" {
		msg = http.StatusText(code)
	}
	if why != "" {
		msg += ": " + why
	}
	return &ResponseError{URL: target, Code: code, Message: msg, Owner: ans.Owner, RetryAfter: retryAfter(hdr), key: key, info: ans.Info,
		fromRoute: fromRoute, undecoded: ans.UndecodableState}
}

// retryAfter is a Retry-After in seconds (the State route's form; an
// HTTP date is read as 1 s), 0 when there is none.
func retryAfter(h http.Header) time.Duration {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return max(time.Duration(s)*time.Second, time.Millisecond)
	}
	return time.Second
}

// location is a redirect's Location resolved against the URL that sent it.
func location(from string, h http.Header) (string, error) {
	loc := h.Get("Location")
	if loc == "" {
		return "", errors.New("a redirect without a Location")
	}
	base, err := url.Parse(from)
	if err != nil {
		return "", err
	}
	u, err := base.Parse(loc)
	if err != nil {
		return "", fmt.Errorf("a redirect to %q: %w", loc, err)
	}
	return u.String(), nil
}

func infoOf[S any](ans StateAnswer[S]) actorflow.QueryInfo {
	if ans.Info == nil {
		return actorflow.QueryInfo{Partition: -1, Offset: -1, PersistedOffset: -1, Committed: -1, HighWatermark: -1} // as Get's before an answer
	}
	return *ans.Info
}
