package podworker

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/internal/v1helper"
)

// fakeServices serves services by namespace; fail answers every List.
type fakeServices struct {
	byNamespace map[string][]*v1.Service
	synced      bool
	fail        error
	listed      []string
}

func (f *fakeServices) List(namespace string) ([]*v1.Service, error) {
	f.listed = append(f.listed, namespace)
	if f.fail != nil {
		return nil, f.fail
	}
	return f.byNamespace[namespace], nil
}

func (f *fakeServices) HasSynced() bool { return f.synced }

func clusterIPService(namespace, name, ip string, port int32) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1.ServiceSpec{ClusterIP: ip, Ports: []v1.ServicePort{{Name: "https", Port: port, Protocol: v1.ProtocolTCP}}},
	}
}

func envNames(env []v1.EnvVar) map[string]string {
	m := make(map[string]string, len(env))
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return m
}

func TestServiceEnv(t *testing.T) {
	src := &fakeServices{synced: true, byNamespace: map[string][]*v1.Service{
		"default": {clusterIPService("default", "kubernetes", "10.0.0.1", 443), clusterIPService("default", "other", "10.0.0.2", 80)},
		"prod":    {clusterIPService("prod", "web-api", "10.0.0.3", 8443)},
	}}
	w, _ := testWorker(Deps{Services: src})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "p"}}

	env, err := w.serviceEnv(pod)
	if err != nil {
		t.Fatal(err)
	}
	got := envNames(env)
	if got["KUBERNETES_SERVICE_HOST"] != "10.0.0.1" || got["KUBERNETES_SERVICE_PORT"] != "443" ||
		got["WEB_API_SERVICE_HOST"] != "10.0.0.3" || got["WEB_API_PORT_8443_TCP_ADDR"] != "10.0.0.3" {
		t.Errorf("service links on: %v", got)
	}
	if _, ok := got["OTHER_SERVICE_HOST"]; ok {
		t.Errorf("a service of another namespace than the pod's and not the master: %v", got)
	}
	if want := []string{"default", "prod"}; !reflect.DeepEqual(src.listed, want) {
		t.Errorf("listed %v, want %v", src.listed, want)
	}

	pod.Spec.EnableServiceLinks = new(false)
	if env, err = w.serviceEnv(pod); err != nil {
		t.Fatal(err)
	}
	got = envNames(env)
	if len(env) != 8 || got["KUBERNETES_SERVICE_HOST"] != "10.0.0.1" {
		t.Errorf("service links off: the master service's 8 variables only, got %v", got)
	}

	src.synced = false
	if _, err := w.serviceEnv(pod); err == nil || !strings.Contains(err.Error(), "services have not yet been read at least once") {
		t.Errorf("an API server pod before the services are read: %v", err)
	}
	static := pod.DeepCopy()
	static.Annotations = map[string]string{v1helper.ConfigSourceAnnotationKey: v1helper.FileSource}
	if env, err := w.serviceEnv(static); err != nil || len(env) != 8 {
		t.Errorf("a static pod does not wait for the services: %v, %v", env, err)
	}

	src.fail = errors.New("boom")
	if _, err := w.serviceEnv(static); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Errorf("a failed list: %v", err)
	}

	w, _ = testWorker(Deps{})
	if env, err := w.serviceEnv(pod); env != nil || err != nil {
		t.Errorf("standalone: %v, %v", env, err)
	}
}
