// Package dra prepares the devices of Dynamic Resource Allocation
// (resource.k8s.io) claims for the pods of this node, the way the
// kubelet's DRA manager (pkg/kubelet/cm/dra) does: before a pod's sandbox
// it calls NodePrepareResources of each driver its allocated
// ResourceClaims name, records the CDI devices the drivers return for the
// containers that reference the claims, and calls NodeUnprepareResources
// when the last pod using a claim is gone.
//
// The state (claims, the pods using them, their devices) is plain data
// owned by the Manager and changed only by the pure functions of state.go;
// the API server (ClaimGetter), the drivers (Plugins, the plugin manager's
// Handler for DRAPlugin) and the checkpoint file are edges. The checkpoint
// is written before PrepareResources returns and before a driver is
// called, so a restart neither prepares a claim again nor forgets one the
// driver may hold.
package dra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// ClaimGetter reads a ResourceClaim; in cluster mode the client-go
// clientset's ResourceV1().ResourceClaims(ns).Get.
type ClaimGetter interface {
	GetResourceClaim(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error)
}

// drivers finds a registered driver's client; *Plugins is one.
type drivers interface {
	driver(name string) (driverClient, error)
}

// store persists State; *fileStore is one.
type store interface {
	Load() (State, error)
	Save(State) error
}

// The kubelet's limit on a driver call (half its retry period), and
// berth's on reading a claim.
const (
	DefaultCallTimeout = 45 * time.Second
	DefaultAPITimeout  = 10 * time.Second
)

// Options configure a Manager.
type Options struct {
	// Dir holds the checkpoint; it is created if missing.
	Dir     string
	Claims  ClaimGetter
	Plugins *Plugins
	// CallTimeout bounds each driver call, APITimeout each claim read.
	CallTimeout time.Duration
	APITimeout  time.Duration
	Log         *slog.Logger
}

// Manager prepares and unprepares the claims of the node's pods. Its
// methods may be called concurrently, for different pods or the same.
type Manager struct {
	log         *slog.Logger
	claims      ClaimGetter
	drivers     drivers
	store       store
	callTimeout time.Duration
	apiTimeout  time.Duration

	// mu guards state and busy. state is what the checkpoint holds; busy
	// are the claims a driver call is under way for, whose state only that
	// call's owner changes.
	mu    sync.Mutex
	state State
	busy  map[string]bool
}

// New returns a manager with the claims of the checkpoint in opts.Dir. A
// checkpoint that cannot be read is an error naming the file.
func New(opts Options) (*Manager, error) {
	if opts.Dir == "" || opts.Claims == nil || opts.Plugins == nil {
		return nil, errors.New("dra: Dir, Claims and Plugins are required")
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("dra: state directory: %w", err)
	}
	return newManager(opts, opts.Plugins, newFileStore(opts.Dir))
}

