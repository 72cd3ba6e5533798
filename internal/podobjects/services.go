package podobjects

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// Services keeps every Service of the cluster, for the service environment
// variables of containers (package envvars), as the kubelet's service
// informer does. Unlike configMaps and secrets, services are watched: the
// Node authorizer lets nodes list and watch them all, a container needs
// those of its whole namespace, and it needs them at once when it starts.
//
// It has an informer factory of its own, not filtered like the one of the
// node's pods.
type Services struct {
	factory  informers.SharedInformerFactory
	informer toolscache.SharedIndexInformer
	lister   corelisters.ServiceLister
}

// NewServices returns the cache of the services client sees. Nothing is
// read before Run.
func NewServices(client kubernetes.Interface) *Services {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTransform(stripManagedFields))
	inf := factory.Core().V1().Services()
	// Informer registers the informer with the factory, for Run to start.
	return &Services{factory: factory, informer: inf.Informer(), lister: inf.Lister()}
}

// Run lists and watches the services until ctx is done, then waits for the
// watch to end. While the API server is away, the last services read stay.
func (s *Services) Run(ctx context.Context) {
	s.factory.Start(ctx.Done())
	<-ctx.Done()
	s.factory.Shutdown()
}

// HasSynced reports whether the services were all read once. Until then
// List may miss some: the kubelet refuses to start the containers of
// API-server pods until then, lest one starts without
// KUBERNETES_SERVICE_HOST.
func (s *Services) HasSynced() bool {
	return s.informer.HasSynced()
}

// List returns the services of namespace, from the cache. They are shared
// and must not be modified.
func (s *Services) List(namespace string) ([]*v1.Service, error) {
	list, err := s.lister.Services(namespace).List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("listing services of namespace %q: %w", namespace, err)
	}
	return list, nil
}

// stripManagedFields drops what berth never reads and is often most of a
// service's size, since the cache holds every service of the cluster.
func stripManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.ObjectMetaAccessor); ok {
		m.GetObjectMeta().SetManagedFields(nil)
	}
	return obj, nil
}
