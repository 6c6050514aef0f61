package api

import (
	"encoding/json"
	"fmt"
)

// autoscaling/v1 HorizontalPodAutoscaler, served beside the stored v2 as
// kube-apiserver serves it: v1 has one metric, spec.targetCPUUtilization
// Percentage (status.currentCPUUtilizationPercentage); everything else v2
// has travels in annotations, so a v1 client's read-modify-write keeps it
// (Kubernetes' pkg/apis/autoscaling/v1 conversion). skiff keeps the
// annotations' contents in the v2 shape (Kubernetes writes the metrics
// annotation in v2beta1's shape); they are for round trips, not reading.
const (
	hpaMetricsAnnotation        = "autoscaling.alpha.kubernetes.io/metrics"
	hpaCurrentMetricsAnnotation = "autoscaling.alpha.kubernetes.io/current-metrics"
	hpaConditionsAnnotation     = "autoscaling.alpha.kubernetes.io/conditions"
	hpaBehaviorAnnotation       = "autoscaling.alpha.kubernetes.io/behavior"
)

func hpaServed() []ServedVersion {
	return []ServedVersion{{Version: "v1", ToStored: hpaV1ToV2, FromStored: hpaV2ToV1}}
}

// hpaV2ToV1: the cpu utilization metric becomes targetCPUUtilization
// Percentage, the other metrics, the behavior and the conditions
// annotations.
func hpaV2ToV1(m map[string]any) error {
	ann := func() map[string]any {
		meta, _ := m["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			m["metadata"] = meta
		}
		a, _ := meta["annotations"].(map[string]any)
		if a == nil {
			a = map[string]any{}
			meta["annotations"] = a
		}
		return a
	}
	if spec := SubTree(m, "spec"); spec != nil {
		if metrics, ok := spec["metrics"].([]any); ok {
			var other []any
			for _, x := range metrics {
				if u, ok := cpuUtilization(x, "target"); ok {
					spec["targetCPUUtilizationPercentage"] = u
					continue
				}
				other = append(other, x)
			}
			delete(spec, "metrics")
			if len(other) > 0 {
				if err := setJSONAnnotation(ann(), hpaMetricsAnnotation, other); err != nil {
					return err
				}
			}
		}
		if b, ok := spec["behavior"]; ok {
			delete(spec, "behavior")
			if err := setJSONAnnotation(ann(), hpaBehaviorAnnotation, b); err != nil {
				return err
			}
		}
	}
	if st := SubTree(m, "status"); st != nil {
		if metrics, ok := st["currentMetrics"].([]any); ok {
			var other []any
			for _, x := range metrics {
				if u, ok := cpuUtilization(x, "current"); ok {
					st["currentCPUUtilizationPercentage"] = u
					continue
				}
				other = append(other, x)
			}
			delete(st, "currentMetrics")
			if len(other) > 0 {
				if err := setJSONAnnotation(ann(), hpaCurrentMetricsAnnotation, other); err != nil {
					return err
				}
			}
		}
		if c, ok := st["conditions"]; ok {
			delete(st, "conditions")
			if err := setJSONAnnotation(ann(), hpaConditionsAnnotation, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// hpaV1ToV2 is the inverse: the annotations back into the spec and status.
func hpaV1ToV2(m map[string]any) error {
	var a map[string]any
	if meta := SubTree(m, "metadata"); meta != nil {
		a, _ = meta["annotations"].(map[string]any)
	}
	take := func(key string) (any, error) {
		s, ok := a[key].(string)
		if !ok {
			return nil, nil
		}
		delete(a, key)
		v, err := parseJSON([]byte(s))
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %w", key, err)
		}
		return v, nil
	}
	spec := SubTree(m, "spec")
	if spec != nil {
		var metrics []any
		if u, ok := spec["targetCPUUtilizationPercentage"]; ok {
			delete(spec, "targetCPUUtilizationPercentage")
			metrics = append(metrics, map[string]any{"type": ResourceMetricSourceType, "resource": map[string]any{
				"name": "cpu", "target": map[string]any{"type": UtilizationMetricType, "averageUtilization": u}}})
		}
		other, err := take(hpaMetricsAnnotation)
		if err != nil {
			return err
		}
		if o, ok := other.([]any); ok {
			metrics = append(metrics, o...)
		}
		if metrics != nil {
			spec["metrics"] = metrics
		}
		b, err := take(hpaBehaviorAnnotation)
		if err != nil {
			return err
		}
		if b != nil {
			spec["behavior"] = b
		}
	}
	if st := SubTree(m, "status"); st != nil {
		var metrics []any
		if u, ok := st["currentCPUUtilizationPercentage"]; ok {
			delete(st, "currentCPUUtilizationPercentage")
			metrics = append(metrics, map[string]any{"type": ResourceMetricSourceType, "resource": map[string]any{
				"name": "cpu", "current": map[string]any{"averageUtilization": u}}})
		}
		other, err := take(hpaCurrentMetricsAnnotation)
		if err != nil {
			return err
		}
		if o, ok := other.([]any); ok {
			metrics = append(metrics, o...)
		}
		if metrics != nil {
			st["currentMetrics"] = metrics
		}
		c, err := take(hpaConditionsAnnotation)
		if err != nil {
			return err
		}
		if c != nil {
			st["conditions"] = c
		}
	}
	if a != nil && len(a) == 0 {
		delete(SubTree(m, "metadata"), "annotations")
	}
	return nil
}

// cpuUtilization reports the averageUtilization of a Resource cpu metric
// (spec: of its Utilization target; status: of its current value).
func cpuUtilization(x any, field string) (any, bool) {
	mm, _ := x.(map[string]any)
	if mm["type"] != ResourceMetricSourceType {
		return nil, false
	}
	r := SubTree(mm, "resource")
	if r == nil || r["name"] != "cpu" {
		return nil, false
	}
	t := SubTree(r, field)
	if t == nil {
		return nil, false
	}
	if field == "target" && t["type"] != UtilizationMetricType {
		return nil, false
	}
	u, ok := t["averageUtilization"]
	return u, ok
}

func setJSONAnnotation(a map[string]any, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	a[key] = string(data)
	return nil
}
