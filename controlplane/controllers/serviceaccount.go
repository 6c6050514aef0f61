package controllers

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
)

// Two small controllers give every namespace what its pods need to reach
// the API, as Kubernetes' serviceaccount controller and root-ca-cert
// publisher do. One reconcile of a namespace name:
//
//   - serviceaccount-controller: a namespace that is not terminating has
//     a ServiceAccount "default" (created when missing; one deleted by
//     hand comes back);
//   - root-ca-cert-publisher: it has the ConfigMap kube-root-ca.crt whose
//     key ca.crt is the cluster CA (the API server's serving certificate
//     chains to it): created when missing, rewritten when someone changed
//     it. Pods get it as ca.crt of their API access volume.
//
// Both work from the caches and write only what differs, so a resync of
// every namespace writes nothing.

const (
	serviceAccountControllerName = "serviceaccount-controller"
	rootCAPublisherName          = "root-ca-cert-publisher"
)

// rootCADescription is the annotation Kubernetes puts on kube-root-ca.crt.
const rootCADescription = "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters."

func serviceAccountKind() *api.Kind { return api.MustKindOf(&api.ServiceAccount{}) }
func configMapKind() *api.Kind      { return api.MustKindOf(&api.ConfigMap{}) }

// ServiceAccountController keeps a "default" ServiceAccount in every namespace.
type ServiceAccountController struct {
	client          client.Interface
	namespaces      Lister // *api.Namespace
	serviceAccounts Lister // *api.ServiceAccount
	log             *slog.Logger
}

// NewServiceAccountController returns the controller over caches of
// namespaces and service accounts.
func NewServiceAccountController(c client.Interface, namespaces, serviceAccounts Lister, log *slog.Logger) *ServiceAccountController {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ServiceAccountController{client: c, namespaces: namespaces, serviceAccounts: serviceAccounts, log: log.With("controller", serviceAccountControllerName)}
}

// liveNamespace reads a namespace that may hold new objects.
func liveNamespace(l Lister, name string) bool {
	ns, ok := getAs[*api.Namespace](l, "", name)
	return ok && ns.DeletionTimestamp == nil && ns.Status.Phase != api.NamespaceTerminating
}

// Reconcile makes sure namespace key has its default service account.
func (s *ServiceAccountController) Reconcile(ctx context.Context, key string) error {
	if !liveNamespace(s.namespaces, key) {
		return nil
	}
	if _, ok := s.serviceAccounts.Get(key, api.DefaultServiceAccountName); ok {
		logReconcile(s.log, false, key, "default service account present", "a default service account", "none")
		return nil
	}
	sa := &api.ServiceAccount{ObjectMeta: api.ObjectMeta{Name: api.DefaultServiceAccountName, Namespace: key}}
	_, err := s.client.Create(ctx, sa)
	switch {
	case api.IsAlreadyExists(err):
		return nil // made meanwhile (the first pod of the namespace, or a restart)
	case err != nil && isTerminating(err):
		return nil
	case err != nil:
		return fmt.Errorf("create service account %s/default: %w", key, err)
	}
	logReconcile(s.log, true, key, "no default service account", "a default service account", "created serviceaccount default")
	return nil
}

// isTerminating: the namespace began to go away after the cache saw it.
func isTerminating(err error) bool { return api.ReasonOf(err) == api.ReasonForbidden }

// ServiceAccountHandler enqueues the namespace of a service account that
// went away (the default one comes back).
func ServiceAccountHandler(enqueue func(key string)) client.Handler {
	return client.Handler{OnDelete: func(o api.Object) { enqueue(o.GetObjectMeta().Namespace) }}
}

// RootCAPublisher keeps kube-root-ca.crt in every namespace.
type RootCAPublisher struct {
	client     client.Interface
	namespaces Lister // *api.Namespace
	configMaps Lister // *api.ConfigMap
	caPEM      []byte
	log        *slog.Logger
}

// NewRootCAPublisher returns the publisher of caPEM (the cluster CA
// certificate, PEM) over caches of namespaces and config maps.
func NewRootCAPublisher(c client.Interface, namespaces, configMaps Lister, caPEM []byte, log *slog.Logger) *RootCAPublisher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &RootCAPublisher{client: c, namespaces: namespaces, configMaps: configMaps, caPEM: bytes.Clone(caPEM), log: log.With("controller", rootCAPublisherName)}
}

// Reconcile makes namespace key's kube-root-ca.crt hold the CA.
func (p *RootCAPublisher) Reconcile(ctx context.Context, key string) error {
	if !liveNamespace(p.namespaces, key) {
		return nil
	}
	want := string(p.caPEM)
	cur, ok := getAs[*api.ConfigMap](p.configMaps, key, api.RootCAConfigMap)
	if ok && len(cur.Data) == 1 && cur.Data[api.RootCAKey] == want && len(cur.BinaryData) == 0 {
		logReconcile(p.log, false, key, "kube-root-ca.crt up to date", "the cluster CA in kube-root-ca.crt", "none")
		return nil
	}
	var err error
	action := "created configmap " + api.RootCAConfigMap
	if ok {
		u := api.Clone(cur)
		u.Data, u.BinaryData = map[string]string{api.RootCAKey: want}, nil
		_, err = p.client.Update(ctx, u)
		action = "rewrote configmap " + api.RootCAConfigMap
	} else {
		cm := &api.ConfigMap{
			ObjectMeta: api.ObjectMeta{Name: api.RootCAConfigMap, Namespace: key,
				Annotations: map[string]string{"kubernetes.io/description": rootCADescription}},
			Data: map[string]string{api.RootCAKey: want},
		}
		_, err = p.client.Create(ctx, cm)
		if api.IsAlreadyExists(err) {
			return client.RequeueAfter(conflictRetry) // the cache has not shown it yet
		}
	}
	if err != nil && isTerminating(err) {
		return nil
	}
	if err != nil {
		return requeueOnConflict(p.log, key, fmt.Errorf("write configmap %s/%s: %w", key, api.RootCAConfigMap, err))
	}
	logReconcile(p.log, true, key, "kube-root-ca.crt missing or changed", "the cluster CA in kube-root-ca.crt", action)
	return nil
}

// ConfigMapHandler enqueues the namespace of a kube-root-ca.crt that
// changed or went away.
func (p *RootCAPublisher) ConfigMapHandler(enqueue func(key string)) client.Handler {
	f := func(o api.Object) {
		if m := o.GetObjectMeta(); m.Name == api.RootCAConfigMap {
			enqueue(m.Namespace)
		}
	}
	return client.Handler{OnUpdate: func(_, o api.Object) { f(o) }, OnDelete: f}
}
