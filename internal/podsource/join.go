package podsource

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// JoinCluster adds the API server's pods to the node's own (the merge of
// static and applied pods). It sends as soon as the node's own pods are in,
// so static pods start while the API server is away; until the API server's
// first snapshot the result is Incomplete, so no pod of the cluster that
// still runs is taken for unwanted. A name the node's own pods already use
// stays theirs. It keeps only the newest undelivered snapshot and returns
// when ctx is done.
func JoinCluster(ctx context.Context, local, cluster <-chan Snapshot, out chan<- Snapshot, log *slog.Logger) {
	var (
		own, api          Snapshot
		haveOwn, haveAPI  bool
		last              Snapshot
		pending, anything bool
	)
	for {
		var send chan<- Snapshot
		if pending {
			send = out
		}
		select {
		case <-ctx.Done():
			return
		case s := <-local:
			own, haveOwn = s, true
		case s := <-cluster:
			api, haveAPI = s, true
		case send <- last:
			pending = false
			continue
		}
		if !haveOwn {
			continue
		}
		next := joinSnapshots(own, api, !haveAPI, log)
		if anything && next.Equal(last) {
			continue
		}
		last, pending, anything = next, true, true
	}
}

// joinSnapshots is own's pods and errors plus api's pods whose names are
// free, sorted by namespace/name. The pods are the receiver's copies.
func joinSnapshots(own, api Snapshot, incomplete bool, log *slog.Logger) Snapshot {
	out := Snapshot{Errors: slices.Clone(own.Errors), Incomplete: incomplete}
	taken := make(map[string]bool, len(own.Pods))
	for _, p := range own.Pods {
		taken[p.Namespace+"/"+p.Name] = true
		out.Pods = append(out.Pods, p.DeepCopy())
	}
	for _, p := range api.Pods {
		if taken[p.Namespace+"/"+p.Name] {
			log.Warn("pod of the API server not run: a pod of the node has its name", "pod", p.Namespace+"/"+p.Name)
			continue
		}
		out.Pods = append(out.Pods, p.DeepCopy())
	}
	slices.SortStableFunc(out.Pods, func(a, b *v1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	return out
}
