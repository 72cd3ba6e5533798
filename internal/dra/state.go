package dra

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-dev/berth/internal/v1helper"
)

// Device is one device a driver prepared for a claim, as its
// NodePrepareResources answered.
type Device struct {
	Driver string `json:"driver"`
	Pool   string `json:"pool"`
	Device string `json:"device"`
	// RequestNames are the claim's requests the device serves; empty means
	// all of them.
	RequestNames []string `json:"requestNames,omitempty"`
	CDIDeviceIDs []string `json:"cdiDeviceIDs,omitempty"`
	ShareID      string   `json:"shareID,omitempty"`
}

// Claim is what berth knows of one ResourceClaim used on this node.
type Claim struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	// Drivers are the drivers of the claim's allocation, sorted.
	Drivers []string `json:"drivers"`
	// Pods are the UIDs of the pods using the claim, sorted.
	Pods []types.UID `json:"pods"`
	// Prepared says every driver answered NodePrepareResources for the
	// claim. A claim that is referenced but not prepared had a prepare
	// attempted (or about to be): the driver may have done part of it, so
	// it is unprepared all the same when its last pod goes, as the kubelet
	// does.
	Prepared bool     `json:"prepared"`
	Devices  []Device `json:"devices,omitempty"`
}

func (c Claim) key() string { return claimKey(c.Namespace, c.Name) }

func (c Claim) clone() Claim {
	c.Drivers = slices.Clone(c.Drivers)
	c.Pods = slices.Clone(c.Pods)
	c.Devices = slices.Clone(c.Devices)
	return c
}

func (c Claim) hasPod(uid types.UID) bool {
	_, found := slices.BinarySearch(c.Pods, uid)
	return found
}

func (c Claim) withPod(uid types.UID) Claim {
	i, found := slices.BinarySearch(c.Pods, uid)
	if !found {
		c.Pods = slices.Insert(slices.Clone(c.Pods), i, uid)
	}
	return c
}

func (c Claim) withoutPod(uid types.UID) Claim {
	if i, found := slices.BinarySearch(c.Pods, uid); found {
		c.Pods = slices.Delete(slices.Clone(c.Pods), i, i+1)
	}
	return c
}

func claimKey(namespace, name string) string { return namespace + "/" + name }

// State is the claims in use on the node, by namespace/name. Functions over
// it return a new State and leave their argument alone.
type State map[string]Claim

func (s State) clone() State { return maps.Clone(s) }

// podClaim is a claim a pod uses, its name resolved.
type podClaim struct {
	// PodClaimName is the entry's name in pod.spec.resourceClaims.
	PodClaimName string
	// ClaimName is the ResourceClaim's name.
	ClaimName string
	// MustCheckOwner: the claim was generated from a template for the pod,
	// so it must be controlled by the pod.
	MustCheckOwner bool
}

// Errors of resolveClaims, worded as k8s.io/dynamic-resource-allocation's.
var (
	errClaimNotFound  = errors.New("ResourceClaim not created yet")
	errAPIUnsupported = errors.New("none of the supported fields are set")
)

// resolveClaims names the ResourceClaims of pod.spec.resourceClaims: the
// claim named there, or the one generated from a template and recorded in
// pod.status.resourceClaimStatuses. A template entry whose status has no
// name needs no claim and is skipped, as in the kubelet.
func resolveClaims(pod *v1.Pod) ([]podClaim, error) {
	var out []podClaim
	for _, pc := range pod.Spec.ResourceClaims {
		name, mustCheck, err := resolveClaim(pod, pc)
		if err != nil {
			return nil, err
		}
		if name == nil {
			continue
		}
		out = append(out, podClaim{PodClaimName: pc.Name, ClaimName: *name, MustCheckOwner: mustCheck})
	}
	if st := pod.Status.ExtendedResourceClaimStatus; st != nil {
		// The claim the scheduler made for the pod's extended resources
		// that a DRA driver serves (KEP-5004): prepared as the others,
		// named as the kubelet names it, without an owner check.
		out = append(out, podClaim{ClaimName: st.ResourceClaimName})
	}
	return out, nil
}

// extendedRequests returns the pod's extended resource claim and its
// requests the scheduler mapped to container's non-zero requests of DRA
// extended resources (the kubelet's GetResources); "" when it has none.
func extendedRequests(pod *v1.Pod, container *v1.Container) (claim string, requests []string) {
	st := pod.Status.ExtendedResourceClaimStatus
	if st == nil {
		return "", nil
	}
	for _, m := range st.RequestMappings {
		name := v1.ResourceName(m.ResourceName)
		q, ok := container.Resources.Requests[name]
		if m.ContainerName == container.Name && ok && !q.IsZero() && v1helper.IsDRAExtendedResourceName(name) {
			requests = append(requests, m.RequestName)
		}
	}
	if len(requests) == 0 {
		return "", nil
	}
	return st.ResourceClaimName, requests
}

