package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-dev/berth/internal/admission"
)

const (
	defaultServer = "http://127.0.0.1:10255"
	serverEnv     = "BERTH_SERVER"
	// requestTimeout bounds the API calls that are not streams.
	requestTimeout = 10 * time.Second
	// maxErrorBody is how much of an error response is shown.
	maxErrorBody = 4 << 10
)

// addServerFlag registers --server, whose default comes from BERTH_SERVER.
func addServerFlag(fs *pflag.FlagSet, dst *string) {
	fs.StringVar(dst, "server", defaultServerAddress(), "address of berth's local API; $"+serverEnv+" sets the default")
}

// defaultServerAddress is $BERTH_SERVER, else defaultServer.
func defaultServerAddress() string {
	if s := os.Getenv(serverEnv); s != "" {
		return s
	}
	return defaultServer
}

// apiClient talks to berth's local read-only API, or, made by
// newSocketClient, to its admin socket.
type apiClient struct {
	base string
	// socket is the admin socket the client dials, "" for the TCP API.
	socket string
	http   *http.Client
}

// newSocketClient talks to berth's admin socket: the containers' logs are
// served there (to root) and on the secure port, not on the read-only port
// that any local user reaches.
func newSocketClient(socket string) *apiClient {
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}
	// The host is ignored: the transport dials the socket.
	return &apiClient{base: "http://berth", socket: socket, http: &http.Client{Transport: transport}}
}

// target names what a request went to, for messages.
func (c *apiClient) target(path string) string {
	if c.socket != "" {
		return c.socket + " " + path
	}
	return c.base + path
}

func newAPIClient(server string) *apiClient {
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	// No client timeout: log streams last as long as the container; each
	// call has a context instead.
	return &apiClient{base: strings.TrimSuffix(server, "/"), http: &http.Client{}}
}

// pods fetches /pods.
func (c *apiClient) pods(ctx context.Context) (*v1.PodList, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.get(ctx, "/pods")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("reading the pod list from %s: %w", c.base, err)
	}
	return &list, nil
}

// events fetches the events recorded for a pod name.
func (c *apiClient) events(ctx context.Context, namespace, pod string) (*v1.EventList, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.get(ctx, "/pods/"+url.PathEscape(namespace)+"/"+url.PathEscape(pod)+"/events")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list v1.EventList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("reading the events of pod %s/%s from %s: %w", namespace, pod, c.base, err)
	}
	return &list, nil
}

// errNoAdmission is admission's answer for a pod berth keeps no admission
// record of: one it does not want, or any pod of a berth too old to serve
// the record. Neither is a failure to describe the pod.
var errNoAdmission = errors.New("no admission record")

// admission fetches berth's admission decision about a pod; errNoAdmission
// when it has none.
func (c *apiClient) admission(ctx context.Context, namespace, pod string) (*admission.Result, error) {
	var r admission.Result
	err := c.getJSON(ctx, "/pods/"+url.PathEscape(namespace)+"/"+url.PathEscape(pod)+"/admission",
		"the admission of pod "+namespace+"/"+pod, &r)
	if apiErr := (*apiError)(nil); errors.As(err, &apiErr) && apiErr.status == http.StatusNotFound {
		return nil, errNoAdmission
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// logQuery is the kubelet's containerLogs query.
type logQuery struct {
	follow     bool
	previous   bool
	timestamps bool
	tailLines  int64 // negative: all
	// sinceSeconds, sinceTime (RFC 3339) and limitBytes are the kubelet's
	// options of those names; zero or empty when not set.
	sinceSeconds int64
	sinceTime    string
	limitBytes   int64
}

// logQueryFrom checks the flags of berth logs as kubectl checks its own and
// makes the query: --since is rounded up to whole seconds, --since-time
// must be an RFC 3339 time, at most one of them, and --limit-bytes is
// positive when given.
func logQueryFrom(q logQuery, since time.Duration, sinceSet, limitSet bool) (logQuery, error) {
	switch {
	case sinceSet && q.sinceTime != "":
		return q, fmt.Errorf("--since and --since-time: at most one may be given")
	case sinceSet && since <= 0:
		return q, fmt.Errorf("--since %s: must be greater than 0", since)
	case limitSet && q.limitBytes <= 0:
		return q, fmt.Errorf("--limit-bytes %d: must be greater than 0", q.limitBytes)
	}
	if q.sinceTime != "" {
		t, err := time.Parse(time.RFC3339, q.sinceTime)
		if err != nil {
			return q, fmt.Errorf("--since-time %q: not an RFC 3339 time: %w", q.sinceTime, err)
		}
		q.sinceTime = t.Format(time.RFC3339)
	}
	if sinceSet {
		q.sinceSeconds = int64((since + time.Second - 1) / time.Second)
	}
	return q, nil
}

func (q logQuery) values() url.Values {
	v := url.Values{}
	if q.follow {
		v.Set("follow", "true")
	}
	if q.previous {
		v.Set("previous", "true")
	}
	if q.timestamps {
		v.Set("timestamps", "true")
	}
	if q.tailLines >= 0 {
		v.Set("tailLines", strconv.FormatInt(q.tailLines, 10))
	}
	if q.sinceSeconds > 0 {
		v.Set("sinceSeconds", strconv.FormatInt(q.sinceSeconds, 10))
	}
	if q.sinceTime != "" {
		v.Set("sinceTime", q.sinceTime)
	}
	if q.limitBytes > 0 {
		v.Set("limitBytes", strconv.FormatInt(q.limitBytes, 10))
	}
	return v
}

// containerLogs copies a container's log to w until the server ends it or
// ctx is done.
func (c *apiClient) containerLogs(ctx context.Context, w io.Writer, namespace, pod, container string, q logQuery) error {
	path := "/containerLogs/" + url.PathEscape(namespace) + "/" + url.PathEscape(pod) + "/" + url.PathEscape(container)
	if query := q.values().Encode(); query != "" {
		path += "?" + query
	}
	resp, err := c.get(ctx, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("reading the log of %s/%s/%s: %w", namespace, pod, container, err)
	}
	return nil
}

// apiError is an answer other than 200, kept with its status so that a
// caller can tell "not found" from a failure.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

// get issues a GET and turns every answer but 200 into an *apiError
// carrying the server's message.
func (c *apiClient) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", c.base, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		if c.socket != "" {
			return nil, withExitCode(exitUnreachable,
				fmt.Errorf("cannot reach berth's admin socket %s (is `berth run` running, and are you root? see --root-dir or $%s): %w",
					c.socket, rootDirEnv, err))
		}
		return nil, withExitCode(exitUnreachable,
			fmt.Errorf("cannot reach berth's local API at %s (is `berth run` running? see --server or $%s): %w", c.base, serverEnv, err))
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	msg := strings.TrimSpace(string(body))
	e := &apiError{status: resp.StatusCode, msg: msg}
	switch {
	case (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest) && msg != "":
		// The server's own words suffice for what it refused by name.
	case msg != "":
		e.msg = fmt.Sprintf("%s: %s: %s", c.target(path), resp.Status, msg)
	default:
		e.msg = fmt.Sprintf("%s: %s", c.target(path), resp.Status)
	}
	return nil, e
}
