package api

import (
	"strings"
	"testing"
)

// jobYAML is a valid Job as the API server stores it after create: uid
// set, selector and labels generated.
func createdJob(tb testing.TB, y string) *Job {
	tb.Helper()
	o, _, err := DecodeAny([]byte(y))
	if err != nil {
		tb.Fatalf("decode: %v", err)
	}
	j := o.(*Job)
	j.Namespace, j.UID = "default", "uid-1"
	GenerateJobSelector(j)
	SetDefaults(j)
	return j
}

const baseJob = `apiVersion: batch/v1
kind: Job
metadata: {name: pi}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: pi, image: busybox}]
`

func TestValidateJob(t *testing.T) {
	tests := []struct {
		name string
		spec string // appended under spec:
		want []string
	}{
		{"valid", "", nil},
		{"restartPolicy Always", "", []string{`spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never"`}},
		{"Indexed needs completions", "  completionMode: Indexed\n  parallelism: 2\n", []string{"spec.completions: Required value: when completion mode is Indexed"}},
		{"unknown completionMode", "  completionMode: Sometimes\n", []string{`spec.completionMode: Unsupported value: "Sometimes": supported values: "NonIndexed", "Indexed"`}},
		{"backoffLimitPerIndex needs Indexed", "  backoffLimitPerIndex: 1\n", []string{"spec.backoffLimitPerIndex: Forbidden: requires indexed completion mode"}},
		{"maxFailedIndexes needs backoffLimitPerIndex", "  completionMode: Indexed\n  completions: 3\n  maxFailedIndexes: 1\n", []string{"spec.backoffLimitPerIndex: Required value: when maxFailedIndexes is specified"}},
		{"negative counts", "  parallelism: -1\n  backoffLimit: -2\n", []string{"spec.parallelism: Invalid value: -1: must be greater than or equal to 0", "spec.backoffLimit: Invalid value: -2: must be greater than or equal to 0"}},
		{"podFailurePolicy rules", `  podFailurePolicy:
    rules:
    - action: FailJob
      onExitCodes: {operator: In, values: [3, 0, 3]}
    - action: Explode
      onPodConditions: [{type: DisruptionTarget, status: Maybe}]
    - action: Ignore
    - action: FailIndex
      onExitCodes: {operator: Between, values: [1], containerName: nope}
`, []string{
			"spec.podFailurePolicy.rules[0].onExitCodes.values[1]: Invalid value: 0: must not be 0 for the In operator",
			"spec.podFailurePolicy.rules[0].onExitCodes.values[2]: Duplicate value: 3",
			"spec.podFailurePolicy.rules[0].onExitCodes.values: Invalid value: []int32{3, 0, 3}: must be ordered",
			`spec.podFailurePolicy.rules[1].action: Unsupported value: "Explode": supported values: "Count", "FailIndex", "FailJob", "Ignore"`,
			`spec.podFailurePolicy.rules[1].onPodConditions[0].status: Unsupported value: "Maybe": supported values: "False", "True", "Unknown"`,
			"spec.podFailurePolicy.rules[2]: Invalid value: specifying one of OnExitCodes and OnPodConditions is required",
			`spec.podFailurePolicy.rules[3].action: Invalid value: "FailIndex": requires the backoffLimitPerIndex to be set`,
			`spec.podFailurePolicy.rules[3].onExitCodes.operator: Unsupported value: "Between": supported values: "In", "NotIn"`,
			`spec.podFailurePolicy.rules[3].onExitCodes.containerName: Invalid value: "nope": must be one of the container or initContainer names in the pod template`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			y := baseJob
			if tc.name == "restartPolicy Always" {
				y = strings.Replace(y, "      restartPolicy: Never\n", "", 1)
			}
			y = strings.Replace(y, "spec:\n  template:", "spec:\n"+tc.spec+"  template:", 1)
			j := createdJob(t, y)
			var got []string
			for _, e := range Validate(j) {
				got = append(got, e.Error())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestValidateJobSelector(t *testing.T) {
	// Before create (as the CLI validates it) the selector is not there
	// yet: the server will generate it.
	o, _, err := DecodeAny([]byte(baseJob))
	if err != nil {
		t.Fatal(err)
	}
	if errs := Validate(o); len(errs) > 0 {
		t.Errorf("a job before create: %v", errs)
	}
	j := createdJob(t, baseJob)
	j.Spec.Selector.MatchLabels[ControllerUIDLabel] = "other"
	if got := Validate(j).Error(); !strings.Contains(got, "spec.selector: Invalid value:") || !strings.Contains(got, "`selector` not auto-generated") {
		t.Errorf("a hand-made selector without manualSelector: %s", got)
	}
	m := createdJob(t, strings.Replace(baseJob, "spec:\n  template:\n    spec:", "spec:\n  manualSelector: true\n  selector: {matchLabels: {app: pi}}\n  template:\n    metadata: {labels: {app: pi}}\n    spec:", 1))
	if errs := Validate(m); len(errs) > 0 {
		t.Errorf("manualSelector job: %v", errs)
	}
	if _, ok := m.Spec.Template.Labels[ControllerUIDLabel]; ok {
		t.Errorf("manualSelector: labels generated anyway: %v", m.Spec.Template.Labels)
	}
	m.Spec.Template.Labels = map[string]string{"app": "other"}
	if got := Validate(m).Error(); !strings.Contains(got, "`selector` does not match template `labels`") {
		t.Errorf("selector not matching: %s", got)
	}
}

func TestValidateJobUpdate(t *testing.T) {
	tests := []struct {
		name    string
		suspend bool
		started bool
		change  func(j *Job)
		wantErr string
	}{
		{"parallelism may change", false, true, func(j *Job) { j.Spec.Parallelism = ptr[int32](4) }, ""},
		{"suspend may change", false, true, func(j *Job) { j.Spec.Suspend = ptr(true) }, ""},
		{"image is fixed", false, true, func(j *Job) { j.Spec.Template.Spec.Containers[0].Image = "alpine" }, "spec.template: Invalid value: field is immutable: changed: spec.template.spec.containers"},
		{"selector is fixed", false, true, func(j *Job) { j.Spec.Selector.MatchLabels["x"] = "y" }, "spec.selector: Invalid value:"},
		{"completionMode is fixed", false, true, func(j *Job) { j.Spec.CompletionMode = ptr(IndexedCompletion); j.Spec.Completions = ptr[int32](1) }, `spec.completionMode: Invalid value: "Indexed": field is immutable`},
		{"suspended, not started: nodeSelector and tolerations may change", true, false, func(j *Job) {
			j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a"}
			j.Spec.Template.Spec.Tolerations = []Toleration{{Key: "gpu", Operator: "Exists"}}
		}, ""},
		{"suspended but started: nodeSelector is fixed", true, true, func(j *Job) { j.Spec.Template.Spec.NodeSelector = map[string]string{"pool": "a"} }, "changed: spec.template.spec.nodeSelector"},
		{"suspended, not started: the image is still fixed", true, false, func(j *Job) { j.Spec.Template.Spec.Containers[0].Image = "alpine" }, "changed: spec.template.spec.containers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := createdJob(t, baseJob)
			old.Spec.Suspend = ptr(tc.suspend)
			if tc.started {
				now := Now()
				old.Status.StartTime = &now
			}
			n := Clone(old)
			tc.change(n)
			SetDefaults(n)
			errs := ValidateUpdate(n, old)
			switch {
			case tc.wantErr == "" && len(errs) > 0:
				t.Errorf("refused: %v", errs)
			case tc.wantErr != "" && (len(errs) == 0 || !strings.Contains(errs.Error(), tc.wantErr)):
				t.Errorf("errors %v, want %q", errs, tc.wantErr)
			}
		})
	}
}

func TestJobUnsupportedFieldsRefused(t *testing.T) {
	y := strings.Replace(baseJob, "spec:\n  template:", "spec:\n  managedBy: kueue.x-k8s.io/multikueue\n  template:", 1)
	_, _, err := DecodeAny([]byte(y))
	if err == nil || !strings.Contains(err.Error(), "spec.managedBy: field not supported by skiff") {
		t.Errorf("decode = %v, want spec.managedBy refused", err)
	}
}