func newManager(opts Options, d drivers, s store) (*Manager, error) {
	st, err := s.Load()
	if err != nil {
		return nil, err
	}
	m := &Manager{
		log:         opts.Log,
		claims:      opts.Claims,
		drivers:     d,
		store:       s,
		callTimeout: opts.CallTimeout,
		apiTimeout:  opts.APITimeout,
		state:       st,
		busy:        map[string]bool{},
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.callTimeout <= 0 {
		m.callTimeout = DefaultCallTimeout
	}
	if m.apiTimeout <= 0 {
		m.apiTimeout = DefaultAPITimeout
	}
	return m, nil
}

// PrepareResources prepares the claims of pod.spec.resourceClaims not yet
// prepared and records the pod as a user of each. It returns once the
// checkpoint holds the outcome. On an error the pod may be retried: the
// claims that were prepared stay prepared, the others are prepared on the
// next call.
func (m *Manager) PrepareResources(ctx context.Context, pod *v1.Pod) error {
	if err := m.prepare(ctx, pod); err != nil {
		return fmt.Errorf("prepare dynamic resources: %w", err)
	}
	return nil
}

// CheckResources makes the checks PrepareResources makes before it
// calls a driver, and records nothing: the pod's claims exist, are
// reserved for it and allocated, their drivers are registered, and no
// claim of the same name but another UID is still prepared here (its pod
// force-deleted, its claim made again under the name). A pod that waits to
// be admitted says with it why it could not be prepared yet, as the
// kubelet, which tries at once, does.
func (m *Manager) CheckResources(ctx context.Context, pod *v1.Pod) error {
	claims, err := m.fetchClaims(ctx, pod)
	if err == nil && len(claims) > 0 {
		m.mu.Lock()
		_, _, err = planPrepare(m.state, pod.UID, claims)
		m.mu.Unlock()
	}
	if err != nil {
		return fmt.Errorf("prepare dynamic resources: %w", err)
	}
	return nil
}

func (m *Manager) prepare(ctx context.Context, pod *v1.Pod) error {
	claims, err := m.fetchClaims(ctx, pod)
	if err != nil || len(claims) == 0 {
		return err
	}
	bs, keys, err := m.startPrepare(pod.UID, claims)
	if err != nil {
		return err
	}
	var results []prepareResult
	var errs []error
	for _, b := range bs {
		done, err := m.callPrepare(ctx, b)
		results = append(results, done...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.busy, k)
	}
	if err := m.commit(markPrepared(m.state, results)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// fetchClaims reads the pod's claims and checks that the pod may use them
// and that their drivers are registered, before anything is recorded: a
// pod that fails here leaves nothing to unprepare, as in the kubelet.
func (m *Manager) fetchClaims(ctx context.Context, pod *v1.Pod) ([]Claim, error) {
	pcs, err := resolveClaims(pod)
	if err != nil {
		return nil, err
	}
	var out []Claim
	for _, pc := range pcs {
		rc, err := m.getClaim(ctx, pod.Namespace, pc.ClaimName)
		if err != nil {
			return nil, fmt.Errorf("fetch ResourceClaim %s: %w", pc.ClaimName, err)
		}
		c, err := checkClaim(pod, pc, rc)
		if err != nil {
			return nil, err
		}
		for _, d := range c.Drivers {
			if _, err := m.drivers.driver(d); err != nil {
				return nil, fmt.Errorf("ResourceClaim %s: %w", c.Name, err)
			}
		}
		out = append(out, c)
	}
	return out, nil
}

func (m *Manager) getClaim(ctx context.Context, namespace, name string) (*resourceapi.ResourceClaim, error) {
	ctx, cancel := context.WithTimeout(ctx, m.apiTimeout)
	defer cancel()
	rc, err := m.claims.GetResourceClaim(ctx, namespace, name)
	if err == nil && rc == nil {
		err = errors.New("no ResourceClaim returned")
	}
	return rc, err
}

// startPrepare records the pod as a user of its claims, marks the claims
// to prepare busy and checkpoints that before any driver is called. A
// claim another call is busy with is an error: the pod retries.
func (m *Manager) startPrepare(podUID types.UID, claims []Claim) ([]batch, []string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range claims {
		if m.busy[c.key()] {
			return nil, nil, fmt.Errorf("ResourceClaim %s is being prepared or unprepared for another pod; try again", c.Name)
		}
	}
	next, bs, err := planPrepare(m.state, podUID, claims)
	if err != nil {
		return nil, nil, err
	}
	if err := m.commit(next); err != nil {
		return nil, nil, err
	}
	keys := batchKeys(bs)
	for _, k := range keys {
		m.busy[k] = true
	}
	return bs, keys, nil
}

func batchKeys(bs []batch) []string {
	var keys []string
	for _, b := range bs {
		for _, c := range b.Claims {
			if k := claimKey(c.Namespace, c.Name); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// commit checkpoints next and makes it the state; on an error the state
// stays as it was. m.mu must be held.
func (m *Manager) commit(next State) error {
	if reflect.DeepEqual(next, m.state) {
		return nil
	}
	if err := m.store.Save(next); err != nil {
		return fmt.Errorf("checkpoint ResourceClaim state: %w", err)
	}
	m.state = next
	return nil
}

func (m *Manager) callPrepare(ctx context.Context, b batch) ([]prepareResult, error) {
	client, err := m.drivers.driver(b.Driver)
	if err != nil {
		return nil, fmt.Errorf("ResourceClaims %s: %w", claimNames(b), err)
	}
	ctx, cancel := context.WithTimeout(ctx, m.callTimeout)
	defer cancel()
	resp, err := client.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: toRequestClaims(b)})
	if err != nil {
		return nil, fmt.Errorf("DRA driver %s: NodePrepareResources for ResourceClaims %s: %w", b.Driver, claimNames(b), err)
	}
	done, err := checkAnswers("NodePrepareResources", b, prepareAnswers(resp))
	m.log.Info("NodePrepareResources", "driver", b.Driver, "claims", claimNames(b), "prepared", len(done), "err", err)
	return done, err
}

func claimNames(b batch) []string {
	var names []string
	for _, c := range b.Claims {
		names = append(names, c.Name)
	}
	return names
}

// UnprepareResources drops the pod from the claims it uses and unprepares
// those it was the last user of. berth finds the pod's claims in its own
// state, by pod UID, not from the pod's spec and status as the kubelet
// does: a pod whose status lost a generated claim's name, or that is known
// only by its UID after a restart, still has its claims unprepared. It may
// be called again after an error, and for a pod with nothing prepared.
func (m *Manager) UnprepareResources(ctx context.Context, pod *v1.Pod) error {
	return m.UnpreparePod(ctx, pod.UID)
}

// UnpreparePod is UnprepareResources for a pod known by its UID.
func (m *Manager) UnpreparePod(ctx context.Context, podUID types.UID) error {
	if err := m.unprepare(ctx, podUID); err != nil {
		return fmt.Errorf("unprepare dynamic resources: %w", err)
	}
	return nil
}

func (m *Manager) unprepare(ctx context.Context, podUID types.UID) error {
	bs, keys, err := m.startUnprepare(podUID)
	if err != nil || len(bs) == 0 {
		return err
	}
	done := map[string]bool{}
	var errs []error
	for _, b := range bs {
		ok, err := m.callUnprepare(ctx, b)
		for _, r := range ok {
			done[b.Driver+"\x00"+claimKey(r.Claim.Namespace, r.Claim.Name)] = true
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, k := range keys {
		delete(m.busy, k)
	}
	if err := m.commit(forgetUnprepared(m.state, done)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (m *Manager) startUnprepare(podUID types.UID) ([]batch, []string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var keys []string
	for _, k := range slices.Sorted(maps.Keys(m.state)) {
		if c := m.state[k]; c.hasPod(podUID) {
			if m.busy[k] {
				return nil, nil, fmt.Errorf("ResourceClaim %s is being prepared or unprepared for another pod; try again", c.Name)
			}
			keys = append(keys, k)
		}
	}
	next, bs := planUnprepare(m.state, podUID, keys)
	if err := m.commit(next); err != nil {
		return nil, nil, err
	}
	busy := batchKeys(bs)
	for _, k := range busy {
		m.busy[k] = true
	}
	return bs, busy, nil
}

func (m *Manager) callUnprepare(ctx context.Context, b batch) ([]prepareResult, error) {
	client, err := m.drivers.driver(b.Driver)
	if err != nil {
		return nil, fmt.Errorf("ResourceClaims %s: %w", claimNames(b), err)
	}
	ctx, cancel := context.WithTimeout(ctx, m.callTimeout)
	defer cancel()
	resp, err := client.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: toRequestClaims(b)})
	if err != nil {
		return nil, fmt.Errorf("DRA driver %s: NodeUnprepareResources for ResourceClaims %s: %w", b.Driver, claimNames(b), err)
	}
	done, err := checkAnswers("NodeUnprepareResources", b, unprepareAnswers(resp))
	m.log.Info("NodeUnprepareResources", "driver", b.Driver, "claims", claimNames(b), "unprepared", len(done), "err", err)
	return done, err
}

// ContainerCDIDevices returns the CDI device IDs (vendor.com/class=name)
// for the CRI ContainerConfig's CDIDevices of a container of a prepared
// pod: those of the claims it references, restricted to a request where
// the reference names one.
func (m *Manager) ContainerCDIDevices(pod *v1.Pod, container *v1.Container) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return containerCDIDevices(m.state, pod, container)
}

// ContainerClaims returns the prepared claims the container references,
// for the pod-resources API's dynamic_resources.
func (m *Manager) ContainerClaims(pod *v1.Pod, container *v1.Container) ([]Claim, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return containerClaims(m.state, pod, container)
}

// PodMightNeedToUnprepareResources says whether a pod still uses a claim
// here, so that its termination must wait for UnprepareResources.
func (m *Manager) PodMightNeedToUnprepareResources(podUID types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.state {
		if c.hasPod(podUID) {
			return true
		}
	}
	return false
}

// PodUIDs returns the pods that use a claim, sorted: after a restart, those
// no longer on the node are to be given to UnpreparePod.
func (m *Manager) PodUIDs() []types.UID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []types.UID
	for _, c := range m.state {
		for _, p := range c.Pods {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Claims returns a copy of the state, for the pod-resources API and
// describe.
func (m *Manager) Claims() State {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := State{}
	for k, c := range m.state {
		out[k] = c.clone()
	}
	return out
}
