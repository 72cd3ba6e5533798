package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-dev/berth/internal/podsource"
)

const (
	// maxBodyBytes bounds a request body. The API server takes 3 MiB per
	// object; a file of several pods gets some room on top.
	maxBodyBytes = 8 << 20
	// staticWait bounds the wait for the manifest directory's first read,
	// which the conflict check needs; it takes milliseconds after start.
	staticWait = 10 * time.Second
)

// Store keeps the applied pods: podsource.Store.
type Store interface {
	Apply(pod *v1.Pod) (*v1.Pod, podsource.Applied, error)
	Delete(namespace, name string) (*v1.Pod, error)
}

// StaticPods tells the static pods of the manifest directory:
// podsource.Merge.
type StaticPods interface {
	IsStatic(ctx context.Context, namespace, name string) (bool, error)
}

type handler struct {
	store    Store
	static   StaticPods
	nodeName string
	log      *slog.Logger
}

// Option adds to what NewHandler serves.
type Option func(*http.ServeMux)

// WithStreaming serves exec and attach (server.NewStreamingHandler) under
// /exec/ and /attach/: the socket is root's alone, as running commands in
// containers must be.
func WithStreaming(streams http.Handler) Option {
	return func(mux *http.ServeMux) {
		mux.Handle("/exec/", streams)
		mux.Handle("/attach/", streams)
	}
}

// WithLogs serves the containers' logs (server.NewLogsHandler) under
// /containerLogs/, for `berth logs`: the log files are root's, and so is
// the socket, while the read-only TCP port serves no logs.
func WithLogs(logs http.Handler) Option {
	return func(mux *http.ServeMux) {
		mux.Handle("/containerLogs/", logs)
	}
}

// WithProfiling serves Go's profiles (net/http/pprof) under /debug/pprof/,
// as the kubelet's enableProfilingHandler does, but only here: a CPU
// profile stalls nothing, yet what it reveals is root's business.
func WithProfiling() Option {
	return func(mux *http.ServeMux) {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
}

// NewHandler serves POST /pods (create or replace the pods of a YAML or
// JSON body, each document on its own) and DELETE
// /pods/{namespace}/{name}, and what the options add. A name that a static
// pod uses is refused: the manifest directory owns it. A nil logger
// discards.
func NewHandler(store Store, static StaticPods, nodeName string, log *slog.Logger, opts ...Option) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler{store: store, static: static, nodeName: nodeName, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /pods", h.apply)
	mux.HandleFunc("DELETE /pods/{namespace}/{name}", h.delete)
	for _, opt := range opts {
		opt(mux)
	}
	return mux
}

func (h *handler) apply(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		h.writeStatus(w, r, apierrors.NewRequestEntityTooLargeError(
			fmt.Sprintf("the request body is larger than %d bytes", tooLarge.Limit)))
		return
	case err != nil:
		h.writeStatus(w, r, apierrors.NewBadRequest("reading the request body: "+err.Error()))
		return
	}
	docs := podsource.DecodeAPIPods(body, h.nodeName)
	if len(docs) == 0 {
		h.writeStatus(w, r, apierrors.NewBadRequest("the request body holds no pod"))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), staticWait)
	defer cancel()
	resp := ApplyResponse{Pods: make([]PodResult, 0, len(docs))}
	code := http.StatusOK
	for _, d := range docs {
		res := h.applyOne(ctx, d)
		if res.Error != nil && code == http.StatusOK {
			code = int(res.Error.Code)
		}
		resp.Pods = append(resp.Pods, res)
	}
	h.writeJSON(w, r, code, resp)
}

// applyOne applies one document, or says why not.
func (h *handler) applyOne(ctx context.Context, d podsource.APIDocument) PodResult {
	res := PodResult{Namespace: d.Namespace, Name: d.Name, Line: d.Line}
	fail := func(err *apierrors.StatusError) PodResult {
		st := status(err)
		res.Error = &st
		return res
	}
	if d.Err != nil {
		var fe podsource.FieldErrors
		if errors.As(d.Err, &fe) {
			return fail(apierrors.NewInvalid(v1.SchemeGroupVersion.WithKind("Pod").GroupKind(), d.Name, field.ErrorList(fe)))
		}
		return fail(apierrors.NewBadRequest(d.Err.Error()))
	}
	static, err := h.static.IsStatic(ctx, d.Namespace, d.Name)
	if err != nil {
		return fail(apierrors.NewServiceUnavailable(err.Error()))
	}
	if static {
		return fail(apierrors.NewConflict(v1.Resource("pods"), d.Name, fmt.Errorf(
			"static pod %s/%s of the manifest directory has this name; choose another", d.Namespace, d.Name)))
	}
	pod, applied, err := h.store.Apply(d.Pod)
	if err != nil {
		h.log.Error("storing an applied pod failed", "pod", d.Namespace+"/"+d.Name, "err", err)
		return fail(apierrors.NewInternalError(err))
	}
	res.UID, res.Result = pod.UID, applied
	return res
}

func (h *handler) delete(w http.ResponseWriter, r *http.Request) {
	namespace, name := r.PathValue("namespace"), r.PathValue("name")
	pod, err := h.store.Delete(namespace, name)
	switch {
	case err == nil:
		st := metav1.Status{
			Status:  metav1.StatusSuccess,
			Code:    http.StatusOK,
			Message: fmt.Sprintf("pod %q deleted", name),
			Details: &metav1.StatusDetails{Name: name, Kind: "pods"},
		}
		if pod != nil {
			st.Details.UID = pod.UID
		}
		h.writeJSON(w, r, http.StatusOK, withTypeMeta(st))
	case errors.Is(err, fs.ErrNotExist):
		ctx, cancel := context.WithTimeout(r.Context(), staticWait)
		defer cancel()
		static, serr := h.static.IsStatic(ctx, namespace, name)
		switch {
		case serr != nil:
			h.writeStatus(w, r, apierrors.NewServiceUnavailable(serr.Error()))
		case static:
			h.writeStatus(w, r, apierrors.NewConflict(v1.Resource("pods"), name, fmt.Errorf(
				"pod %s/%s is a static pod of the manifest directory; delete its manifest instead", namespace, name)))
		default:
			nf := apierrors.NewNotFound(v1.Resource("pods"), name)
			nf.ErrStatus.Message = fmt.Sprintf("pods %q not found in namespace %q", name, namespace)
			h.writeStatus(w, r, nf)
		}
	default:
		h.log.Error("deleting an applied pod failed", "pod", namespace+"/"+name, "err", err)
		h.writeStatus(w, r, apierrors.NewInternalError(err))
	}
}

func (h *handler) writeStatus(w http.ResponseWriter, r *http.Request, err *apierrors.StatusError) {
	st := status(err)
	h.writeJSON(w, r, int(st.Code), st)
}

func (h *handler) writeJSON(w http.ResponseWriter, r *http.Request, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		h.log.Debug("writing a response", "path", r.URL.Path, "err", err)
	}
}

// status is the error's Status as the API server writes it, with its kind.
func status(err *apierrors.StatusError) metav1.Status { return withTypeMeta(err.ErrStatus) }

func withTypeMeta(st metav1.Status) metav1.Status {
	st.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}
	return st
}
