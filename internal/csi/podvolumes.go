package csi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// defaultAPITimeout bounds each read of the API server.
const defaultAPITimeout = 30 * time.Second

// PodVolumesOptions configure PodVolumes.
type PodVolumesOptions struct {
	Manager  *Manager
	Client   kubernetes.Interface
	NodeName string
	// Ownership gives a published volume the pod's fsGroup where the
	// driver cannot (the volume package's SetVolumeOwnership); nil: not
	// done.
	Ownership  func(dir string, gid int64, readOnly bool) error
	APITimeout time.Duration
	Log        *slog.Logger
}

// PodVolumes sets up and tears down the CSI-backed volumes of pods
// (persistentVolumeClaim, generic ephemeral and inline csi volumes), as the
// kubelet's volume manager with its CSI plugin: the PVC and PV are read
// from the API, the VolumeAttachment awaited where the driver needs one,
// then the volume is staged and published. What is mounted is on disk
// (vol_data.json), so a restart finds it: nothing here must survive one.
type PodVolumes struct {
	m          *Manager
	client     kubernetes.Interface
	nodeName   string
	ownership  func(string, int64, bool) error
	apiTimeout time.Duration
	log        *slog.Logger

	// locks serialize the operations on one volume (driver and handle),
	// as the kubelet's operation executor runs one at a time per volume:
	// two pods staging it, or one unstaging it as another publishes.
	locks keyedLocks

	// mu guards resolved: the sources of the volumes published, by pod and
	// volume name, so that a pod's later syncs need not read the API
	// again (a bound claim's volume does not change).
	mu       sync.Mutex
	resolved map[types.UID]map[string]resolvedVolume
	// stats are the pods' last volume stats (VolumeStats), also guarded
	// by mu; statsJobs are the readings in flight.
	stats     map[types.UID]*podStats
	statsJobs sync.WaitGroup
}

type resolvedVolume struct {
	src    Source
	policy Policy
}

