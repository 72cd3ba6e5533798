package agent

import (
	"context"
	"log/slog"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/berth-dev/berth/internal/network"
)

// watchPodCIDR watches this node's Node and hands its spec.podCIDR to
// apply when it is set or changes, until ctx is done. The kubelet reads it
// at each status update (updateNode → updatePodCIDR); a watch gives the
// pod network its range as soon as kube-controller-manager allocates it,
// without waiting for the next update period. berth never sets
// spec.podCIDR itself: the kubelet of v1.36 does not either (the field is
// the controller-manager's, or whoever registers the Node).
func watchPodCIDR(ctx context.Context, client kubernetes.Interface, nodeName string, apply func(string) error, log *slog.Logger) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector(metav1.ObjectNameField, nodeName).String()
		}))
	var mu sync.Mutex
	applied := ""
	handle := func(obj any) {
		node, ok := obj.(*v1.Node)
		if !ok {
			return
		}
		cidr := network.NodePodCIDR(node.Spec)
		mu.Lock()
		defer mu.Unlock()
		if cidr == "" || cidr == applied {
			return
		}
		if err := apply(cidr); err != nil {
			// Tried again at the informer's next event for the Node (its
			// status is updated every nodeStatusUpdateFrequency).
			log.Error("using the Node's spec.podCIDR failed", "podCIDR", cidr, "err", err)
			return
		}
		log.Info("pod network range from the Node's spec.podCIDR", "podCIDR", cidr)
		applied = cidr
	}
	_, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    handle,
		UpdateFunc: func(_, obj any) { handle(obj) },
	})
	if err != nil {
		log.Error("watching the Node for its podCIDR failed", "err", err)
		return
	}
	factory.Start(ctx.Done())
	<-ctx.Done()
	factory.Shutdown()
}
