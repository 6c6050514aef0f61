package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"skiff.dev/skiff/api"
	"skiff.dev/skiff/client"
	"skiff.dev/skiff/client/kubectl"
)

// The api-secure benchmark: the API benchmark's creates as a student of a
// classroom makes them, with every admission step a lab cluster runs on
// them: the student's client certificate (issued through the
// CertificateSigningRequest API), authorized by RBAC (the room's
// RoleBinding of edit), counted by the room's ResourceQuota, and checked
// by Pod Security at the namespace's enforce label. The room is set up by
// `skiff classroom create`'s own code (kubectl.CreateClassroom) with the
// admin credential, so it is exactly the classroom configuration; only
// the quota's pods are raised so that every create of the benchmark fits.
//
// It needs a build with RBAC, ResourceQuota admission, Pod Security
// admission and the CertificateSigningRequest API: hack/bench-ab.sh lists
// "secure" in such a build's features (older builds: n/a, and the table
// compares B's api-secure with A's plain api, the issue's goal).

const (
	benchRoom    = "bench"
	benchStudent = "student-01"
)

// secureSetup makes the room of one student on the target and returns the
// student's server config (its certificate, no token) and the namespace
// the creates go to.
func secureSetup(o *options, cfg serverConfig, dir string) (serverConfig, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, err := client.New(client.Config{Server: cfg.Server, Token: cfg.Token, CAData: cfg.CAData})
	if err != nil {
		return serverConfig{}, "", err
	}
	hard := api.ResourceList{
		"requests.nvidia.com/gpu": resource.MustParse("1"),
		// The classroom's default is pods=20: room for the benchmark's.
		"pods": *resource.NewQuantity(int64(o.apiClients*o.apiPerClient+10), resource.DecimalSI),
	}
	room := kubectl.Classroom{Name: benchRoom, Students: []string{benchStudent}, Hard: hard, Dir: filepath.Join(dir, "kubeconfigs")}
	teacher := kubectl.Teacher{Client: admin, Issue: kubectl.CSRIssuer(admin), Cluster: client.Config{Server: cfg.Server, CAData: cfg.CAData}}
	if err := kubectl.CreateClassroom(ctx, teacher, room); err != nil {
		return serverConfig{}, "", fmt.Errorf("classroom create: %w", err)
	}
	// The namespace's Pod Security label, as a teacher sets it.
	ns, err := client.Get[*api.Namespace](ctx, admin, "", benchStudent)
	if err != nil {
		return serverConfig{}, "", err
	}
	ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
	ns.Labels["pod-security.kubernetes.io/enforce-version"] = "latest"
	if _, err := client.Update(ctx, admin, ns); err != nil {
		return serverConfig{}, "", fmt.Errorf("label namespace %s: %w", benchStudent, err)
	}
	kc, err := client.LoadKubeconfig(filepath.Join(room.Dir, benchStudent+".kubeconfig"))
	if err != nil {
		return serverConfig{}, "", err
	}
	student := serverConfig{Server: cfg.Server, CAData: cfg.CAData, certData: kc.CertData, keyData: kc.KeyData}
	if len(student.certData) == 0 {
		return serverConfig{}, "", errors.New("the student's kubeconfig holds no client certificate")
	}
	// Wait until the quota controller has filled the quota's status (until
	// then admission refuses, as Kubernetes': "status unknown for quota")
	// and the student's binding has reached the authorizer: a list of the
	// namespace's pods as the student answers 200.
	hc, err := student.httpClient()
	if err != nil {
		return serverConfig{}, "", err
	}
	defer hc.CloseIdleConnections()
	for {
		q, qerr := client.Get[*api.ResourceQuota](ctx, admin, benchStudent, kubectl.ClassroomQuota)
		_, lerr := student.do(hc, "GET", "/api/v1/namespaces/"+benchStudent+"/pods", nil, http.StatusOK)
		if qerr == nil && lerr == nil && len(q.Status.Hard) == len(hard) {
			return student, benchStudent, nil
		}
		select {
		case <-ctx.Done():
			return serverConfig{}, "", fmt.Errorf("the student's room is not ready: quota %v, list pods as the student %v: %w", qerr, lerr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runAPISecure is runAPI as a student of a classroom (above).
func runAPISecure(o *options, b build, profile string) (figures, error) {
	return runAPIAs(o, b, profile, true)
}
