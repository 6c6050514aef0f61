package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/controlplane/serviceaccount"
)

// ServiceAccount tokens, as kube-apiserver's TokenRequest API and its
// service account token authenticator:
//
//   - POST /api/v1/namespaces/NS/serviceaccounts/NAME/token with a
//     TokenRequest (authentication.k8s.io/v1) answers 201 with the same
//     TokenRequest, status.token a signed JWT (package
//     controlplane/serviceaccount) and status.expirationTimestamp.
//     expirationSeconds defaults to 3600 and is at least 600; audiences
//     default to the API server's; spec.boundObjectRef may bind the token
//     to a Pod of the namespace, which must run as that service account
//     (and have the uid given, if one is). A node must bind its token
//     to a pod scheduled on it, by uid (nodeRestrictToken, Kubernetes'
//     NodeRestriction).
//   - A bearer token that is a JWT of skiff's issuer authenticates as
//     system:serviceaccount:NS:NAME (uid the service account's), in
//     groups system:serviceaccounts and system:serviceaccounts:NS, while
//     its service account exists with the uid it names and, for a bound
//     token, its pod does too (and is not past its deletion): deleting
//     either revokes every token issued for it. A token for another
//     audience never authenticates here.
//
// Without SetServiceAccountTokens the subresource is 404 and no pod is
// admitted against service accounts (a registry in unit tests); the
// control plane always sets them.

var serviceAccountKind = api.MustKindOf(&api.ServiceAccount{})

// tokenRequestKind names TokenRequest in errors; it is not a stored kind.
var tokenRequestKind = &api.Kind{Kind: "TokenRequest", Group: "authentication.k8s.io", Version: "v1", Resource: "tokenrequests"}

// SetServiceAccountTokens makes the registry sign tokens with t (the
// token subresource) and turns ServiceAccount admission on. Call it
// before the registry serves.
func (r *Registry) SetServiceAccountTokens(t *serviceaccount.Tokens) { r.saTokens = t }