func resolveClaim(pod *v1.Pod, pc v1.PodResourceClaim) (*string, bool, error) {
	switch {
	case pc.ResourceClaimName != nil:
		return pc.ResourceClaimName, false, nil
	case pc.ResourceClaimTemplateName != nil:
		for _, st := range pod.Status.ResourceClaimStatuses {
			if st.Name == pc.Name {
				return st.ResourceClaimName, true, nil
			}
		}
		return nil, false, fmt.Errorf(`pod "%s/%s": %w`, pod.Namespace, pod.Name, errClaimNotFound)
	default:
		return nil, false, fmt.Errorf(`pod "%s/%s", spec.resourceClaim %q: %w`, pod.Namespace, pod.Name, pc.Name, errAPIUnsupported)
	}
}

// checkClaim says whether pod may use claim, with the kubelet's errors, and
// returns what berth records of it. berth accepts no PodGroup owner or
// reservation (the kubelet does behind the DRAWorkloadResourceClaims gate).
func checkClaim(pod *v1.Pod, pc podClaim, claim *resourceapi.ResourceClaim) (Claim, error) {
	if pc.MustCheckOwner {
		if claim.Namespace != pod.Namespace {
			return Claim{}, fmt.Errorf("ResourceClaim %s/%s is not in the same namespace as Pod %s/%s", claim.Namespace, claim.Name, pod.Namespace, pod.Name)
		}
		if !metav1.IsControlledBy(claim, pod) {
			return Claim{}, fmt.Errorf("ResourceClaim %s/%s was not created for Pod %s/%s (Pod is not owner)", claim.Namespace, claim.Name, pod.Namespace, pod.Name)
		}
	}
	if !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool { return r.UID == pod.UID }) {
		return Claim{}, fmt.Errorf("pod %s (%s) is not allowed to use ResourceClaim %s (%s)", pod.Name, pod.UID, pc.ClaimName, claim.UID)
	}
	if claim.Status.Allocation == nil {
		return Claim{}, fmt.Errorf("ResourceClaim %s: not allocated", claim.Name)
	}
	c := Claim{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == "" {
			return Claim{}, fmt.Errorf("ResourceClaim %s: DRA driver name is empty", claim.Name)
		}
		if !slices.Contains(c.Drivers, r.Driver) {
			c.Drivers = append(c.Drivers, r.Driver)
		}
	}
	slices.Sort(c.Drivers)
	return c, nil
}

// claimRef names a claim in a driver call.
type claimRef struct {
	Namespace, Name string
	UID             types.UID
}

// batch is one driver call: the claims to prepare or unprepare with it.
type batch struct {
	Driver string
	Claims []claimRef
}

// addToBatches appends ref to its driver's batch, keeping batches sorted by
// driver so that calls happen in a stable order.
func addToBatches(bs []batch, driver string, ref claimRef) []batch {
	i, found := slices.BinarySearchFunc(bs, driver, func(b batch, d string) int { return strings.Compare(b.Driver, d) })
	if !found {
		bs = slices.Insert(bs, i, batch{Driver: driver})
	}
	bs[i].Claims = append(bs[i].Claims, ref)
	return bs
}

// planPrepare adds the pod to each of its claims and returns the calls
// that prepare the claims not yet prepared. A claim recorded under the same
// name with another UID is an error, as in the kubelet: its old
// incarnation was never unprepared.
func planPrepare(st State, podUID types.UID, claims []Claim) (State, []batch, error) {
	next := st.clone()
	var bs []batch
	for _, c := range claims {
		cur, known := next[c.key()]
		if known && cur.UID != c.UID {
			return st, nil, fmt.Errorf("old ResourceClaim with same name %s and different UID %s still exists (previous pod force-deleted?!)", c.Name, cur.UID)
		}
		if !known {
			// A claim with no driver has nothing to prepare.
			cur = Claim{Namespace: c.Namespace, Name: c.Name, UID: c.UID, Drivers: c.Drivers, Prepared: len(c.Drivers) == 0}
		}
		next[c.key()] = cur.withPod(podUID)
		if cur.Prepared {
			continue
		}
		for _, d := range cur.Drivers {
			bs = addToBatches(bs, d, claimRef{Namespace: c.Namespace, Name: c.Name, UID: c.UID})
		}
	}
	return next, bs, nil
}

// prepareResult is what one driver answered for one claim.
type prepareResult struct {
	Driver  string
	Claim   claimRef
	Devices []Device
}

// markPrepared records the devices of each claim for which every one of
// its drivers answered, and marks it prepared. A claim some driver failed
// for stays unprepared, without devices, to be prepared again.
func markPrepared(st State, results []prepareResult) State {
	byClaim := map[string][]prepareResult{}
	for _, r := range results {
		k := claimKey(r.Claim.Namespace, r.Claim.Name)
		byClaim[k] = append(byClaim[k], r)
	}
	next := st.clone()
	for k, rs := range byClaim {
		c, ok := next[k]
		if !ok || c.Prepared || c.UID != rs[0].Claim.UID {
			continue
		}
		answered := map[string]bool{}
		var devs []Device
		for _, r := range rs {
			answered[r.Driver] = true
			devs = append(devs, r.Devices...)
		}
		if !allAnswered(c.Drivers, answered) {
			continue
		}
		c = c.clone()
		c.Prepared, c.Devices = true, devs
		next[k] = c
	}
	return next
}