// NewPodVolumes returns the CSI side of the volume manager.
func NewPodVolumes(opts PodVolumesOptions) (*PodVolumes, error) {
	if opts.Manager == nil || opts.Client == nil {
		return nil, errors.New("CSI pod volumes: need a CSI manager and an API client")
	}
	p := &PodVolumes{
		m: opts.Manager, client: opts.Client, nodeName: opts.NodeName, ownership: opts.Ownership,
		apiTimeout: opts.APITimeout, log: opts.Log, resolved: map[types.UID]map[string]resolvedVolume{},
		stats: map[types.UID]*podStats{},
	}
	if p.apiTimeout <= 0 {
		p.apiTimeout = defaultAPITimeout
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

// SetUp makes a pod's CSI-backed volume ready and returns its host path
// (the publish target). It is idempotent: a volume already published is
// left as it is.
func (p *PodVolumes) SetUp(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (string, error) {
	r, err := p.resolve(ctx, pod, vol)
	if err != nil {
		return "", err
	}
	unlock := p.locks.lock(r.src.Driver + "\x00" + r.src.VolumeHandle)
	defer unlock()
	if !r.policy.RequiresRepublish && p.published(pod.UID, r.src) {
		// Mounted and recorded: nothing to read from the API (the
		// attachment, the secrets) on the pod's later syncs.
		return PublishPath(p.m.root, pod.UID, r.src.VolumeName), nil
	}
	var publishContext map[string]string
	if r.policy.NeedsAttach(r.src) {
		if publishContext, err = p.attached(ctx, r.src); err != nil {
			return "", err
		}
	}
	fsGroup := podFSGroup(pod)
	if !r.src.Ephemeral {
		secrets, err := p.secrets(ctx, r.src.StageSecret, "NodeStageSecretRef")
		if err != nil {
			return "", err
		}
		staged, err := p.m.Stage(ctx, StageRequest{
			Driver: r.src.Driver, VolumeHandle: r.src.VolumeHandle, AccessMode: firstMode(r.src.AccessModes),
			FSType: r.src.FSType, MountOptions: r.src.MountOptions, VolumeAttributes: r.src.VolumeAttributes,
			PublishContext: publishContext, Secrets: secrets, FSGroup: fsGroup,
		})
		if err != nil {
			return "", fmt.Errorf("MountVolume.MountDevice failed: %w", err)
		}
		if staged.Called {
			p.log.Info("MountVolume.MountDevice succeeded", "pod", pod.Namespace+"/"+pod.Name, "volume", vol.Name,
				"driver", r.src.Driver, "volumeHandle", r.src.VolumeHandle, "stagingPath", staged.StagingPath)
		}
	}
	// The caller's event says "MountVolume.SetUp failed" already.
	res, err := p.publish(ctx, pod, r, publishContext, fsGroup)
	if err != nil {
		return "", err
	}
	if res.Called {
		p.log.Info("MountVolume.SetUp succeeded", "pod", pod.Namespace+"/"+pod.Name, "volume", vol.Name,
			"driver", r.src.Driver, "volumeHandle", r.src.VolumeHandle, "path", res.TargetPath)
	}
	p.remember(pod.UID, vol.Name, r)
	return res.TargetPath, nil
}

// published says whether the pod's volume is published: mounted, and
// recorded as this volume.
func (p *PodVolumes) published(uid types.UID, s Source) bool {
	t, err := readTarget(p.m.mounts, PublishDir(p.m.root, uid, s.VolumeName), publishMountDir)
	return err == nil && t.Mounted && same(t.Data, s.Driver, s.VolumeHandle)
}

func (p *PodVolumes) publish(ctx context.Context, pod *v1.Pod, r resolvedVolume, publishContext map[string]string, fsGroup *int64) (PublishResult, error) {
	secrets, err := p.secrets(ctx, r.src.PublishSecret, "NodePublishSecretRef")
	if err != nil {
		return PublishResult{}, err
	}
	attrs := r.src.VolumeAttributes
	if len(r.policy.TokenRequests) > 0 {
		tokens, err := p.tokens(ctx, pod, r.policy.TokenRequests)
		if err != nil {
			return PublishResult{}, err
		}
		if r.policy.TokenInSecrets {
			secrets = withKey(secrets, ctxServiceAccountTokens, tokens)
		} else {
			attrs = withKey(attrs, ctxServiceAccountTokens, tokens)
		}
	}
	res, err := p.m.Publish(ctx, PublishRequest{
		Driver: r.src.Driver, VolumeHandle: r.src.VolumeHandle, VolumeName: r.src.VolumeName,
		Ephemeral: r.src.Ephemeral,
		Pod: PodInfo{Name: pod.Name, Namespace: pod.Namespace, UID: string(pod.UID),
			ServiceAccountName: pod.Spec.ServiceAccountName},
		ReadOnly: r.src.ReadOnly, AccessModes: r.src.AccessModes, FSType: r.src.FSType,
		MountOptions: r.src.MountOptions, VolumeAttributes: attrs,
		PublishContext: publishContext, Secrets: secrets,
		PodInfoOnMount: r.policy.PodInfoOnMount, FSGroupPolicy: r.policy.FSGroupPolicy, FSGroup: fsGroup,
		Republish: r.policy.RequiresRepublish,
	})
	if err != nil {
		return PublishResult{}, err
	}
	if !res.ApplyFSGroup || p.ownership == nil {
		return res, nil
	}
	if err := p.ownership(res.TargetPath, *fsGroup, r.src.ReadOnly); err != nil {
		// Unpublished again, so that the next try publishes and applies
		// the fsGroup anew rather than find it mounted and done.
		if _, uerr := p.m.Unpublish(ctx, pod.UID, r.src.VolumeName); uerr != nil {
			err = fmt.Errorf("%w (and unpublishing it again: %v)", err, uerr)
		}
		return PublishResult{}, fmt.Errorf("applying fsGroup %d to %s: %w", *fsGroup, res.TargetPath, err)
	}
	return res, nil
}

// ctxServiceAccountTokens is the key of the pod's service account tokens
// that a CSIDriver's tokenRequests ask for.
const ctxServiceAccountTokens = "csi.storage.k8s.io/serviceAccount.tokens"

// tokens requests the pod's service account tokens for the CSIDriver's
// audiences, bound to the pod, as the kubelet's
// podServiceAccountTokenAttrs: a JSON object of audience to the
// TokenRequest's status.
func (p *PodVolumes) tokens(ctx context.Context, pod *v1.Pod, reqs []storagev1.TokenRequest) (string, error) {
	out := map[string]authenticationv1.TokenRequestStatus{}
	for _, r := range reqs {
		auds := []string{}
		if r.Audience != "" {
			auds = []string{r.Audience}
		}
		tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
			Audiences: auds, ExpirationSeconds: r.ExpirationSeconds,
			BoundObjectRef: &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
		}}
		cctx, cancel := context.WithTimeout(ctx, p.apiTimeout)
		got, err := p.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(cctx, pod.Spec.ServiceAccountName, tr, metav1.CreateOptions{})
		cancel()
		if err != nil {
			return "", fmt.Errorf("requesting a token of service account %s/%s for audience %q: %w", pod.Namespace, pod.Spec.ServiceAccountName, r.Audience, err)
		}
		out[r.Audience] = got.Status
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// withKey is m with k set to v, m left as it is.
func withKey(m map[string]string, k, v string) map[string]string {
	out := maps.Clone(m)
	if out == nil {
		out = map[string]string{}
	}
	out[k] = v
	return out
}

func firstMode(modes []v1.PersistentVolumeAccessMode) v1.PersistentVolumeAccessMode {
	if len(modes) == 0 {
		return ""
	}
	return modes[0]
}

func podFSGroup(pod *v1.Pod) *int64 {
	if sc := pod.Spec.SecurityContext; sc != nil {
		return sc.FSGroup
	}
	return nil
}

func (p *PodVolumes) remember(uid types.UID, name string, r resolvedVolume) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resolved[uid] == nil {
		p.resolved[uid] = map[string]resolvedVolume{}
	}
	p.resolved[uid][name] = r
}

func (p *PodVolumes) forget(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.resolved, uid)
	delete(p.stats, uid)
}

// resolve tells what a pod volume is, from what was remembered or else
// from the API.
func (p *PodVolumes) resolve(ctx context.Context, pod *v1.Pod, vol *v1.Volume) (resolvedVolume, error) {
	p.mu.Lock()
	r, ok := p.resolved[pod.UID][vol.Name]
	p.mu.Unlock()
	if ok {
		return r, nil
	}
	var src Source
	var err error
	if claim, eph, ro, isClaim := ClaimOf(pod, vol); isClaim {
		src, err = p.fromClaim(ctx, pod, claim, eph, ro)
	} else {
		src, err = FromInline(pod, vol)
	}
	if err != nil {
		return resolvedVolume{}, err
	}
	d, err := p.csiDriver(ctx, src.Driver)
	if err != nil {
		return resolvedVolume{}, err
	}
	policy := PolicyOf(d)
	if err := policy.CheckMode(src.Driver, src.Ephemeral); err != nil {
		return resolvedVolume{}, err
	}
	return resolvedVolume{src: src, policy: policy}, nil
}

// fromClaim reads the PVC and its bound PV, with the kubelet's errors
// (createVolumeSpec).
func (p *PodVolumes) fromClaim(ctx context.Context, pod *v1.Pod, claim string, ephemeral, readOnly bool) (Source, error) {
	cctx, cancel := context.WithTimeout(ctx, p.apiTimeout)
	defer cancel()
	fail := func(err error) (Source, error) {
		return Source{}, fmt.Errorf("error processing PVC %s/%s: %w", pod.Namespace, claim, err)
	}
	pvc, err := p.client.CoreV1().PersistentVolumeClaims(pod.Namespace).Get(cctx, claim, metav1.GetOptions{})
	if err != nil {
		return fail(fmt.Errorf("failed to fetch PVC from API server: %w", err))
	}
	pvName, err := CheckClaim(pvc)
	if err != nil {
		return fail(err)
	}
	if ephemeral {
		if err := CheckEphemeralOwner(pod, pvc); err != nil {
			return Source{}, err
		}
	}
	pv, err := p.client.CoreV1().PersistentVolumes().Get(cctx, pvName, metav1.GetOptions{})
	if err != nil {
		return fail(fmt.Errorf("failed to fetch PV %s from API server: %w", pvName, err))
	}
	src, err := FromPV(pv, string(pvc.UID), readOnly)
	if err != nil {
		return fail(err)
	}
	return src, nil
}

// csiDriver reads the driver's CSIDriver object; nil when there is none.
func (p *PodVolumes) csiDriver(ctx context.Context, name string) (*storagev1.CSIDriver, error) {
	cctx, cancel := context.WithTimeout(ctx, p.apiTimeout)
	defer cancel()
	d, err := p.client.StorageV1().CSIDrivers().Get(cctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading CSIDriver %s: %w", name, err)
	}
	return d, nil
}

// attached reads the volume's VolumeAttachment, made and attached by the
// attach-detach controller and the driver's external-attacher, and returns
// its attachment metadata (the publish context). Not attached yet is an
// error: the pod's sync retries, with back-off, as the kubelet's
// reconciler waits for the attach.
func (p *PodVolumes) attached(ctx context.Context, s Source) (map[string]string, error) {
	name := AttachmentName(s.VolumeHandle, s.Driver, p.nodeName)
	cctx, cancel := context.WithTimeout(ctx, p.apiTimeout)
	defer cancel()
	va, err := p.client.StorageV1().VolumeAttachments().Get(cctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, &AttachError{Volume: s.VolumeHandle, Attachment: name,
			Err: fmt.Errorf("volume %v has GET error for volume attachment %v: %w", s.VolumeHandle, name, err)}
	}
	ok, err := CheckAttachment(va)
	if err == nil && !ok {
		err = fmt.Errorf("volume %v is not attached for volume attachment %v", s.VolumeHandle, name)
	}
	if err != nil {
		return nil, &AttachError{Volume: s.VolumeHandle, Attachment: name, Err: err}
	}
	return va.Status.AttachmentMetadata, nil
}

// AttachError is SetUp's error while a volume waits for its attachment:
// the kubelet's FailedAttachVolume rather than FailedMount.
type AttachError struct {
	Volume, Attachment string
	Err                error
}

func (e *AttachError) Error() string { return "AttachVolume.Attach failed: " + e.Err.Error() }
func (e *AttachError) Unwrap() error { return e.Err }

// secrets reads a referenced secret's data, as the kubelet's
// getCredentialsFromSecret; nil ref: none.
func (p *PodVolumes) secrets(ctx context.Context, ref *v1.SecretReference, field string) (map[string]string, error) {
	if ref == nil {
		return nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, p.apiTimeout)
	defer cancel()
	s, err := p.client.CoreV1().Secrets(ref.Namespace).Get(cctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("fetching %s %s/%s failed: %w", field, ref.Namespace, ref.Name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// TearDownPod unpublishes every CSI volume of a pod found on disk, then
// unstages each that no other pod still publishes, as the kubelet's
// UnmountVolume and UnmountDevice. Every volume is tried; the error names
// those that failed, which stay on disk for the next try.
func (p *PodVolumes) TearDownPod(ctx context.Context, uid types.UID) error {
	vols, err := p.publishedOf(uid)
	errs := []error{err}
	for _, v := range vols {
		if err := p.tearDownVolume(ctx, v); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	p.forget(uid)
	return nil
}

func (p *PodVolumes) tearDownVolume(ctx context.Context, v PublishedVolume) error {
	unlock := p.locks.lock(v.Data.DriverName + "\x00" + v.Data.VolumeHandle)
	defer unlock()
	res, err := p.m.Unpublish(ctx, v.PodUID, v.VolumeName)
	if err != nil {
		return fmt.Errorf("UnmountVolume.TearDown failed for volume %q of pod %s: %w", v.VolumeName, v.PodUID, err)
	}
	if res.Called {
		p.log.Info("UnmountVolume.TearDown succeeded", "podUID", v.PodUID, "volume", v.VolumeName,
			"driver", v.Data.DriverName, "volumeHandle", v.Data.VolumeHandle)
	}
	if v.Data.DriverName == "" || v.Data.LifecycleMode == storagev1.VolumeLifecycleEphemeral {
		return nil
	}
	return p.unstageUnused(ctx, v.Data.DriverName, v.Data.VolumeHandle)
}

// unstageUnused unstages a volume that no pod publishes any more. The
// caller holds the volume's lock.
func (p *PodVolumes) unstageUnused(ctx context.Context, driver, handle string) error {
	if _, err := os.Lstat(StagingDir(p.m.root, driver, handle)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	r, err := Reconstruct(p.m.root, p.m.mounts)
	if err != nil {
		return err
	}
	if !UnusedStaged(r.Published, driver, handle) {
		return nil
	}
	res, err := p.m.Unstage(ctx, driver, handle)
	if err != nil {
		return fmt.Errorf("UnmountDevice failed for volume %q of driver %q: %w", handle, driver, err)
	}
	if res.Called {
		p.log.Info("UnmountDevice succeeded", "driver", driver, "volumeHandle", handle)
	}
	return nil
}

// UnusedStaged says whether no published volume uses the staged volume
// (driver, handle).
func UnusedStaged(published []PublishedVolume, driver, handle string) bool {
	for _, v := range published {
		if same(&v.Data, driver, handle) {
			return false
		}
	}
	return true
}

// publishedOf lists a pod's CSI volumes on disk. A record that cannot be
// read is an error: its mount, if any, cannot be handed to a driver.
func (p *PodVolumes) publishedOf(uid types.UID) ([]PublishedVolume, error) {
	if err := checkPathName("pod UID", string(uid)); err != nil {
		return nil, err
	}
	base := filepath.Join(p.m.root, "pods", string(uid), "volumes", escapedPluginName)
	names, err := subdirs(base)
	if err != nil {
		return nil, fmt.Errorf("listing CSI volumes of pod %s: %w", uid, err)
	}
	var out []PublishedVolume
	var errs []error
	for _, n := range names {
		v, err := readPublished(filepath.Join(base, n), uid, unescapeQualifiedName(n), p.m.mounts)
		if errors.Is(err, fs.ErrNotExist) {
			// No record: a set-up that stopped before it wrote one, so
			// nothing the driver was asked to mount. Unpublish removes
			// what is left, unless something is mounted there.
			out = append(out, PublishedVolume{PodUID: uid, VolumeName: unescapeQualifiedName(n)})
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, v)
	}
	return out, errors.Join(errs...)
}

// podsWithVolumes lists the pods that have CSI volume dirs, recorded or not.
func (p *PodVolumes) podsWithVolumes() ([]types.UID, error) {
	pods, err := subdirs(filepath.Join(p.m.root, "pods"))
	if err != nil {
		return nil, fmt.Errorf("listing pods' CSI volumes: %w", err)
	}
	var out []types.UID
	for _, uid := range pods {
		names, err := subdirs(filepath.Join(p.m.root, "pods", uid, "volumes", escapedPluginName))
		if err == nil && len(names) > 0 {
			out = append(out, types.UID(uid))
		}
	}
	return out, nil
}

// Housekeep tears down the CSI volumes of pods that keep says are gone
// (berth was killed before their teardown, or it failed), and unstages the
// staged volumes that no pod publishes, as the kubelet's reconciler does
// for the volumes it reconstructed. It may call drivers: the caller runs it
// off its loop.
func (p *PodVolumes) Housekeep(ctx context.Context, keep func(types.UID) bool) error {
	pods, err := p.podsWithVolumes()
	errs := []error{err}
	for _, uid := range pods {
		if keep(uid) {
			continue
		}
		if err := p.TearDownPod(ctx, uid); err != nil {
			errs = append(errs, err)
		}
	}
	r, err := Reconstruct(p.m.root, p.m.mounts)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, e := range r.Problems {
		// A dir without a record is a set-up cut short: its pod's
		// set-up or teardown deals with it.
		if !errors.Is(e, fs.ErrNotExist) {
			errs = append(errs, e)
		}
	}
	for _, s := range r.Staged {
		unlock := p.locks.lock(s.Data.DriverName + "\x00" + s.Data.VolumeHandle)
		err := p.unstageUnused(ctx, s.Data.DriverName, s.Data.VolumeHandle)
		unlock()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// keyedLocks is a mutex per key, made on first use and dropped when no one
// holds or waits for it.
type keyedLocks struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	mu    sync.Mutex
	users int
}

func (k *keyedLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		l.users--
		if l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// InUse are the unique names of the volumes published or staged on the
// node, for the Node's status.volumesInUse: the attach-detach controller
// detaches none of them before berth has unmounted it, as it waits for the
// kubelet's. Sorted; nil when the disk cannot be read.
func (p *PodVolumes) InUse() []v1.UniqueVolumeName {
	r, err := Reconstruct(p.m.root, p.m.mounts)
	if err != nil {
		p.log.Warn("listing the CSI volumes in use failed", "err", err)
		return nil
	}
	return inUse(r)
}

// inUse names the persistent volumes of r as the kubelet does,
// kubernetes.io/csi/<driver>^<volume handle>; inline volumes are never
// attached, and are left out.
func inUse(r Reconstruction) []v1.UniqueVolumeName {
	set := map[v1.UniqueVolumeName]bool{}
	for _, s := range r.Staged {
		set[uniqueName(s.Data.DriverName, s.Data.VolumeHandle)] = true
	}
	for _, v := range r.Published {
		if v.Data.LifecycleMode != storagev1.VolumeLifecycleEphemeral {
			set[uniqueName(v.Data.DriverName, v.Data.VolumeHandle)] = true
		}
	}
	if len(set) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(set))
}

func uniqueName(driver, handle string) v1.UniqueVolumeName {
	return v1.UniqueVolumeName(PluginName + "/" + driver + "^" + handle)
}
