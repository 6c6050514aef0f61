package runtime

import (
	"errors"
	"slices"
	"testing"
)

func TestResolveArgs(t *testing.T) {
	ep, cmd := []string{"/entry"}, []string{"default", "args"}
	tests := []struct {
		name          string
		command, args []string
		want          []string
	}{
		{name: "image defaults", want: []string{"/entry", "default", "args"}},
		{name: "command replaces entrypoint and drops cmd", command: []string{"sh"}, want: []string{"sh"}},
		{name: "command and args", command: []string{"sh", "-c"}, args: []string{"echo hi"}, want: []string{"sh", "-c", "echo hi"}},
		{name: "args replace cmd", args: []string{"x"}, want: []string{"/entry", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResolveArgs(ep, cmd, tt.command, tt.args); !slices.Equal(got, tt.want) {
				t.Errorf("ResolveArgs = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidateID(t *testing.T) {
	for _, id := range []string{"a", "abc-123", "pod.ns_c-1", "A1"} {
		if err := ValidateID(id); err != nil {
			t.Errorf("ValidateID(%q) = %v", id, err)
		}
	}
	for _, id := range []string{"", "-a", "a-", "a--b", "a b", "a/b", string(make([]byte, 77))} {
		if err := ValidateID(id); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("ValidateID(%q) = %v, want ErrInvalidSpec", id, err)
		}
	}
}

func TestTailLines(t *testing.T) {
	data := []byte("a\nb\nc\n")
	tests := []struct {
		n    int
		want string
	}{{-1, "a\nb\nc\n"}, {0, ""}, {1, "c\n"}, {2, "b\nc\n"}, {3, "a\nb\nc\n"}, {9, "a\nb\nc\n"}}
	for _, tt := range tests {
		if got := string(TailLines(data, tt.n)); got != tt.want {
			t.Errorf("TailLines(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
	if got := string(TailLines([]byte("a\nb"), 1)); got != "b" {
		t.Errorf("TailLines of an unterminated line = %q, want \"b\"", got)
	}
}

func TestNormalizeImageRef(t *testing.T) {
	tests := map[string]string{
		"busybox":                 "docker.io/library/busybox:latest",
		"nginx:alpine":            "docker.io/library/nginx:alpine",
		"ghcr.io/x/y:v1":          "ghcr.io/x/y:v1",
		"localhost:5000/app":      "localhost:5000/app:latest",
		"docker.io/library/a:1.0": "docker.io/library/a:1.0",
	}
	for in, want := range tests {
		if got, err := NormalizeImageRef(in); err != nil || got != want {
			t.Errorf("NormalizeImageRef(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := NormalizeImageRef("nginx:bad tag"); err == nil {
		t.Error("NormalizeImageRef(nginx:bad tag) succeeded")
	}
}

func TestPullErrorIs(t *testing.T) {
	notFound := error(&PullError{Ref: "x", Err: errors.New("404"), NotFound: true})
	if !errors.Is(notFound, ErrImageNotFound) {
		t.Error("not-found pull error is not ErrImageNotFound")
	}
	if errors.Is(&PullError{Ref: "x", Err: errors.New("timeout")}, ErrImageNotFound) {
		t.Error("unreachable registry reads as ErrImageNotFound")
	}
}
