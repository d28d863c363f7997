package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/actorflow/actorflow"
)

// Client reads keys' states from the workers' State routes over HTTP, as
// actorflow.Get does in process, doing what the State route asks of a
// client: it follows a 307 to the key's owner, and asks again — at the URL
// it was given, not the redirect's — after a 503 with Retry-After (a
// partition moving, recovering, catching up) and after a redirect's target
// failed (a crashed owner is named until the group coordinator notices:
// its endpoint refuses connections for up to the group's session
// timeout), for up to WithRetryFor.
//
// A Client is safe for concurrent use.
type Client[S any] struct {
	url      string
	http     *http.Client
	retryFor time.Duration
	backoff  time.Duration
}

// ClientOption configures a Client.
type ClientOption func(*clientConfig)

type clientConfig struct {
	http     *http.Client
	retryFor time.Duration
	backoff  time.Duration
}

// WithHTTPClient is the client the requests go through (its Transport,
// Timeout, Jar); its CheckRedirect is not used: the Client follows the
// State route's redirect itself. Default http.DefaultClient, which has no
// timeout: Get's ctx bounds each call.
func WithHTTPClient(c *http.Client) ClientOption {
	return func(cc *clientConfig) {
		if c != nil {
			cc.http = c
		}
	}
}

// WithRetryFor bounds how long Get keeps asking again while the answer is
// temporary (a 503 with Retry-After, a redirect's target failing); past
// it, Get returns the last answer's error (matching
// actorflow.ErrUnavailable). Default 1 minute: longer than a group's
// default session timeout (45 s), within which a crashed owner is still
// named. 0: no retry. Get's ctx ending first ends it too.
func WithRetryFor(d time.Duration) ClientOption {
	return func(cc *clientConfig) { cc.retryFor = max(d, 0) }
}

// WithRetryBackoff is the wait before asking again after a redirect's
// target failed (a 503 names its own wait in Retry-After). Default 500 ms.
func WithRetryBackoff(d time.Duration) ClientOption {
	return func(cc *clientConfig) { cc.backoff = max(d, 0) }
}

