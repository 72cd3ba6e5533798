package dra

import (
	"errors"
	"fmt"
	"slices"

	drapb "k8s.io/kubelet/pkg/apis/dra/v1"
)

// toRequestClaims is a batch's claims as the DRA API names them.
func toRequestClaims(b batch) []*drapb.Claim {
	out := make([]*drapb.Claim, 0, len(b.Claims))
	for _, c := range b.Claims {
		out = append(out, &drapb.Claim{Namespace: c.Namespace, Name: c.Name, Uid: string(c.UID)})
	}
	return out
}

// claimResult is one claim's answer in either response, reduced to what
// checkAnswers needs.
type claimResult struct {
	Error   string
	Devices []*drapb.Device
}

// checkAnswers matches a driver's answers (by claim UID) to the claims it
// was asked about. It returns the claims answered without error with their
// devices, and an error for each claim that failed or was skipped. An
// answer about a claim berth did not ask for means the driver cannot be
// trusted: then nothing is returned as done. op is the call's name for the
// errors, which wrap the kubelet's words in the driver's name.
func checkAnswers(op string, b batch, answers map[string]claimResult) ([]prepareResult, error) {
	for uid := range answers {
		if !slices.ContainsFunc(b.Claims, func(c claimRef) bool { return string(c.UID) == uid }) {
			return nil, fmt.Errorf("DRA driver %s: %s returned result for unknown claim UID %s", b.Driver, op, uid)
		}
	}
	var done []prepareResult
	var errs []error
	for _, c := range b.Claims {
		a, ok := answers[string(c.UID)]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("DRA driver %s: %s skipped ResourceClaim %s", b.Driver, op, c.Name))
		case a.Error != "":
			errs = append(errs, fmt.Errorf("DRA driver %s: %s failed for ResourceClaim %s: %s", b.Driver, op, c.Name, a.Error))
		default:
			done = append(done, prepareResult{Driver: b.Driver, Claim: c, Devices: toDevices(b.Driver, a.Devices)})
		}
	}
	return done, errors.Join(errs...)
}

func toDevices(driver string, ds []*drapb.Device) []Device {
	var out []Device
	for _, d := range ds {
		if d == nil {
			continue
		}
		out = append(out, Device{
			Driver:       driver,
			Pool:         d.GetPoolName(),
			Device:       d.GetDeviceName(),
			RequestNames: slices.Clone(d.GetRequestNames()),
			CDIDeviceIDs: slices.Clone(d.GetCdiDeviceIds()),
			ShareID:      d.GetShareId(),
		})
	}
	return out
}

func prepareAnswers(resp *drapb.NodePrepareResourcesResponse) map[string]claimResult {
	out := map[string]claimResult{}
	for uid, r := range resp.GetClaims() {
		out[uid] = claimResult{Error: r.GetError(), Devices: r.GetDevices()}
	}
	return out
}

func unprepareAnswers(resp *drapb.NodeUnprepareResourcesResponse) map[string]claimResult {
	out := map[string]claimResult{}
	for uid, r := range resp.GetClaims() {
		out[uid] = claimResult{Error: r.GetError()}
	}
	return out
}
