package podsource

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/clock"

	"github.com/berth-dev/berth/internal/atomicfile"
	"github.com/berth-dev/berth/internal/quarantine"
)

// StoreDirName is the store's directory in berth's root dir; <root>/pods
// holds the pods' volumes.
const StoreDirName = "local-pods"

// Applied is what Store.Apply did, in kubectl's words ("pod/web created").
type Applied string

const (
	PodCreated    Applied = "created"    // no pod had the name
	PodConfigured Applied = "configured" // the pod was replaced: new UID
	PodUnchanged  Applied = "unchanged"  // the same pod was already stored
)

// Store keeps the pods applied through berth's local API (the kubelet's
// ApiserverSource pods, for a node without an API server), one file each,
// written atomically, so that they survive restarts and kill -9. A file that
// cannot be trusted at start is quarantined and reported as an error of the
// snapshot until a pod of that name is applied or deleted, across restarts:
// the quarantined file itself is the record that the pod was lost, so a
// start that fails after moving it aside loses nothing.
type Store struct {
	dir      string
	nodeName string
	clk      clock.PassiveClock
	log      *slog.Logger
	// changed wakes Run after a change; one pending wake-up is enough.
	changed chan struct{}

	mu   sync.Mutex
	pods map[string]*v1.Pod       // by namespace/name, as decoded from its file
	errs map[string]ManifestError // by namespace/name: files quarantined and not yet acted on
	// aside holds, by namespace/name, the quarantined files that are still
	// reported: the user has neither applied nor deleted the name since.
	aside map[string][]string
}

// OpenStore opens the store in dir, creating it if missing, and loads every
// pod file. Stale temporary files of an interrupted write are removed; a
// file that fails verification is logged, quarantined and reported by
// Snapshot, and never stops the other pods from loading; so is a file
// quarantined at an earlier start that no one acted on. Only a directory
// that cannot be created or listed is an error (anything else in its place
// is moved aside). A nil logger discards.
func OpenStore(dir, nodeName string, clk clock.PassiveClock, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		dir:      filepath.Clean(dir),
		nodeName: nodeName,
		clk:      clk,
		log:      log.With("store", filepath.Clean(dir)),
		changed:  make(chan struct{}, 1),
		pods:     map[string]*v1.Pod{},
		errs:     map[string]ManifestError{},
		aside:    map[string][]string{},
	}
	// Owner-only: a pod's environment may hold credentials.
	moved, err := quarantine.MkdirAll(s.dir, 0o700, clk.Now())
	if err != nil {
		return nil, fmt.Errorf("local pod store: %w", err)
	}
	if moved != "" {
		s.log.Error("the local pod store's directory was not a directory; moved aside, starting empty", "movedTo", moved)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("local pod store: %w", err)
	}
	for _, e := range entries {
		s.load(e)
	}
	s.reportEarlierQuarantines()
	s.log.Info("local pods loaded", "pods", len(s.pods), "quarantined", len(s.errs))
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// load reads one directory entry at start.
func (s *Store) load(e fs.DirEntry) {
	path := filepath.Join(s.dir, e.Name())
	if strings.HasPrefix(e.Name(), ".") {
		// atomicfile's temporary files: a write that a crash cut short,
		// whose rename never happened.
		if strings.Contains(e.Name(), ".tmp-") && e.Type().IsRegular() {
			if err := os.Remove(path); err != nil {
				s.log.Warn("removing an interrupted write", "path", path, "err", err)
			} else {
				s.log.Info("removed an interrupted write", "path", path)
			}
		}
		return
	}
	if orig, _, ok := quarantine.Parse(e.Name()); ok {
		if namespace, name, ok := parseStoreFileName(orig); ok {
			k := namespace + "/" + name
			s.aside[k] = append(s.aside[k], path)
			return
		}
	}
	namespace, name, ok := parseStoreFileName(e.Name())
	switch {
	case !ok && strings.Contains(e.Name(), storeFileExt+quarantine.Infix):
		return // set aside and acted on (forgotten); kept as evidence
	case !ok:
		s.log.Warn("ignoring a file the local pod store did not write", "path", path)
		return
	}
	pod, err := s.readFile(path, namespace, name)
	if err == nil {
		s.pods[namespace+"/"+name] = pod
		return
	}
	k := namespace + "/" + name
	s.log.Error("local pod file cannot be trusted; quarantining it", "path", path, "pod", k, "err", err)
	if to, qerr := quarantine.Move(path, s.clk.Now()); qerr != nil {
		s.log.Error("quarantining a local pod file failed; it stays ignored", "path", path, "err", qerr)
		err = fmt.Errorf("%w (not quarantined: %v)", err, qerr)
	} else {
		err = fmt.Errorf("%w (quarantined as %s)", err, to)
		s.aside[k] = append(s.aside[k], to)
	}
	s.errs[k] = ManifestError{Path: path, Namespace: namespace, Name: name, Err: err}
}