// NewClient is a Client of the State route at stateURL — an absolute
// http(s) URL without a query, e.g. "http://ledger:8080/state" (a load
// balancer in front of the workers, or any one worker: each redirects to
// the key's owner). It fails only on a stateURL it cannot use.
func NewClient[S any](stateURL string, opts ...ClientOption) (*Client[S], error) {
	u, err := url.Parse(stateURL)
	if err != nil {
		return nil, fmt.Errorf("httpapi: client of %q: %w", stateURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("httpapi: client of %q: want an absolute http(s) URL of the State route without a query", stateURL)
	}
	cc := clientConfig{http: http.DefaultClient, retryFor: time.Minute, backoff: 500 * time.Millisecond}
	for _, o := range opts {
		o(&cc)
	}
	hc := *cc.http // a copy: the redirect is the Client's to follow
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &Client[S]{url: u.String(), http: &hc, retryFor: cc.retryFor, backoff: cc.backoff}, nil
}

// ResponseError is Get's error for an answer other than a 200 (and for a
// 307 without a usable Location). It matches, with errors.Is and
// errors.As, what actorflow.Get would have returned on the worker:
// actorflow.ErrKeyNotFound for a 404; an *actorflow.NotOwnerError for a 421
// (the owner advertises no query endpoint); actorflow.ErrUnavailable for a
// 503, and also actorflow.ErrRunReturned when it came without Retry-After
// (that worker stopped: ask another); a 502, 503 or 504 whose body is not
// a State answer (a load balancer's or a proxy's: no worker ready behind
// it) matches actorflow.ErrUnavailable and is retried as one.
type ResponseError struct {
	URL  string // the URL that answered
	Code int    // its status code
	// Message is the body's error (StateAnswer.Error), or the status text
	// when the body was not a StateAnswer.
	Message string
	// Owner is the key's owner when the answer named one.
	Owner *actorflow.Member
	// RetryAfter is the answer's Retry-After, 0 when it had none.
	RetryAfter time.Duration
	key        string
	info       *actorflow.QueryInfo
	fromRoute  bool // the body was a StateAnswer: a State route answered
}

func (e *ResponseError) Error() string {
	return fmt.Sprintf("httpapi: %s answered %d: %s", e.URL, e.Code, e.Message)
}

// Unwrap is the actorflow error the answer stands for (none for a 400 or
// a 500: the body says what).
func (e *ResponseError) Unwrap() []error {
	switch e.Code {
	case http.StatusNotFound:
		return []error{actorflow.ErrKeyNotFound}
	case http.StatusMisdirectedRequest:
		nf := &actorflow.NotOwnerError{Key: e.key, Partition: -1}
		if e.info != nil {
			nf.Topic, nf.Partition = e.info.Topic, e.info.Partition
		}
		if e.Owner != nil {
			nf.Owner = *e.Owner
		}
		return []error{nf}
	case http.StatusBadGateway, http.StatusGatewayTimeout:
		if !e.fromRoute {
			return []error{actorflow.ErrUnavailable}
		}
	case http.StatusServiceUnavailable:
		if e.RetryAfter == 0 && e.fromRoute {
			return []error{actorflow.ErrUnavailable, actorflow.ErrRunReturned}
		}
		return []error{actorflow.ErrUnavailable}
	}
	return nil
}

// Get returns key's state and where it was answered (QueryInfo.Local is
// the owner's view: true). Its errors are those of actorflow.Get, through a
// *ResponseError (errors.Is(err, actorflow.ErrKeyNotFound), ...); a
// transport error at the URL the Client was given is returned as it is,
// not retried (the worker, or the load balancer, is not there); ctx's
// error when it ends first.
func (c *Client[S]) Get(ctx context.Context, key string) (*S, actorflow.QueryInfo, error) {
	first := c.url + "?key=" + url.QueryEscape(key)
	target := first
	var deadline time.Time
	for {
		ans, code, hdr, fromRoute, err := c.ask(ctx, target)
		var wait time.Duration
		switch {
		case ctx.Err() != nil:
			return nil, infoOf(ans), fmt.Errorf("httpapi: get %q: %w", key, ctx.Err())
		case err != nil && (target == first || errors.Is(err, errNotAnAnswer)):
			return nil, infoOf(ans), fmt.Errorf("httpapi: get %q: %w", key, err)
		case err != nil:
			// The owner a worker redirected to does not answer (crashed,
			// until the coordinator notices): ask again where we began.
			wait = max(c.backoff, time.Millisecond)
			err = &ResponseError{URL: target, Code: http.StatusServiceUnavailable, Message: "the key's owner did not answer: " + err.Error(),
				RetryAfter: wait, key: key}
		case code == http.StatusOK:
			return ans.State, infoOf(ans), nil
		case code == http.StatusTemporaryRedirect && target == first:
			loc, lerr := location(target, hdr)
			if lerr != nil {
				return nil, infoOf(ans), c.answerError(key, target, code, hdr, ans, fromRoute, lerr.Error())
			}
			target = loc
			continue
		default:
			rerr := c.answerError(key, target, code, hdr, ans, fromRoute, "")
			if code == http.StatusTemporaryRedirect || code == http.StatusServiceUnavailable && target != first ||
				!fromRoute && (code == http.StatusBadGateway || code == http.StatusServiceUnavailable || code == http.StatusGatewayTimeout) {
				// A second redirect (the State route redirects once), a
				// redirect's target unavailable or stopped, or a proxy with
				// no worker behind it ready: where we began may name a new
				// owner, or have a worker ready, by then.
				wait = max(rerr.RetryAfter, c.backoff)
			} else if code != http.StatusServiceUnavailable || rerr.RetryAfter == 0 {
				return nil, infoOf(ans), rerr
			} else {
				wait = rerr.RetryAfter
			}
			err = rerr
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(c.retryFor)
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, infoOf(ans), err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, infoOf(ans), fmt.Errorf("httpapi: get %q: %w (last: %w)", key, ctx.Err(), err)
		case <-t.C:
		}
		target = first
	}
}

// errNotAnAnswer: a 200 whose body is not a state (S is not the flow's
// state type, or the route is not a State route); not retried.
var errNotAnAnswer = errors.New("not a state answer")

// maxAnswerBytes bounds a State answer's body read: a state is a
// snapshot's size (the snapshot topic's max.message.bytes, 1 MiB by
// default), JSON-encoded.
const maxAnswerBytes = 64 << 20

// ask sends one GET to target and decodes its StateAnswer (zero, and
// fromRoute false, when the body is not one).
func (c *Client[S]) ask(ctx context.Context, target string) (ans StateAnswer[S], code int, hdr http.Header, fromRoute bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
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
	return &ResponseError{URL: target, Code: code, Message: msg, Owner: ans.Owner, RetryAfter: retryAfter(hdr), key: key, info: ans.Info, fromRoute: fromRoute}
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
		return actorflow.QueryInfo{Partition: -1, Offset: -1, PersistedOffset: -1}
	}
	return *ans.Info
}
