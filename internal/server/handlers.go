package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/berth-dev/berth/internal/images"
	"github.com/berth-dev/berth/internal/logs"
)

// pods answers like the kubelet's read-only /pods: a v1 PodList.
func (s *Server) pods(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, podList(s.src.Pods()))
}

// podEvents answers with a pod's events as a v1 EventList, what the API
// server lists for an involvedObject. The events are kept by pod name, so a
// pod that is gone still answers while its events are kept; a name with
// neither a pod nor events is a 404.
func (s *Server) podEvents(w http.ResponseWriter, r *http.Request) {
	namespace, podName := r.PathValue("namespace"), r.PathValue("pod")
	events := s.src.Events(namespace, podName)
	if len(events) == 0 && !hasPod(s.src.Pods(), namespace, podName) {
		http.Error(w, fmt.Sprintf("pod %s/%s not found", namespace, podName), http.StatusNotFound)
		return
	}
	s.writeEvents(w, r, events)
}

// podAdmission answers with the admission decision about a pod: the
// checks it failed and, for a critical pod, the preemption it caused.
func (s *Server) podAdmission(w http.ResponseWriter, r *http.Request) {
	namespace, podName := r.PathValue("namespace"), r.PathValue("pod")
	res, ok := s.src.Admission(namespace, podName)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %s/%s not found", namespace, podName), http.StatusNotFound)
		return
	}
	s.writeJSON(w, r, res)
}

// events answers with every event kept, about pods and the node, least
// recently seen first: what `kubectl get events -A` lists.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	s.writeEvents(w, r, s.src.AllEvents())
}

// nodeEvents answers with the node's own events as a v1 EventList.
func (s *Server) nodeEvents(w http.ResponseWriter, r *http.Request) {
	s.writeEvents(w, r, s.src.NodeEvents())
}

func (s *Server) writeEvents(w http.ResponseWriter, r *http.Request, events []v1.Event) {
	if events == nil {
		events = []v1.Event{}
	}
	s.writeJSON(w, r, &v1.EventList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"},
		Items:    events,
	})
}

// devices answers with the device plugins' resources and allocations.
func (s *Server) devices(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, s.src.Devices())
}

// images answers with every image and why the GC would or would not remove
// it; 503 while the runtime cannot be asked.
func (s *Server) images(w http.ResponseWriter, r *http.Request) {
	list, err := s.src.Images()
	if err != nil {
		http.Error(w, "listing images: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	if list == nil {
		list = []images.ImageStatus{}
	}
	s.writeJSON(w, r, list)
}

func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(v); err != nil {
		s.log.Debug("writing a response", "path", r.URL.Path, "err", err)
	}
}

func hasPod(pods []v1.Pod, namespace, name string) bool {
	for i := range pods {
		if pods[i].Namespace == namespace && pods[i].Name == name {
			return true
		}
	}
	return false
}

func podList(pods []v1.Pod) *v1.PodList {
	if pods == nil {
		// An empty list is "items": [], as the API server writes it.
		pods = []v1.Pod{}
	}
	return &v1.PodList{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		Items:    pods,
	}
}

// LogSource is what serving container logs needs of berth: its pods, and
// their containers' log files.
type LogSource interface {
	Pods() []v1.Pod
	ContainerLog(namespace, pod, container string, previous bool) (path string, containerID string, err error)
	ContainerRunning(containerID string) bool
}