// reportEarlierQuarantines reports the pods whose files an earlier start
// quarantined, unless a pod of the name has been stored since: each is
// reported with its latest quarantined file and the reason, read again.
func (s *Store) reportEarlierQuarantines() {
	for k, paths := range s.aside {
		if _, ok := s.pods[k]; ok {
			continue // applied again since; the evidence stays as it is
		}
		if _, ok := s.errs[k]; ok {
			continue // quarantined at this start, with its reason
		}
		latest := slices.MaxFunc(paths, compareQuarantined)
		namespace, name, _ := strings.Cut(k, "/")
		err := s.verify(latest, namespace, name)
		if err == nil {
			// A newer berth may trust what an older one did not; the
			// user decides still.
			err = errors.New("set aside at an earlier start")
		}
		err = fmt.Errorf("%w (quarantined as %s)", err, latest)
		s.log.Error("a local pod was quarantined at an earlier start and is not run; apply it again or delete it",
			"pod", k, "file", latest, "err", err)
		s.errs[k] = ManifestError{Path: filepath.Join(s.dir, storeFileName(namespace, name)), Namespace: namespace, Name: name, Err: err}
	}
}

// compareQuarantined orders two quarantined files of one name by when they
// were set aside, and by the counter of those set aside at one instant.
func compareQuarantined(a, b string) int {
	_, ta, _ := quarantine.Parse(filepath.Base(a))
	_, tb, _ := quarantine.Parse(filepath.Base(b))
	return cmp.Or(ta.Compare(tb), cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}

// verify gives the reason a quarantined file is not trusted, as when it
// was set aside. It is verified as the file of namespace/name that it was.
func (s *Store) verify(path, namespace, name string) error {
	_, err := s.readFile(path, namespace, name)
	return err
}

// readFile reads and verifies the file of namespace/name at path.
func (s *Store) readFile(path, namespace, name string) (*v1.Pod, error) {
	data, err := quarantine.ReadFile(path)
	if nr := (*quarantine.NotRegularError)(nil); errors.As(err, &nr) {
		// The report names the file already.
		return nil, fmt.Errorf("is a %s, not a regular file", quarantine.TypeName(nr.Type))
	}
	if err != nil {
		return nil, err
	}
	return decodeRecord(data, namespace, name, s.nodeName)
}

// forget marks the quarantined files of k as acted on, durably: the user
// applied or deleted the name, and a restart must not report them again.
// The files stay, renamed, as evidence. Called with s.mu held.
func (s *Store) forget(k string) error {
	var errs []error
	for _, p := range s.aside[k] {
		if err := os.Rename(p, p+forgottenSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(s.aside[k]) > 0 {
		errs = append(errs, syncDir(s.dir))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("forgetting the quarantined files of %s: %w", k, err)
	}
	delete(s.aside, k)
	return nil
}

// Apply stores a pod from DecodeAPIPods: a new name is created, the same
// pod is left alone (its UID kept), and a changed pod replaces the stored
// one under a fresh UID, which makes the sync loop kill the old pod and
// start the new, as for an edited manifest. The file is durable when Apply
// returns. It returns the pod as stored.
func (s *Store) Apply(pod *v1.Pod) (*v1.Pod, Applied, error) {
	k := pod.Namespace + "/" + pod.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.pods[k]
	if old != nil && samePod(old, pod) {
		return old.DeepCopy(), PodUnchanged, nil
	}
	next := pod.DeepCopy()
	next.UID = uuid.NewUUID()
	next.CreationTimestamp = metav1.NewTime(s.clk.Now())
	if old != nil && ResizeOnly(old, pod) {
		// Resized in place, as the resize subresource does: the same pod,
		// a new generation.
		next.UID, next.CreationTimestamp = old.UID, old.CreationTimestamp
		next.Generation = max(old.Generation, 1) + 1
		// The sync loop tells a new version of a pod by its
		// resourceVersion (SameContent).
		next.ResourceVersion = strconv.FormatInt(next.Generation, 10)
	}
	data, err := encodeRecord(next)
	if err != nil {
		return nil, "", err
	}
	// Keep what a restart would read, and never write what it would refuse.
	stored, err := decodeRecord(data, pod.Namespace, pod.Name, s.nodeName)
	if err != nil {
		return nil, "", fmt.Errorf("pod %s would not read back: %w", k, err)
	}
	path := filepath.Join(s.dir, storeFileName(pod.Namespace, pod.Name))
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return nil, "", fmt.Errorf("storing pod %s: %w", k, err)
	}
	s.pods[k] = stored
	delete(s.errs, k)
	if err := s.forget(k); err != nil {
		// The stored pod wins over its quarantined files at a restart.
		s.log.Warn("the pod is stored; its quarantined files stay as they are", "pod", k, "err", err)
	}
	s.notify()
	applied := PodCreated
	if old != nil {
		applied = PodConfigured
	}
	s.log.Info("local pod stored", "pod", k, "uid", stored.UID, "result", applied)
	return stored.DeepCopy(), applied, nil
}

// Delete removes a pod from the store and returns it. Deleting the name of a
// quarantined file clears its error and returns a nil pod. A name the store
// does not have is an error wrapping fs.ErrNotExist.
func (s *Store) Delete(namespace, name string) (*v1.Pod, error) {
	k := namespace + "/" + name
	s.mu.Lock()
	defer s.mu.Unlock()
	pod, ok := s.pods[k]
	if !ok {
		if _, broken := s.errs[k]; broken {
			if err := s.forget(k); err != nil {
				return nil, fmt.Errorf("deleting pod %s: %w", k, err)
			}
			delete(s.errs, k)
			s.notify()
			s.log.Info("quarantined local pod forgotten", "pod", k)
			return nil, nil
		}
		return nil, fmt.Errorf("pod %s: %w", k, fs.ErrNotExist)
	}
	if err := removeFile(filepath.Join(s.dir, storeFileName(namespace, name))); err != nil {
		return nil, fmt.Errorf("deleting pod %s: %w", k, err)
	}
	if err := s.forget(k); err != nil {
		s.log.Warn("the pod is deleted; its quarantined files may be reported again after a restart", "pod", k, "err", err)
	}
	delete(s.pods, k)
	s.notify()
	s.log.Info("local pod deleted", "pod", k, "uid", pod.UID)
	return pod.DeepCopy(), nil
}

// Snapshot returns the stored pods and the quarantined files' errors. The
// caller owns it.
func (s *Store) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	var snap Snapshot
	for _, p := range s.pods {
		snap.Pods = append(snap.Pods, p.DeepCopy())
	}
	for _, e := range s.errs {
		snap.Errors = append(snap.Errors, e)
	}
	slices.SortFunc(snap.Pods, func(a, b *v1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	slices.SortFunc(snap.Errors, func(a, b ManifestError) int { return strings.Compare(a.Path, b.Path) })
	return snap
}

// Run sends a Snapshot on out at start and after every change, at once.
// Only the newest undelivered snapshot is kept. It returns when ctx is
// done and does not close out. One Run per Store.
func (s *Store) Run(ctx context.Context, out chan<- Snapshot) {
	snap, pending := s.Snapshot(), true
	for {
		var send chan<- Snapshot
		if pending {
			send = out
		}
		select {
		case <-ctx.Done():
			return
		case <-s.changed:
			snap, pending = s.Snapshot(), true
		case send <- snap:
			pending = false
		}
	}
}

func (s *Store) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// samePod reports whether applying want over stored changes nothing: the
// same metadata and spec once the fields the store sets are set aside.
// Both went through the same defaulting, so a field written out with its
// default value is no change.
func samePod(stored, want *v1.Pod) bool {
	a, b := stored.DeepCopy(), want.DeepCopy()
	for _, p := range []*v1.Pod{a, b} {
		p.UID = ""
		p.CreationTimestamp = metav1.Time{}
		p.Status = v1.PodStatus{}
		// Set by a resize in place (ResizeOnly).
		p.Generation, p.ResourceVersion = 0, ""
	}
	return apiequality.Semantic.DeepEqual(a, b)
}
