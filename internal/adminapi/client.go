package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxErrorText is how much of an answer that is not JSON an error shows.
const maxErrorText = 4 << 10

// Client talks to the admin API on one socket.
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client for the socket at socketPath. Every call takes
// its deadline from its context.
func NewClient(socketPath string) *Client {
	transport := &http.Transport{
		// One call per command: no idle connection outlives it.
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socketPath)
		},
	}
	return &Client{socket: socketPath, http: &http.Client{Transport: transport}}
}

// Apply sends a body of one or more pods (YAML or JSON) to create or
// replace them. The response has each pod's result, refused pods included;
// the error is for a request that failed as a whole: an
// *apierrors.StatusError when berth refused it.
func (c *Client) Apply(ctx context.Context, body []byte) (*ApplyResponse, error) {
	code, data, err := c.do(ctx, http.MethodPost, "/pods", body)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		if err := statusError(code, data); err != nil {
			return nil, err
		}
	}
	var resp ApplyResponse
	if err := json.Unmarshal(data, &resp); err != nil || (code != http.StatusOK && len(resp.Pods) == 0) {
		return nil, unexpected(code, data)
	}
	return &resp, nil
}

// Delete deletes an applied pod and returns berth's Status of success; a
// refusal (not found, a static pod) is an *apierrors.StatusError.
func (c *Client) Delete(ctx context.Context, namespace, name string) (*metav1.Status, error) {
	code, data, err := c.do(ctx, http.MethodDelete, "/pods/"+url.PathEscape(namespace)+"/"+url.PathEscape(name), nil)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		if err := statusError(code, data); err != nil {
			return nil, err
		}
		return nil, unexpected(code, data)
	}
	var st metav1.Status
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, unexpected(code, data)
	}
	return &st, nil
}

func (c *Client) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	// The host is a placeholder: the transport dials the socket.
	req, err := http.NewRequestWithContext(ctx, method, "http://berth"+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/yaml")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// The URL is a placeholder and the dial error repeats the path:
		// say what failed once.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			err = oe.Err
		}
		return 0, nil, fmt.Errorf("cannot reach berth at %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return 0, nil, fmt.Errorf("reading berth's answer from %s: %w", c.socket, err)
	}
	return resp.StatusCode, data, nil
}

// statusError returns the metav1.Status in data as an error, or nil when
// data is no Status.
func statusError(code int, data []byte) error {
	var st metav1.Status
	if json.Unmarshal(data, &st) != nil || st.Kind != "Status" {
		return nil
	}
	if st.Code == 0 {
		st.Code = int32(code)
	}
	return &apierrors.StatusError{ErrStatus: st}
}

func unexpected(code int, data []byte) error {
	text := strings.TrimSpace(string(data))
	if len(text) > maxErrorText {
		text = text[:maxErrorText] + "..."
	}
	return fmt.Errorf("unexpected answer from berth: %d %s: %s", code, http.StatusText(code), text)
}
