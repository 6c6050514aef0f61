package podworker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"skiff.dev/skiff/api"
)

// Projected volumes and the pod's API access, as the kubelet's projected
// volume plugin and token manager:
//
//   - a projected volume is one directory holding the files of its
//     sources: serviceAccountToken (a TokenRequest for the pod's service
//     account, bound to the pod), configMap keys, downwardAPI fields;
//   - ServiceAccount admission gives every pod one (kube-api-access-xxxxx,
//     mounted read-only at /var/run/secrets/kubernetes.io/serviceaccount:
//     token, ca.crt, namespace), which is what client-go's in-cluster
//     config and `kubectl` inside a pod read;
//   - a token is asked for with the lifetime the source names (3607 s for
//     the API access volume) and asked for again once 80% of its life has
//     passed (the kubelet's rule), the file replaced atomically (rename in
//     the volume directory, which is what the container has bind-mounted,
//     so the container sees the new token at once). Sync looks again by
//     then.

// TokenRequester asks the API for a service account token (the token
// subresource): *client.Client over HTTP, apiserver.Local in process.
// The agent's client is asserted to it; without one a pod with a token
// volume cannot start.
type TokenRequester interface {
	CreateToken(ctx context.Context, namespace, serviceAccount string, tr *api.TokenRequest) (*api.TokenRequest, error)
}

// tokenRefresh is when a token of the given lifetime, issued at issued, is
// to be replaced: at 80% of its life.
func tokenRefresh(issued, expires time.Time) time.Time {
	return issued.Add(expires.Sub(issued) * 8 / 10)
}

// tokenRetry is when a failed token refresh is tried again.
const tokenRetry = 10 * time.Second

// issuedToken is a token the worker wrote into a volume.
type issuedToken struct {
	refreshAt time.Time
}

// projectedFiles gathers the files of a projected volume.
func (w *Worker) projectedFiles(ctx context.Context, pod *api.Pod, v *api.Volume, st *podState) (map[string][]byte, []api.KeyToPath, error) {
	files := map[string][]byte{}
	var items []api.KeyToPath
	add := func(path string, data []byte, mode *int32) {
		files[path] = data
		items = append(items, api.KeyToPath{Key: path, Path: path, Mode: mode})
	}
	for i, src := range v.Projected.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			tok, err := w.requestToken(ctx, pod, v.Name, i, src.ServiceAccountToken, st)
			if err != nil {
				return nil, nil, err
			}
			add(src.ServiceAccountToken.Path, []byte(tok), nil)
		case src.ConfigMap != nil:
			cm, err := w.configMap(ctx, pod.Namespace, src.ConfigMap.Name)
			if err != nil {
				if api.IsNotFound(err) && isOptional(src.ConfigMap.Optional) {
					continue
				}
				return nil, nil, fmt.Errorf("configmap %q: %w", src.ConfigMap.Name, err)
			}
			data := map[string][]byte{}
			for k, val := range cm.Data {
				data[k] = []byte(val)
			}
			for k, val := range cm.BinaryData {
				data[k] = val
			}
			if len(src.ConfigMap.Items) == 0 {
				for k, val := range data {
					add(k, val, nil)
				}
				continue
			}
			for _, it := range src.ConfigMap.Items {
				val, ok := data[it.Key]
				if !ok {
					if isOptional(src.ConfigMap.Optional) {
						continue
					}
					return nil, nil, fmt.Errorf("configmap %s has no key %q", src.ConfigMap.Name, it.Key)
				}
				add(it.Path, val, it.Mode)
			}
		case src.DownwardAPI != nil:
			for _, it := range src.DownwardAPI.Items {
				if it.FieldRef == nil {
					continue
				}
				val, err := fieldValue(pod, it.FieldRef.FieldPath, w.cfg.NodeIP)
				if err != nil {
					return nil, nil, err
				}
				add(it.Path, []byte(val), it.Mode)
			}
		}
	}
	return files, items, nil
}

// requestToken asks for a token of pod's service account for source i of
// volume, bound to the pod, and remembers when to replace it.
func (w *Worker) requestToken(ctx context.Context, pod *api.Pod, volume string, i int, src *api.ServiceAccountTokenProjection, st *podState) (string, error) {
	tr, ok := w.cfg.Client.(TokenRequester)
	if !ok {
		return "", errors.New("this agent's API client cannot request service account tokens")
	}
	exp := int64(api.DefaultTokenExpirationSeconds)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	req := &api.TokenRequest{Spec: api.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &api.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	sa := api.ServiceAccountNameOf(&pod.Spec)
	now := w.cfg.Now()
	out, err := tr.CreateToken(ctx, pod.Namespace, sa, req)
	if err != nil {
		return "", fmt.Errorf("request a token for service account %s/%s: %w", pod.Namespace, sa, err)
	}
	w.mu.Lock()
	if st.tokens == nil {
		st.tokens = map[string]issuedToken{}
	}
	st.tokens[fmt.Sprintf("%s/%d", volume, i)] = issuedToken{refreshAt: tokenRefresh(now, out.Status.ExpirationTimestamp.Time)}
	w.mu.Unlock()
	return out.Status.Token, nil
}

// refreshTokens rewrites the projected volumes of pod whose tokens are
// due, and returns when the next one is (0: none).
func (w *Worker) refreshTokens(ctx context.Context, pod *api.Pod, st *podState) time.Duration {
	now := w.cfg.Now()
	var next time.Time
	retry := false
	for i := range pod.Spec.Volumes {
		v := &pod.Spec.Volumes[i]
		if v.Projected == nil {
			continue
		}
		due, known := false, false
		w.mu.Lock()
		for j, src := range v.Projected.Sources {
			if src.ServiceAccountToken == nil {
				continue
			}
			t, ok := st.tokens[fmt.Sprintf("%s/%d", v.Name, j)]
			if !ok {
				continue // not written yet: the container start writes it
			}
			known = true
			if !now.Before(t.refreshAt) {
				due = true
			}
		}
		w.mu.Unlock()
		if known && due {
			failed := false
			if _, err := w.prepareVolume(ctx, pod, v, st); err != nil {
				failed = true
				w.log.Warn("refresh service account token", "pod", api.KeyOf(pod), "volume", v.Name, "err", err)
				w.event(ctx, pod, api.EventWarning, "FailedMount", "MountVolume.SetUp failed for volume %q : %v", v.Name, err)
			}
			if failed {
				retry = true
			}
		}
		w.mu.Lock()
		for j := range v.Projected.Sources {
			if t, ok := st.tokens[fmt.Sprintf("%s/%d", v.Name, j)]; ok && (next.IsZero() || t.refreshAt.Before(next)) {
				next = t.refreshAt
			}
		}
		w.mu.Unlock()
	}
	if next.IsZero() {
		return 0
	}
	if retry {
		return tokenRetry // the API did not answer: try again soon, not in a loop
	}
	return max(next.Sub(now), time.Second)
}

// tokensCurrent reports whether every token of projected volume v was
// written and is not due yet.
func (w *Worker) tokensCurrent(v *api.Volume, st *podState) bool {
	now := w.cfg.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for j, src := range v.Projected.Sources {
		if src.ServiceAccountToken == nil {
			continue
		}
		t, ok := st.tokens[fmt.Sprintf("%s/%d", v.Name, j)]
		if !ok || !now.Before(t.refreshAt) {
			return false
		}
	}
	return true
}
