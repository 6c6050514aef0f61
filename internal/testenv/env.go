package testenv

import (
	"context"
	"net"
	"os"
	"testing"
	"time"
)

// AddressEnv names the environment variable that holds the containerd socket
// integration tests use (hack/containerd-start.sh prints it).
const AddressEnv = "SKIFF_CONTAINERD_ADDRESS"

// ContainerdAddress returns the containerd socket to test against. Without
// SKIFF_CONTAINERD_ADDRESS the test is skipped, unless CI is set: in CI the
// test fails, so that a broken setup cannot pass by skipping. A socket that
// does not answer fails the test either way.
func ContainerdAddress(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(AddressEnv)
	if addr == "" {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatalf("CI=%s but %s is unset: start containerd with hack/containerd-start.sh and export %s=/run/skiff-ci/containerd.sock", ci, AddressEnv, AddressEnv)
		}
		t.Skipf("%s is unset: skipping tests that need containerd (sudo hack/containerd-start.sh; export %s=/run/skiff-ci/containerd.sock)", AddressEnv, AddressEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", addr)
	if err != nil {
		t.Fatalf("%s=%s: containerd does not answer: %v (is hack/containerd-start.sh running, and are tests run as root?)", AddressEnv, addr, err)
	}
	conn.Close()
	return addr
}

// RequireBusybox skips the test (fails it in CI) when busybox-static is not
// installed, since test images are built from it.
func RequireBusybox(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(BusyboxPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s missing: run hack/ci-deps.sh", BusyboxPath)
		}
		t.Skipf("%s missing (apt-get install busybox-static)", BusyboxPath)
	}
}
