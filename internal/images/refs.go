package images

import (
	"strings"

	"github.com/distribution/reference"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// refSet is a set of image references, each kept in the forms the runtime
// reports images under, so that "busybox", "docker.io/library/busybox:latest"
// and the image's ID or digest all find the same image.
type refSet map[string]struct{}

func newRefSet(refs ...string) refSet {
	s := refSet{}
	for _, ref := range refs {
		for _, k := range refKeys(ref) {
			s[k] = struct{}{}
		}
	}
	return s
}

// has reports whether any of an image's keys (see imageKeys) is in the set.
func (s refSet) has(keys []string) bool {
	for _, k := range keys {
		if _, ok := s[k]; ok {
			return true
		}
	}
	return false
}

// refKeys returns the normalized forms of ref: an image ID ("sha256:<hex>",
// or the bare 64-hex form) as a full digest; a name as the runtime
// normalizes it (ParseNormalizedNamed + TagNameOnly: "busybox" is
// "docker.io/library/busybox:latest"). A name with both a tag and a digest
// yields both forms: matching more than needed only protects an image more.
// What does not parse is kept as is, to match only itself.
func refKeys(ref string) []string {
	ref = strings.TrimSpace(ref)
	if ref == "" {
		return nil
	}
	parsed, err := reference.ParseAnyReference(ref)
	if err != nil {
		return []string{ref}
	}
	named, ok := parsed.(reference.Named)
	if !ok {
		return []string{parsed.String()} // an ID
	}
	name := reference.TrimNamed(named)
	var keys []string
	if d, ok := named.(reference.Digested); ok {
		if c, err := reference.WithDigest(name, d.Digest()); err == nil {
			keys = append(keys, c.String())
		}
	}
	if t, ok := named.(reference.Tagged); ok {
		if nt, err := reference.WithTag(name, t.Tag()); err == nil {
			keys = append(keys, nt.String())
		}
	}
	if len(keys) == 0 {
		keys = append(keys, reference.TagNameOnly(named).String())
	}
	return keys
}

// imageKeys returns every normalized form an image is known by: its ID, its
// tags and its digests.
func imageKeys(img *runtimeapi.Image) []string {
	keys := refKeys(img.GetId())
	for _, t := range img.GetRepoTags() {
		keys = append(keys, refKeys(t)...)
	}
	for _, d := range img.GetRepoDigests() {
		keys = append(keys, refKeys(d)...)
	}
	return keys
}

// familiar returns ref as people write it ("busybox:1.35" for
// "docker.io/library/busybox:1.35"), or ref itself when it does not parse.
func familiar(ref string) string {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return ref
	}
	return reference.FamiliarString(named)
}