// CreateToken issues a token for service account namespace/name
// (the token subresource).
func (r *Registry) CreateToken(ctx context.Context, namespace, name string, in *api.TokenRequest) (*api.TokenRequest, error) {
	if r.saTokens == nil {
		return nil, notFoundPath()
	}
	namespace = scope(serviceAccountKind, namespace)
	if err := r.nodeRestrictToken(ctx, namespace, name, in); err != nil {
		return nil, err
	}
	tr := api.Clone(in)
	if tr.Name != "" && tr.Name != name {
		return nil, api.NewInvalid(tokenRequestKind, name, api.FieldErrors{api.Invalid("metadata.name", tr.Name, "must match the service account name if specified")})
	}
	if tr.Namespace != "" && tr.Namespace != namespace {
		return nil, api.NewInvalid(tokenRequestKind, name, api.FieldErrors{api.Invalid("metadata.namespace", tr.Namespace, "must match the service account namespace if specified")})
	}
	api.SetDefaultsTokenRequest(tr)
	if errs := api.ValidateTokenRequest(tr); len(errs) > 0 {
		return nil, api.NewInvalid(tokenRequestKind, name, errs)
	}
	obj, err := r.store.Get(ctx, serviceAccountKind, namespace, name)
	if err != nil {
		return nil, err
	}
	sa := obj.(*api.ServiceAccount)
	req := serviceaccount.Request{
		Namespace:      namespace,
		ServiceAccount: serviceaccount.Ref{Name: sa.Name, UID: sa.UID},
		Audiences:      tr.Spec.Audiences,
		Expiration:     time.Duration(*tr.Spec.ExpirationSeconds) * time.Second,
	}
	if ref := tr.Spec.BoundObjectRef; ref != nil {
		po, err := r.store.Get(ctx, podKind, namespace, ref.Name)
		if err != nil {
			return nil, err
		}
		pod := po.(*api.Pod)
		if api.ServiceAccountNameOf(&pod.Spec) != name {
			return nil, api.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", name))
		}
		if ref.UID != "" && ref.UID != pod.UID {
			return nil, api.NewConflict(&api.Kind{Resource: "Pod"}, ref.Name, fmt.Sprintf(
				"the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
		}
		ref.UID, ref.APIVersion = pod.UID, "v1"
		req.Pod = &serviceaccount.Ref{Name: pod.Name, UID: pod.UID}
	}
	if len(tr.Spec.Audiences) == 0 {
		tr.Spec.Audiences = r.saTokens.Audiences()
	}
	tok, exp, err := r.saTokens.Issue(req)
	if err != nil {
		return nil, api.NewInternal(err)
	}
	tr.TypeMeta = api.TypeMeta{APIVersion: tokenRequestKind.APIVersion(), Kind: tokenRequestKind.Kind}
	tr.Name, tr.Namespace = name, namespace
	tr.CreationTimestamp = api.Now()
	tr.Status = api.TokenRequestStatus{Token: tok, ExpirationTimestamp: api.NewTime(exp)}
	return tr, nil
}

// nodeRestrictToken is Kubernetes' NodeRestriction admission of a
// TokenRequest (admitServiceAccount): a node (system:node:NAME) may ask
// only for a token bound to a pod, by its uid, that is scheduled on that
// node, so that what a node can mint dies with its pods. The Node
// authorizer (authz.go) let the request through because one of the
// node's pods uses the service account; the token's own checks (the pod
// runs as that service account) follow in CreateToken. Requests without a
// user (in-process callers) and other users pass.
func (r *Registry) nodeRestrictToken(ctx context.Context, namespace, name string, tr *api.TokenRequest) error {
	u, ok := UserFrom(ctx)
	if !ok {
		return nil
	}
	node, ok := nodeOf(u)
	if !ok {
		return nil
	}
	ref := tr.Spec.BoundObjectRef
	if ref == nil || ref.APIVersion != "v1" || ref.Kind != "Pod" || ref.Name == "" {
		return forbidden(serviceAccountKind, name, "node requested token not bound to a pod")
	}
	if ref.UID == "" {
		return forbidden(serviceAccountKind, name, "node requested token with a pod binding without a uid")
	}
	po, err := r.store.Get(ctx, podKind, namespace, ref.Name)
	if api.IsNotFound(err) {
		return err
	}
	if err != nil {
		return forbidden(serviceAccountKind, name, err.Error())
	}
	pod := po.(*api.Pod)
	if ref.UID != pod.UID {
		return forbidden(serviceAccountKind, name, fmt.Sprintf(
			"the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	if pod.Spec.NodeName != node {
		return forbidden(serviceAccountKind, name, "node requested token bound to a pod scheduled on a different node")
	}
	return nil
}

// serveToken serves POST serviceaccounts/NAME/token.
func (s *Server) serveToken(w http.ResponseWriter, r *http.Request, info *requestInfo, body []byte) {
	if info.kind != serviceAccountKind || r.Method != http.MethodPost {
		writeError(w, notFoundPath())
		return
	}
	var tr api.TokenRequest
	if err := strictUnmarshal(body, &tr); err != nil {
		writeError(w, api.NewBadRequest("decode TokenRequest: "+err.Error()))
		return
	}
	if tr.APIVersion != "" && tr.APIVersion != tokenRequestKind.APIVersion() || tr.Kind != "" && tr.Kind != tokenRequestKind.Kind {
		writeError(w, api.NewBadRequest(fmt.Sprintf("the body is a %s %s: send an %s TokenRequest", tr.APIVersion, tr.Kind, tokenRequestKind.APIVersion())))
		return
	}
	out, err := s.reg.CreateToken(r.Context(), info.namespace, info.name, &tr)
	respond(w, http.StatusCreated, out, err)
}

// CreateToken implements the agent's token requester in process.
func (l *Local) CreateToken(ctx context.Context, namespace, name string, tr *api.TokenRequest) (*api.TokenRequest, error) {
	return l.r.CreateToken(ctx, namespace, name, tr)
}

// ServiceAccountAuthenticator authenticates service account tokens
// against the registry's signing key and objects (see the top of this
// file). Build it with NewServiceAccountAuthenticator.
type ServiceAccountAuthenticator struct {
	r *Registry
}

var _ TokenAuthenticator = (*ServiceAccountAuthenticator)(nil)

// NewServiceAccountAuthenticator returns the authenticator of r's tokens
// (r must have SetServiceAccountTokens).
func NewServiceAccountAuthenticator(r *Registry) *ServiceAccountAuthenticator {
	return &ServiceAccountAuthenticator{r: r}
}

// errTokenInvalidated is what a token whose objects are gone gets.
var errTokenInvalidated = errors.New("service account token has been invalidated")

// AuthenticateToken implements TokenAuthenticator.
func (a *ServiceAccountAuthenticator) AuthenticateToken(ctx context.Context, token string) (User, bool, error) {
	tk := a.r.saTokens
	if tk == nil {
		return User{}, false, nil
	}
	c, err := tk.Verify(token)
	if errors.Is(err, serviceaccount.ErrNotServiceAccountToken) {
		return User{}, false, nil
	}
	if err != nil {
		return User{}, false, err
	}
	k := c.Kubernetes
	so, err := a.r.store.Get(ctx, serviceAccountKind, k.Namespace, k.ServiceAccount.Name)
	if err != nil {
		if api.IsNotFound(err) {
			return User{}, false, fmt.Errorf("%w: service account %s/%s has been deleted", errTokenInvalidated, k.Namespace, k.ServiceAccount.Name)
		}
		return User{}, false, err
	}
	sa := so.(*api.ServiceAccount)
	if sa.UID != k.ServiceAccount.UID {
		return User{}, false, fmt.Errorf("%w: service account UID (%s) does not match claim (%s)", errTokenInvalidated, sa.UID, k.ServiceAccount.UID)
	}
	if p := k.Pod; p != nil {
		po, err := a.r.store.Get(ctx, podKind, k.Namespace, p.Name)
		if err != nil {
			if api.IsNotFound(err) {
				return User{}, false, fmt.Errorf("%w: pod %s/%s has been deleted", errTokenInvalidated, k.Namespace, p.Name)
			}
			return User{}, false, err
		}
		pod := po.(*api.Pod)
		if pod.UID != p.UID {
			return User{}, false, fmt.Errorf("%w: pod UID (%s) does not match claim (%s)", errTokenInvalidated, pod.UID, p.UID)
		}
		if dt := pod.DeletionTimestamp; dt != nil && dt.Before(time.Now()) {
			return User{}, false, fmt.Errorf("%w: pod %s/%s is deleted and awaiting removal", errTokenInvalidated, k.Namespace, p.Name)
		}
	}
	return User{
		Name:   c.Subject,
		UID:    sa.UID,
		Groups: []string{ServiceAccountsGroup, ServiceAccountsGroup + ":" + k.Namespace},
	}, true, nil
}

// admitServiceAccount is Kubernetes' ServiceAccount admission for a new
// pod (plugin/pkg/admission/serviceaccount), on when the registry signs
// tokens:
//
//   - the pod's service account (spec.serviceAccountName, defaulted to
//     "default") must exist: else 403 `pods "x" is forbidden: error
//     looking up service account ns/sa: serviceaccount "sa" not found`.
//     The "default" account of a live namespace is created on the spot
//     when the serviceaccount controller has not made it yet (Kubernetes
//     refuses such a pod for that moment; skiff closes the window);
//   - unless automountServiceAccountToken is false (the pod's, else the
//     service account's), every container and init container without a
//     mount at /var/run/secrets/kubernetes.io/serviceaccount mounts the
//     projected volume kube-api-access-XXXXX (read-only), added to the
//     pod: the token, ca.crt and namespace. A pod that already has a
//     kube-api-access-* volume (copied from `get -o yaml`) keeps it.
func (r *Registry) admitServiceAccount(ctx context.Context, k *api.Kind, obj api.Object) error {
	pod, ok := obj.(*api.Pod)
	if !ok || r.saTokens == nil {
		return nil
	}
	name := api.ServiceAccountNameOf(&pod.Spec)
	sa, err := r.podServiceAccount(ctx, pod.Namespace, name)
	if err != nil {
		if api.IsNotFound(err) {
			return forbidden(k, pod.Name, fmt.Sprintf("error looking up service account %s/%s: serviceaccount %q not found", pod.Namespace, name, name))
		}
		return err
	}
	automount := true
	if sa.AutomountServiceAccountToken != nil {
		automount = *sa.AutomountServiceAccountToken
	}
	if pod.Spec.AutomountServiceAccountToken != nil {
		automount = *pod.Spec.AutomountServiceAccountToken
	}
	if automount {
		mountAPIAccess(pod)
	}
	return nil
}

// podServiceAccount reads the service account a new pod names, creating
// "default" when its namespace lacks it. It may be shared (getShared):
// read only.
func (r *Registry) podServiceAccount(ctx context.Context, namespace, name string) (*api.ServiceAccount, error) {
	obj, err := r.getShared(ctx, serviceAccountKind, namespace, name)
	if err == nil {
		return obj.(*api.ServiceAccount), nil
	}
	if !api.IsNotFound(err) || name != api.DefaultServiceAccountName {
		return nil, err
	}
	if _, err := r.checkNamespace(ctx, podKind, namespace, name); err != nil {
		return nil, err
	}
	created, err := r.Create(ctx, serviceAccountKind, &api.ServiceAccount{ObjectMeta: api.ObjectMeta{Name: name, Namespace: namespace}})
	if api.IsAlreadyExists(err) {
		created, err = r.store.Get(ctx, serviceAccountKind, namespace, name)
	}
	if err != nil {
		return nil, err
	}
	return created.(*api.ServiceAccount), nil
}

// mountAPIAccess adds the API access volume and its mounts to pod.
func mountAPIAccess(pod *api.Pod) {
	volume := ""
	for _, v := range pod.Spec.Volumes {
		if len(v.Name) > len(api.APIAccessVolumePrefix) && v.Name[:len(api.APIAccessVolumePrefix)] == api.APIAccessVolumePrefix {
			volume = v.Name
			break
		}
	}
	hasVolume := volume != ""
	if !hasVolume {
		volume = generateName(api.APIAccessVolumePrefix)
	}
	needed := false
	for _, list := range [][]api.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			if slices.ContainsFunc(c.VolumeMounts, func(m api.VolumeMount) bool { return m.MountPath == api.ServiceAccountMountPath }) {
				continue
			}
			c.VolumeMounts = append(c.VolumeMounts, api.VolumeMount{Name: volume, ReadOnly: true, MountPath: api.ServiceAccountMountPath})
			needed = true
		}
	}
	if needed && !hasVolume {
		v := api.APIAccessVolume(volume)
		pod.Spec.Volumes = append(pod.Spec.Volumes, v)
	}
}

// kubernetesServiceKey is the Service that may hold the first address of
// the service range (allocate_service.go), as in Kubernetes.
const kubernetesServiceKey = "default/kubernetes"

// KubernetesServiceIP is the first address of the service range: the
// cluster IP of the default/kubernetes Service, which pods reach the API
// server at (KUBERNETES_SERVICE_HOST).
func (r *Registry) KubernetesServiceIP() string {
	r.services.mu.Lock()
	defer r.services.mu.Unlock()
	return r.services.cidr.Addr().Next().String()
}