func allAnswered(drivers []string, answered map[string]bool) bool {
	for _, d := range drivers {
		if !answered[d] {
			return false
		}
	}
	return true
}

// planUnprepare drops the pod from its claims (keys) that other pods still
// use, and returns the calls that unprepare the claims it was the last
// user of. Those keep the pod's reference until forgetUnprepared: a failed
// unprepare is retried by the next UnprepareResources of the same pod.
func planUnprepare(st State, podUID types.UID, keys []string) (State, []batch) {
	next := st.clone()
	var bs []batch
	for _, k := range keys {
		c, ok := next[k]
		if !ok || !c.hasPod(podUID) {
			continue
		}
		if len(c.Pods) > 1 {
			next[k] = c.withoutPod(podUID)
			continue
		}
		if len(c.Drivers) == 0 {
			delete(next, k)
			continue
		}
		for _, d := range c.Drivers {
			bs = addToBatches(bs, d, claimRef{Namespace: c.Namespace, Name: c.Name, UID: c.UID})
		}
	}
	return next, bs
}

// forgetUnprepared removes the claims every driver of which unprepared
// them (done holds driver+"\x00"+key for each such answer).
func forgetUnprepared(st State, done map[string]bool) State {
	next := st.clone()
	for k, c := range st {
		if len(c.Drivers) > 0 && !slices.ContainsFunc(c.Drivers, func(d string) bool { return !done[d+"\x00"+k] }) {
			delete(next, k)
		}
	}
	return next
}

// baseRequest strips a subrequest ("req/sub" → "req"): drivers report the
// request a device serves without it.
func baseRequest(req string) string {
	base, _, _ := strings.Cut(req, "/")
	return base
}

// preparedClaim is the claim that the pod's resourceClaims entry pc
// names, resolved: nil when the entry needs no claim; notPrepared (with
// the claim's name) when it is not prepared here.
func preparedClaim(st State, pod *v1.Pod, pc v1.PodResourceClaim, notPrepared func(name string) error) (*Claim, error) {
	name, _, err := resolveClaim(pod, pc)
	if err != nil || name == nil {
		return nil, err
	}
	c, ok := st[claimKey(pod.Namespace, *name)]
	if !ok || !c.Prepared {
		return nil, notPrepared(*name)
	}
	return &c, nil
}

// containerCDIDevices returns the CDI device IDs of the claims, and of the
// requests where one is named, that the container references, in the
// order of container.resources.claims, each ID once.
func containerCDIDevices(st State, pod *v1.Pod, container *v1.Container) ([]string, error) {
	notPrepared := func(name string) error {
		return fmt.Errorf("internal error: unable to get claim info for ResourceClaim %s in namespace %s", name, pod.Namespace)
	}
	var out []string
	seen := map[string]bool{}
	add := func(c *Claim, request string) {
		for _, d := range c.Devices {
			if request != "" && len(d.RequestNames) > 0 && !slices.Contains(d.RequestNames, baseRequest(request)) {
				continue
			}
			for _, id := range d.CDIDeviceIDs {
				if !seen[id] {
					seen[id] = true
					out = append(out, id)
				}
			}
		}
	}
	for _, ref := range container.Resources.Claims {
		i := slices.IndexFunc(pod.Spec.ResourceClaims, func(pc v1.PodResourceClaim) bool { return pc.Name == ref.Name })
		if i < 0 {
			continue
		}
		c, err := preparedClaim(st, pod, pod.Spec.ResourceClaims[i], notPrepared)
		if err != nil {
			return nil, err
		}
		if c != nil {
			add(c, ref.Request)
		}
	}
	if name, requests := extendedRequests(pod, container); name != "" {
		c, ok := st[claimKey(pod.Namespace, name)]
		if !ok || !c.Prepared {
			return nil, notPrepared(name)
		}
		for _, r := range requests {
			add(&c, r)
		}
	}
	return out, nil
}

// containerClaims returns copies of the prepared claims container
// references, in the order of pod.spec.resourceClaims (the kubelet's
// GetContainerClaimInfos): a claim not prepared is an error.
func containerClaims(st State, pod *v1.Pod, container *v1.Container) ([]Claim, error) {
	notPrepared := func(name string) error { return fmt.Errorf("unable to get information for ResourceClaim %s", name) }
	var out []Claim
	for _, pc := range pod.Spec.ResourceClaims {
		if !slices.ContainsFunc(container.Resources.Claims, func(r v1.ResourceClaim) bool { return r.Name == pc.Name }) {
			continue
		}
		c, err := preparedClaim(st, pod, pc, notPrepared)
		if err != nil {
			return nil, err
		}
		if c != nil {
			out = append(out, c.clone())
		}
	}
	if name, _ := extendedRequests(pod, container); name != "" {
		c, ok := st[claimKey(pod.Namespace, name)]
		if !ok || !c.Prepared {
			return nil, notPrepared(name)
		}
		out = append(out, c.clone())
	}
	return out, nil
}
