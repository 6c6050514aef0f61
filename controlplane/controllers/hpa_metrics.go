package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"skiff.dev/skiff/api"
)

// MetricsSource is where the HPA controller reads metrics: Kubernetes'
// MetricsClient. The real one (APIMetrics) asks the API server's
// metrics.k8s.io, custom.metrics.k8s.io and external.metrics.k8s.io;
// tests use a table.
type MetricsSource interface {
	// ResourceMetric is each pod's usage of resource (cpu, memory) from
	// metrics.k8s.io: one container's, or the sum of the pod's, in
	// milli-units. A pod lacking the container or the resource is left out.
	ResourceMetric(ctx context.Context, namespace string, selector labels.Selector, resource, container string) (podMetrics, error)
	// PodsMetric is each selected pod's value of a custom metric.
	PodsMetric(ctx context.Context, namespace, metric string, selector labels.Selector, metricSelector labels.Selector) (podMetrics, error)
	// ObjectMetric is one object's value of a custom metric.
	ObjectMetric(ctx context.Context, namespace, metric string, obj api.CrossVersionObjectReference, metricSelector labels.Selector) (int64, error)
	// ExternalMetric is the values of the series of an external metric.
	ExternalMetric(ctx context.Context, namespace, metric string, metricSelector labels.Selector) ([]int64, error)
}

// RawGetter sends a raw request to the API server (*client.Client).
type RawGetter interface {
	Do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error)
}

// APIMetrics reads the metrics APIs through the API server.
type APIMetrics struct{ C RawGetter }

var _ MetricsSource = APIMetrics{}

func (m APIMetrics) get(ctx context.Context, path string, q url.Values, out any) error {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	resp, err := m.C.Do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(out)
}

// ResourceMetric implements MetricsSource.
func (m APIMetrics) ResourceMetric(ctx context.Context, namespace string, selector labels.Selector, resource, container string) (podMetrics, error) {
	var list api.PodMetricsList
	q := url.Values{"labelSelector": {selector.String()}}
	if err := m.get(ctx, "/apis/"+api.MetricsGroupVersion+"/namespaces/"+url.PathEscape(namespace)+"/pods", q, &list); err != nil {
		return nil, fmt.Errorf("unable to get metrics for resource %s: unable to fetch metrics from resource metrics API: %w", resource, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("unable to get metrics for resource %s: no metrics returned from resource metrics API", resource)
	}
	out := podMetrics{}
	for _, pm := range list.Items {
		var sum int64
		found, complete := false, true
		for _, c := range pm.Containers {
			if container != "" && c.Name != container {
				continue
			}
			v, ok := c.Usage[resource]
			if !ok {
				complete = false
				break
			}
			sum = satAdd(sum, v.MilliValue())
			found = true
		}
		if found && complete {
			out[pm.Name] = podMetric{Value: sum, Timestamp: pm.Timestamp.Time, Window: pm.Window.Duration}
		}
	}
	return out, nil
}

// PodsMetric implements MetricsSource: GET
// custom.metrics.k8s.io/v1beta2/namespaces/NS/pods/*/METRIC.
func (m APIMetrics) PodsMetric(ctx context.Context, namespace, metric string, selector, metricSelector labels.Selector) (podMetrics, error) {
	var list api.MetricValueList
	q := url.Values{"labelSelector": {selector.String()}}
	if metricSelector != nil && !metricSelector.Empty() {
		q.Set("metricLabelSelector", metricSelector.String())
	}
	path := "/apis/" + api.CustomMetricsGroupVersion + "/namespaces/" + url.PathEscape(namespace) + "/pods/*/" + url.PathEscape(metric)
	if err := m.get(ctx, path, q, &list); err != nil {
		return nil, fmt.Errorf("unable to get metric %s: unable to fetch metrics from custom metrics API: %w", metric, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("unable to get metric %s: no metrics returned from custom metrics API", metric)
	}
	out := podMetrics{}
	for _, v := range list.Items {
		pm := podMetric{Value: v.Value.MilliValue(), Timestamp: v.Timestamp.Time}
		if v.WindowSeconds != nil {
			pm.Window = time.Duration(*v.WindowSeconds) * time.Second
		}
		out[v.DescribedObject.Name] = pm
	}
	return out, nil
}

// ObjectMetric implements MetricsSource: GET
// custom.metrics.k8s.io/v1beta2/namespaces/NS/RESOURCE/NAME/METRIC.
func (m APIMetrics) ObjectMetric(ctx context.Context, namespace, metric string, obj api.CrossVersionObjectReference, metricSelector labels.Selector) (int64, error) {
	group := ""
	if i := strings.LastIndex(obj.APIVersion, "/"); i >= 0 {
		group = obj.APIVersion[:i]
	}
	resource := strings.ToLower(obj.Kind) + "s"
	if k, err := api.LookupKind(obj.APIVersion, obj.Kind); err == nil {
		resource = k.Resource
	}
	if group != "" {
		resource += "." + group
	}
	var list api.MetricValueList
	q := url.Values{}
	if metricSelector != nil && !metricSelector.Empty() {
		q.Set("metricLabelSelector", metricSelector.String())
	}
	path := "/apis/" + api.CustomMetricsGroupVersion + "/namespaces/" + url.PathEscape(namespace) + "/" + resource + "/" + url.PathEscape(obj.Name) + "/" + url.PathEscape(metric)
	if err := m.get(ctx, path, q, &list); err != nil {
		return 0, fmt.Errorf("unable to get metric %s: %s on %s %s/%s: %w", metric, obj.Kind, obj.Name, namespace, obj.Name, err)
	}
	if len(list.Items) != 1 {
		return 0, fmt.Errorf("unable to get metric %s: no metrics returned from custom metrics API", metric)
	}
	return list.Items[0].Value.MilliValue(), nil
}

// ExternalMetric implements MetricsSource: GET
// external.metrics.k8s.io/v1beta1/namespaces/NS/METRIC.
func (m APIMetrics) ExternalMetric(ctx context.Context, namespace, metric string, metricSelector labels.Selector) ([]int64, error) {
	var list api.ExternalMetricValueList
	q := url.Values{}
	if metricSelector != nil && !metricSelector.Empty() {
		q.Set("labelSelector", metricSelector.String())
	}
	path := "/apis/" + api.ExternalMetricsGroupVersion + "/namespaces/" + url.PathEscape(namespace) + "/" + url.PathEscape(metric)
	if err := m.get(ctx, path, q, &list); err != nil {
		return nil, fmt.Errorf("unable to get external metric %s/%s/%v: unable to fetch metrics from external metrics API: %w", namespace, metric, metricSelector, err)
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("unable to get external metric %s/%s/%v: no metrics returned from external metrics API", namespace, metric, metricSelector)
	}
	out := make([]int64, 0, len(list.Items))
	for _, v := range list.Items {
		out = append(out, v.Value.MilliValue())
	}
	return out, nil
}