// NewLogsHandler serves GET /containerLogs/{namespace}/{pod}/{container}
// as the kubelet does, for the secure API and the admin socket: the places
// whose callers are authenticated, or root.
func NewLogsHandler(src LogSource, log *slog.Logger) http.Handler {
	h := &logsHandler{src: src, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /containerLogs/{namespace}/{pod}/{container}", h.containerLogs)
	return mux
}

type logsHandler struct {
	src LogSource
	log *slog.Logger
}

// containerLogs serves a container's log as text, like the kubelet's
// /containerLogs/{namespace}/{pod}/{container}.
func (s *logsHandler) containerLogs(w http.ResponseWriter, r *http.Request) {
	namespace, podName, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	opts, err := parseLogOptions(r.URL.Query())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := checkContainer(s.src.Pods(), namespace, podName, container); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	path, containerID, err := s.src.ContainerLog(namespace, podName, container, opts.Previous)
	if err != nil {
		http.Error(w, err.Error(), statusFor(err))
		return
	}

	tail := -1
	if opts.TailLines != nil {
		tail = int(*opts.TailLines)
	}
	out := &responseWriter{w: w, rc: http.NewResponseController(w)}
	if opts.Follow {
		// A followed log lasts as long as the container: the server's
		// write timeout, meant for answers, would cut it.
		_ = out.rc.SetWriteDeadline(time.Time{})
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	err = logs.Copy(r.Context(), out, path, logs.Options{
		Follow:     opts.Follow,
		Timestamps: opts.Timestamps,
		TailLines:  tail,
		Since:      logSince(opts, time.Now()),
		LimitBytes: ptr.Deref(opts.LimitBytes, 0),
		Stop:       func() bool { return !s.src.ContainerRunning(containerID) },
		Log:        s.log,
	})
	switch {
	case err == nil, r.Context().Err() != nil:
		// Done, or the client (or the server) went away.
	case !out.wrote:
		w.Header().Del("X-Content-Type-Options")
		http.Error(w, err.Error(), statusFor(err))
	default:
		// The status is sent; all that can be done is to cut the stream.
		s.log.Warn("streaming container log", "namespace", namespace, "pod", podName, "container", container, "err", err)
	}
}

func statusFor(err error) int {
	if errors.Is(err, fs.ErrNotExist) {
		return http.StatusNotFound
	}
	return http.StatusInternalServerError
}

// checkContainer says clearly which of pod or container is unknown.
func checkContainer(pods []v1.Pod, namespace, podName, container string) error {
	for i := range pods {
		pod := &pods[i]
		if pod.Namespace != namespace || pod.Name != podName {
			continue
		}
		names := containerNames(pod)
		for _, name := range names {
			if name == container {
				return nil
			}
		}
		return fmt.Errorf("container %q not found in pod %s/%s; its containers are: %s",
			container, namespace, podName, strings.Join(names, ", "))
	}
	return fmt.Errorf("pod %s/%s not found", namespace, podName)
}

// containerNames lists every container of the pod that can have a log, in
// the order they run.
func containerNames(pod *v1.Pod) []string {
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name)
	}
	return names
}

// parseLogOptions reads the kubelet's log query parameters into the API's
// own PodLogOptions. Booleans are read as the API server reads them: absent
// is false, "false" or "0" is false, and anything else, even an empty value,
// is true. Options berth cannot honour yet are refused rather than ignored.
func parseLogOptions(q url.Values) (*v1.PodLogOptions, error) {
	// Streams split by stdout/stderr (PodLogsQuerySplitStreams) are not
	// read apart yet.
	if q.Has("stream") {
		return nil, fmt.Errorf("stream is not supported yet")
	}
	opts := &v1.PodLogOptions{
		Follow:     queryBool(q, "follow"),
		Previous:   queryBool(q, "previous"),
		Timestamps: queryBool(q, "timestamps"),
	}
	var err error
	if opts.TailLines, err = queryInt(q, "tailLines", 0); err != nil {
		return nil, err
	}
	if opts.SinceSeconds, err = queryInt(q, "sinceSeconds", 1); err != nil {
		return nil, err
	}
	if opts.LimitBytes, err = queryInt(q, "limitBytes", 1); err != nil {
		return nil, err
	}
	if q.Has("sinceTime") {
		t, err := time.Parse(time.RFC3339, q.Get("sinceTime"))
		if err != nil {
			return nil, fmt.Errorf("sinceTime: %q is not an RFC 3339 time", q.Get("sinceTime"))
		}
		since := metav1.NewTime(t)
		opts.SinceTime = &since
	}
	if opts.SinceSeconds != nil && opts.SinceTime != nil {
		return nil, fmt.Errorf("sinceSeconds and sinceTime: at most one may be set")
	}
	return opts, nil
}

// queryInt reads an integer parameter that must be at least least, or nil
// when it is absent.
func queryInt(q url.Values, name string, least int64) (*int64, error) {
	if !q.Has(name) {
		return nil, nil
	}
	n, err := strconv.ParseInt(q.Get(name), 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%s: %q is not a number", name, q.Get(name))
	}
	if n < least {
		return nil, fmt.Errorf("%s: %d must be greater than or equal to %d", name, n, least)
	}
	return &n, nil
}

// logSince is the time before which log lines are left out, as the
// kubelet's newLogOptions computes it from sinceSeconds or sinceTime; zero
// for all of them.
func logSince(opts *v1.PodLogOptions, now time.Time) time.Time {
	switch {
	case opts.SinceSeconds != nil:
		return now.Add(-time.Duration(*opts.SinceSeconds) * time.Second)
	case opts.SinceTime != nil:
		return opts.SinceTime.Time
	}
	return time.Time{}
}

func queryBool(q url.Values, name string) bool {
	if !q.Has(name) {
		return false
	}
	switch strings.ToLower(q.Get(name)) {
	case "false", "0":
		return false
	}
	return true
}

// responseWriter flushes every write, so a followed log reaches the client
// as it is written (logs.Copy already batches what is available), and
// remembers whether anything was sent, after which the status is fixed.
type responseWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	wrote bool
}

func (rw *responseWriter) Write(p []byte) (int, error) {
	n, err := rw.w.Write(p)
	rw.wrote = rw.wrote || n > 0
	if err != nil {
		return n, err
	}
	if err := rw.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return n, err
	}
	return n, nil
}
